"""Every shipped recipe loads, and its backend stack is built on CPU up to the device boundary
(where CUDA, SGLang, a model's weights or the Tinker service would be touched)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from spade_train.backends import BackendSpec, available_backends, register_backend
from spade_train.backends.options import BackendOptions, LocalOptions
from spade_train.config import list_recipes, load_recipe
from spade_train.errors import RecipeError, RegistryError, SpadeTrainError

RECIPES = list_recipes()


@pytest.mark.parametrize("name", RECIPES)
def test_every_recipe_builds_its_backend_stack(name: str) -> None:
    cfg = load_recipe(name)
    plan = cfg.backend.plan()
    assert plan["backend"] == cfg.backend.name
    kwargs = cfg.backend.backend_kwargs(cfg.seed)
    assert kwargs["model"] == cfg.backend.model and kwargs["seed"] == cfg.seed
    if cfg.backend.name == "ray":
        inner = plan["inner"]
        assert plan["placement_group"] and plan["trainer"]["inner"] == kwargs["inner"]
        if kwargs["inner"] == "megatron":  # the parallel layout fits the trainer's GPUs
            par = inner["parallel"]
            assert par["tp"] * par["pp"] * par["dp"] == inner["world_size"]
            assert par["dp"] % par["ep"] == 0


def test_recipes_share_a_base_and_bases_are_not_listed() -> None:
    assert not any(n.startswith("_") for n in RECIPES)
    for size in ("4b", "8b", "30b"):
        assert load_recipe(f"spade-games-{size}").backend.options["inner"] == "megatron"


@pytest.mark.parametrize("name", RECIPES)
def test_a_bogus_backend_option_is_a_one_line_error_naming_the_key(name: str) -> None:
    cfg = load_recipe(name)
    key = "backend.options.bogus=1"
    if cfg.backend.name == "ray":
        key = "backend.options.inner_options.bogus=1"
    with pytest.raises(RecipeError) as info:
        load_recipe(name, [key])
    message = str(info.value)
    assert "\n" not in message and key.split("=")[0] in message


def test_dry_run_cli_names_the_misplaced_key() -> None:
    # tensor_parallel belongs to the inner megatron backend, not to the ray backend itself
    proc = subprocess.run(
        [sys.executable, "-m", "spade_train.cli", "train", "--recipe", "spade-games-8b",
         "--dry-run", "backend.options.tensor_parallel=2"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "backend.options.tensor_parallel: not an option of the ray backend" in lines[0]


def test_backend_registry_refuses_duplicates_and_takes_new_backends() -> None:
    with pytest.raises(RegistryError, match="already registered"):
        register_backend(BackendSpec("local", lambda **kw: None, LocalOptions))  # type: ignore[arg-type, return-value]

    class EchoOptions(BackendOptions):
        width: int = 1
        """A plug-in's option (described: the registry outlives this test, and the config
        reference test requires every registered field to be described)."""

    name = "echo-test-backend"
    if name not in available_backends():
        register_backend(BackendSpec(name, lambda **kw: kw, EchoOptions))  # type: ignore[arg-type, return-value]
    cfg = load_recipe("quickstart", [f"backend.name={name}", "backend.options.width=3"])
    assert cfg.backend.backend_kwargs(0)["width"] == 3
    with pytest.raises(RecipeError, match=f"backend.options.height: not an option of the {name}"):
        load_recipe("quickstart", [f"backend.name={name}", "backend.options.height=3"])


def test_errors_share_one_root_and_keep_their_stdlib_bases() -> None:
    import pickle

    from spade_train.errors import BackendError, ModelError, RunDirError

    for cls, base in ((RecipeError, ValueError), (BackendError, RuntimeError),
                      (RunDirError, RuntimeError), (ModelError, RuntimeError)):  # fmt: skip
        err = cls("x: fix it")
        assert isinstance(err, SpadeTrainError) and isinstance(err, base)
        again = pickle.loads(pickle.dumps(err))
        assert type(again) is cls and str(again) == "x: fix it"


# -- declared support: a key the training backend ignores fails `spade train` ----------------


@pytest.mark.parametrize("name", RECIPES)
def test_dry_run_refuses_exactly_the_keys_the_backend_does_not_honour(name, capsys) -> None:
    from spade_train.cli import main

    cfg = load_recipe(name)
    who, keys = cfg.backend.unhonoured()
    code = main(["train", "--recipe", name, "--dry-run"])
    out, err = capsys.readouterr()
    if not keys:
        assert code == 0 and "nothing was started" in out, err
        return
    assert code == 2 and "nothing was started" not in out
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert f"not honoured by the {who} backend" in lines[0]
    for key in keys:
        assert f"backend.{key}" in lines[0]


def test_a_key_the_backend_ignores_is_named_with_the_backend(capsys) -> None:
    from spade_train.cli import main

    # the Tinker backend has no KL term: asking for one must not be a silent no-op
    assert main(["train", "--recipe", "tinker-qwen3-8b", "--dry-run", "backend.kl_coef=0.1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "backend.kl_coef: not honoured by the tinker backend" in err
    # the same key at its default is not a request, and the local backend honours it anyway
    assert main(["train", "--recipe", "tinker-qwen3-8b", "--dry-run", "backend.kl_coef=0"]) == 0
    assert main(["train", "--recipe", "quickstart", "--dry-run", "backend.kl_coef=0.1"]) == 0
    # ray trains with its inner backend: the inner one's support decides
    cfg = load_recipe(
        "spade-games-4b", ["backend.options.inner=local", "backend.options.inner_options={}"]
    )
    assert cfg.backend.unhonoured() == ("local", [])
