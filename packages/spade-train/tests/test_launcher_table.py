"""cmd/README.md's table of upstream launcher flags → recipe keys → values agrees with the
shipped recipes (it is generated from them by scripts/launcher_table.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from spade_train.config import load_recipe

ROOT = Path(__file__).resolve().parents[3]


def _table():
    spec = importlib.util.spec_from_file_location(
        "launcher_table", ROOT / "scripts/launcher_table.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_table_is_the_one_the_recipes_give(monkeypatch) -> None:
    monkeypatch.delenv("MODEL_ROOT", raising=False)  # the table shows ${MODEL_ROOT} as written
    table = _table()
    text = (ROOT / "cmd/README.md").read_text(encoding="utf-8")
    block = text.split(table.BEGIN, 1)[1].split(table.END, 1)[0]
    assert block == "\n" + table.render(), (
        "cmd/README.md is out of date: run uv run python scripts/launcher_table.py --write"
    )


def test_every_difference_from_upstream_has_a_note(monkeypatch) -> None:
    monkeypatch.delenv("MODEL_ROOT", raising=False)
    table = _table()
    assert table.undocumented() == []
    recipes = {r for _t, fam in table.families() for r in fam}
    launchers = {launcher for _t, fam in table.families() for launcher, _f in fam.values()}
    assert (
        len(launchers) == 3 + 3 + 3 + 3 + 7 + 5
    )  # games, fixed, tool use, RLVE, ablations, Tinker
    for name in recipes:
        assert load_recipe(name).name == name


def test_a_recipe_that_drifts_from_upstream_is_caught() -> None:
    table = _table()
    drifted = load_recipe("spade-games-8b", ["agent.max_turns=6", "backend.kl_coef=0.0"])
    assert table.cell(drifted, "--spade-max-turns", 25) == ("6 ≠ 25", False)
    assert table.cell(drifted, "--kl-loss-coef", 0.005) == ("0 ≠ 0.005", False)
    assert table.cell(drifted, "--spade-skills", ["Mathematical_Reasoning"])[1] is False
    ok = load_recipe("spade-games-8b")
    assert table.cell(ok, "--disable-grpo-std-normalization", True) == ("false", True)
    assert table.cell(ok, "--context-parallel-size", 2)[1] is False  # no key: always noted
    # TIS on, clipped at 2: matched only where the training backend applies it
    local = load_recipe(
        "spade-games-8b", ["backend.options.inner=local", "backend.options.inner_options={}"]
    )
    assert table.cell(local, "--use-tis", True) == ("2", True)
    tinker = load_recipe("tinker-qwen3-8b", ["backend.tis_clip=2.0"])
    assert table.cell(tinker, "--use-tis", True) == ("2 (ignored by tinker)", False)


def test_a_key_its_backend_ignores_never_shows_as_matched(monkeypatch) -> None:
    monkeypatch.delenv("MODEL_ROOT", raising=False)
    table = _table()
    for _title, recipes in table.families():
        for recipe, (_launcher, flags) in recipes.items():
            cfg = load_recipe(recipe)
            who, ignored = cfg.backend.unhonoured()
            for flag, upstream in flags.items():
                key = table.FLAGS[flag][0] or ""
                text, agrees = table.cell(cfg, flag, upstream)
                if key.removeprefix("backend.") in ignored:
                    assert text.endswith(f"(ignored by {who})") and not agrees, (recipe, flag)
                else:
                    assert "(ignored by" not in text, (recipe, flag)
    assert all(": " in line for line in table.ignored())
