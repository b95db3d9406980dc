"""Recipes load, overrides apply, mistakes become one-line RecipeErrors, dump round-trips."""

from __future__ import annotations

import pytest
import yaml
from spade_train.config import (
    RecipeError,
    RunConfig,
    dump_config,
    list_recipes,
    load_recipe,
)

EXPECTED = {
    "quickstart",
    "quickstart-tool-use",
    *(
        f"{kind}-{size}"
        for kind in ("spade-games", "fixed-static", "fixed-procedural", "spade-tool-use")
        for size in ("4b", "8b", "30b")
    ),
    "ablation-no-hint-regret",
    "ablation-no-role-norm",
    "ablation-no-memory",
    "ablation-no-grounding",
    "ablation-no-ed-training-no-memory",
    "ablation-fixed-gpt55",
    "ablation-two-skill",
    "ablation-learning-potential",
    "ablation-solve-rate",
    *(
        f"tinker-{m}"
        for m in (
            "qwen3-8b",
            "qwen3-8b-base",
            "qwen3-4b-instruct",
            "qwen3-30b-instruct",
            "gpt-oss-20b",
        )
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_shipped_recipe_loads(name: str) -> None:
    assert name in list_recipes()
    cfg = load_recipe(name)
    assert isinstance(cfg, RunConfig)
    assert cfg.name == name


def test_recipe_specifics(monkeypatch: pytest.MonkeyPatch) -> None:
    q = load_recipe("quickstart")
    assert (q.cycles, q.designer.prompts_per_cycle, q.designer.group_size) == (2, 2, 2)
    assert (q.agent.envs_per_cycle, q.agent.episodes_per_env, q.agent.max_turns) == (6, 4, 3)
    assert q.backend.name == "local" and q.backend.model == "embedded:smollm2-135m"
    assert load_recipe("quickstart-tool-use").setting == "tool-use"
    assert load_recipe("ablation-no-hint-regret").reward.designer == "solve-rate"
    assert load_recipe("ablation-no-role-norm").advantage.role_normalization is False
    assert load_recipe("ablation-no-memory").designer.memory.enabled is False
    assert load_recipe("ablation-no-grounding").designer.grounding.enabled is False
    assert load_recipe("fixed-procedural-8b").mode == "fixed-procedural"
    # ${VAR}: expanded when set, left as is otherwise.
    monkeypatch.delenv("MODEL_ROOT", raising=False)
    assert load_recipe("spade-games-8b").backend.model == "${MODEL_ROOT}/Qwen3-8B"
    monkeypatch.setenv("MODEL_ROOT", "/models")
    cfg = load_recipe("spade-games-8b")
    assert cfg.backend.model == "/models/Qwen3-8B"
    assert cfg.backend.name == "ray" and cfg.designer.group_size == 8


def test_overrides_ints_floats_lists_nested() -> None:
    cfg = load_recipe(
        "quickstart",
        [
            "cycles=5",
            "backend.lr=3e-4",
            "designer.skills=[Math, Logic]",
            "designer.memory.band=[0.2, 0.8]",
            "reward.designer=blend",
            "backend.options.betas=[0.8, 0.9]",
        ],
    )
    assert cfg.cycles == 5
    assert cfg.backend.lr == pytest.approx(3e-4)
    assert cfg.designer.skills == ["Math", "Logic"]
    assert cfg.designer.memory.band == (0.2, 0.8)
    assert cfg.reward.designer == "blend"
    assert cfg.backend.options == {"betas": [0.8, 0.9]}
    assert cfg.designer.group_size == 2  # untouched keys keep the recipe's values


def test_backend_kwargs_merge_typed_options_and_seed() -> None:
    cfg = load_recipe(
        "quickstart",
        [
            "seed=7",
            "backend.name=ray",
            "backend.options={colocate: false, inner_options: {betas: [0.5, 0.6]}}",
        ],
    )
    kw = cfg.backend.backend_kwargs(cfg.seed)
    assert kw["seed"] == 7 and kw["colocate"] is False and kw["betas"] == (0.5, 0.6)
    assert kw["inner"] == "local" and kw["num_rollout_workers"] == 1  # typed defaults filled in
    assert "name" not in kw and "options" not in kw and "inner_options" not in kw
    assert kw["model"] == cfg.backend.model


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["designer.group_sise=3"],
            "recipe quickstart: designer.group_sise: unknown key (did you mean group_size?)",
        ),
        (["cycles=zero"], "recipe quickstart: cycles: "),
        (["cycles=0"], "recipe quickstart: cycles: Input should be greater than or equal to 1"),
        (["mode=spades"], "recipe quickstart: mode: Input should be 'spade'"),
        (
            ["designer.skills=[Maths]"],
            "designer.skills.0: 'Maths' is not a skill (did you mean Math?)",
        ),
        (["cycles"], "recipe quickstart: bad override 'cycles'; write key.path=value"),
        (["=3"], "bad override"),
        (["designer..k=3"], "bad override"),
        (["cycles.x=3"], "recipe quickstart: override cycles.x: cycles is not a section"),
        (
            ["reward.designer=blend", "reward.plateau_low=0.9"],
            "recipe quickstart: reward.options: plateau_low must not exceed plateau_high",
        ),
        (
            ["reward.plateau_weight=0.9"],
            "reward.plateau_weight: an option of blend, not of the regret designer reward",
        ),
        (
            ["reward.designer=solve-rate", "reward.options.regret_weight=0.1"],
            "reward.options.regret_weight: not an option of the solve-rate reward (an option "
            "of blend)",
        ),
        (
            ["designer.scaffold=true", "designer.hint_source=reply"],
            "it has no hint; set designer.hint_source=policy (or endpoint)",
        ),
    ],
)
def test_errors_are_one_line(overrides: list[str], expected: str) -> None:
    with pytest.raises(RecipeError) as info:
        load_recipe("quickstart", overrides)
    msg = str(info.value)
    assert "\n" not in msg
    assert expected in msg


def test_unknown_recipe_suggests(tmp_path) -> None:
    with pytest.raises(
        RecipeError, match=r"unknown recipe 'quickstrat'; did you mean quickstart\?"
    ):
        load_recipe("quickstrat")
    with pytest.raises(RecipeError, match="does not exist"):
        load_recipe(str(tmp_path / "none.yaml"))


def test_file_recipe_with_base_and_bad_yaml(tmp_path) -> None:
    child = tmp_path / "mine.yaml"
    child.write_text("base: quickstart\ndesigner:\n  group_size: 5\n", encoding="utf-8")
    cfg = load_recipe(str(child))
    assert cfg.name == "mine" and cfg.designer.group_size == 5
    assert cfg.designer.prompts_per_cycle == 2  # inherited
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n", encoding="utf-8")
    with pytest.raises(RecipeError, match="not valid YAML"):
        load_recipe(str(bad))
    loop = tmp_path / "loop.yaml"
    loop.write_text(f"base: {loop}\n", encoding="utf-8")
    with pytest.raises(RecipeError, match="loops back"):
        load_recipe(str(loop))
    typo = tmp_path / "typo.yaml"
    typo.write_text("base: quickstart\nagnet:\n  max_turns: 2\n", encoding="utf-8")
    with pytest.raises(RecipeError, match=r"typo: agnet: unknown key \(did you mean agent\?\)"):
        load_recipe(str(typo))


@pytest.mark.parametrize("name", ["quickstart", "spade-games-30b", "fixed-procedural-4b"])
def test_dump_load_round_trip(name: str, tmp_path) -> None:
    cfg = load_recipe(name, ["seed=3"])
    path = tmp_path / "config.yaml"
    path.write_text(dump_config(cfg), encoding="utf-8")
    again = load_recipe(str(path))
    assert again == cfg
    assert yaml.safe_load(path.read_text())["seed"] == 3


def test_local_thread_and_reuse_options_reach_the_backend() -> None:
    cfg = load_recipe("quickstart", ["backend.options={threads: 1, reuse_kv: false}"])
    kw = cfg.backend.backend_kwargs(cfg.seed)
    assert kw["threads"] == 1 and kw["reuse_kv"] is False
    with pytest.raises(Exception, match="threads"):
        load_recipe("quickstart", ["backend.options.threads=0x"])


def test_reward_variants_have_typed_options_flat_or_nested_and_keep_to_their_own() -> None:
    from spade_train.core.reward_options import BlendOptions, RewardOptions, SolveRateOptions

    flat = load_recipe("quickstart", ["reward.designer=blend", "reward.plateau_weight=0.3"])
    nested = load_recipe(
        "quickstart", ["reward.designer=blend", "reward.options.plateau_weight=0.3"]
    )
    assert flat.reward == nested.reward and flat.reward.options == {"plateau_weight": 0.3}
    typed = flat.reward.variant_options()
    assert isinstance(typed, BlendOptions) and typed.plateau_weight == 0.3
    assert typed.regret_weight == 0.4  # the rest: the variant's defaults
    regret = load_recipe("quickstart").reward.variant_options()
    assert type(regret) is RewardOptions and not type(regret).model_fields
    # the 30B recipe writes blend's options; the ablation that picks learning-potential (and
    # an override that picks solve-rate) starts from its own variant's defaults
    assert load_recipe("spade-games-30b").reward.options["plateau_weight"] == 0.6
    assert load_recipe("ablation-learning-potential").reward.options == {}
    switched = load_recipe("spade-games-30b", ["reward.designer=solve-rate"]).reward
    assert switched.options == {} and isinstance(switched.variant_options(), SolveRateOptions)
    # the run directory's config.yaml loads back to the same settings
    again = yaml.safe_load(dump_config(flat))["reward"]
    assert again["options"] == {"plateau_weight": 0.3} and "plateau_weight" not in again


def _sections(model: type) -> list[type]:
    """``model`` and every model nested in its fields."""
    import typing

    from pydantic import BaseModel

    seen, todo = [], [model]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.append(m)
            for f in m.model_fields.values():
                todo += [
                    t
                    for t in (f.annotation, *typing.get_args(f.annotation))
                    if isinstance(t, type) and issubclass(t, BaseModel)
                ]
    return seen


def test_every_config_field_is_described() -> None:
    """The docs' config reference is rendered from these descriptions (the field's docstring):
    a field without one fails here, in the run's config, each backend's options and each
    designer reward's options."""
    from spade_train.backends import available_backends, backend_spec
    from spade_train.core.rewards import DESIGNER_REWARDS

    models = _sections(RunConfig)
    models += [backend_spec(name).options for name in available_backends()]
    models += [DESIGNER_REWARDS.get(name).options for name in DESIGNER_REWARDS.names()]
    fields = {(m.__name__, n): f for m in models for n, f in m.model_fields.items()}
    missing = sorted(
        f"{m}.{n}" for (m, n), f in fields.items() if not (f.description or "").strip()
    )
    assert not missing, f"config fields without a description: {', '.join(missing)}"
    assert len(fields) > 200 and fields[("RunConfig", "cycles")].description.startswith("How many")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "is empty; a recipe is a mapping of keys"),
        ("# only a comment\n", "is empty; a recipe is a mapping of keys"),
        ("- a\n- list\n", "top level must be a mapping of keys, not a list"),
        ("just words\n", "top level must be a mapping of keys, not a str"),
    ],
)
def test_an_empty_or_non_mapping_recipe_is_refused_in_one_line(tmp_path, text, expected) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RecipeError) as info:
        load_recipe(str(path))
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_a_directory_given_as_a_recipe_is_named_a_directory(tmp_path) -> None:
    for given in (tmp_path, tmp_path / "looks.yaml"):
        given.mkdir(exist_ok=True)
        with pytest.raises(RecipeError, match="is a directory; give a recipe's .yaml file"):
            load_recipe(str(given))


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("cycles=99999999999999999999999", "cycles"),
        ("agent.envs_per_cycle=1000001", "agent.envs_per_cycle"),
        ("designer.group_size=10000000", "designer.group_size"),
        ("designer.sampling.max_new_tokens=1048577", "designer.sampling.max_new_tokens"),
        ("backend.max_seq_len=99999999999", "backend.max_seq_len"),
        ("validation.workers=5000000", "validation.workers"),
        ("backend.options.inner=local", None),  # (the local backend has no inner: refused too)
    ],
)
def test_counts_and_sizes_have_upper_bounds(override: str, key: str | None) -> None:
    with pytest.raises(RecipeError) as info:
        load_recipe("quickstart", [override])
    if key is not None:
        assert f"{key}: Input should be less than or equal to" in str(info.value)
    assert load_recipe("quickstart", ["cycles=1000000"]).cycles == 1_000_000  # the bound itself
