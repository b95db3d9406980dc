"""The suite registry: duplicates refused, extension by register_suite and by entry points,
and `spade-eval list`."""

import subprocess
import sys
import textwrap

import pytest
import spade_eval
from spade_envs import RegistryError
from spade_eval import CallableClient, Item, Score, evaluate, register_suite
from spade_eval import suites as registry

PY = sys.executable


class Echo:
    """A tiny outside suite: the reply must repeat the prompt."""

    def load(self, config):
        return [Item(f"e/{i}", [{"role": "user", "content": f"say {i}"}], str(i)) for i in range(3)]

    def score(self, item, response):
        return Score(float(response == item.answer), response)

    def metrics(self, by_item):
        return {"echo_acc": sum(v[0] for v in by_item.values()) / len(by_item)}


@pytest.fixture
def clean_registry(monkeypatch):
    monkeypatch.setattr(registry, "SUITES", registry.SUITES.copy())


def test_register_and_refuse_duplicates(clean_registry, tmp_path):
    register_suite("echo", Echo())
    with pytest.raises(RegistryError, match="'echo' is already registered"):
        register_suite("echo", Echo())
    with pytest.raises(RegistryError, match="'aime' is already registered"):
        register_suite("aime", Echo())
    with pytest.raises(RegistryError, match="needs load"):
        register_suite("broken", object())
    assert spade_eval.suite_names()[-1] == "echo"
    client = CallableClient(lambda batch, s: [c[-1]["content"].split()[-1] for c in batch])
    res = evaluate(client, {"suites": {"echo": {}}}, tmp_path, progress=False)
    assert res["suites"]["echo"]["mean"] == 1.0 and res["metrics"] == {"echo_acc": 1.0}


def test_entry_point_suite_is_found(tmp_path, monkeypatch, clean_registry):
    pkg = tmp_path / "ext_suite.py"
    pkg.write_text(
        textwrap.dedent("""
        from spade_eval import Item, Score
        def load(config):
            return [Item("x/0", [{"role": "user", "content": "q"}], "a")]
        def score(item, response):
            return Score(1.0, response)
    """)
    )
    dist = tmp_path / "ext_suite-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ext-suite\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[spade_eval.suites]\next = ext_suite\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "SUITES", registry.SUITES.copy())  # entry points read again
    assert "ext" in spade_eval.suite_names()
    assert spade_eval.get_suite("ext").load({})[0].id == "x/0"


def test_unknown_suite_lists_the_known_ones():
    with pytest.raises(RegistryError, match="unknown suite 'nope'; choose from math, science"):
        spade_eval.get_suite("nope")


def test_list_shows_every_suite_and_its_data(workspace):
    proc = subprocess.run([PY, "-m", "spade_eval.cli", "list"], capture_output=True, text=True,
                          timeout=120, env={**__import__("os").environ})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for name in spade_eval.SUITE_NAMES:
        assert any(line.startswith(f"{name}: ") for line in lines), name
    assert any("aime-2025/aime-2025.jsonl: present" in line for line in lines)
    missing = [line for line in lines if line.startswith("science: ")][0]
    assert "gpqa_diamond.jsonl: MISSING (" in missing


@pytest.mark.parametrize("config", ["default", "quick", "full", "paper", "inloop"])
def test_shipped_configs_have_only_known_keys(config):
    from spade_eval import load_config
    from spade_eval.suites import suite_config

    for name, cfg in (load_config(config)["suites"] or {}).items():
        cfg = dict(cfg or {})
        cfg.pop("sampling", None)
        suite = spade_eval.get_suite(name)
        assert suite_config(suite.DEFAULTS, cfg, name)
