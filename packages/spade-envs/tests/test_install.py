"""``pip install ./packages/spade-envs`` (with its data package ``spade-envs-corpora``, which a
registry would resolve by name) into a fresh virtual environment, then play the shipped corpus
with the installed console script: the package stands alone and pulls gymnasium and little else. Needs pip to reach a package index; skipped, saying so, only when it cannot."""

from __future__ import annotations

import json
import os
import re
import subprocess
import venv
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PACKAGE = Path(__file__).resolve().parents[1]
CORPORA = PACKAGE.parent / "spade-envs-corpora"
SHIPPED_MANIFEST = CORPORA / "src" / "spade_envs_corpora" / "example" / "manifest.jsonl"

#: Everything `pip install spade-envs` may bring: the package, its two declared dependencies and
#: gymnasium's own (numpy, cloudpickle, typing-extensions, farama-notifications), plus the venv's
#: pip/setuptools. A new name here is a decision, not an accident.
ALLOWED = {
    "spade-envs",
    "spade-envs-corpora",
    "gymnasium",
    "tqdm",
    "numpy",
    "cloudpickle",
    "typing-extensions",
    "farama-notifications",
    "pip",
    "setuptools",
    "wheel",
    "colorama",
}
FORBIDDEN = {
    "torch",
    "ray",
    "sglang",
    "megatron-core",
    "docker",
    "transformers",
    "vllm",
    "pyarrow",
    "gem-llm",
}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def clean_env() -> dict[str, str]:
    """This process's environment without what would point Python at the checkout or our venv."""
    drop = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
    return {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("UV_")}


def pip(python: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(),
    )


def skip_unless_an_index_answers(
    python: Path, scratch: Path, failure: subprocess.CompletedProcess
) -> None:
    """After a failed install: skip if pip cannot fetch even a tiny package, else fail with the log."""
    probe = pip(
        python, "download", "--no-deps", "--dest", str(scratch), "farama-notifications", timeout=60
    )
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"pip cannot reach a package index ({last})")
    pytest.fail(
        f"pip install ./packages/spade-envs failed:\n{failure.stdout[-3000:]}\n{failure.stderr[-3000:]}"
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with spade-envs installed from this checkout; returns its bin directory."""
    root = tmp_path_factory.mktemp("install")
    venv.create(root / "venv", with_pip=True, clear=True)
    python = root / "venv" / "bin" / "python"
    proc = pip(python, "install", str(CORPORA), str(PACKAGE))
    if proc.returncode != 0:
        skip_unless_an_index_answers(python, root / "probe", proc)
    return python.parent


def installed_distributions(bin_dir: Path) -> set[str]:
    proc = pip(bin_dir / "python", "list", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return {normalized(d["name"]) for d in json.loads(proc.stdout)}


def test_install_pulls_gymnasium_and_nothing_heavy(installed):
    names = installed_distributions(installed)
    assert {"spade-envs", "gymnasium", "tqdm"} <= names
    assert not names & FORBIDDEN, f"heavy dependencies installed: {sorted(names & FORBIDDEN)}"
    own = {"spade-envs", "spade-envs-corpora"}
    other_spade = sorted(n for n in names if n.startswith("spade-") and n not in own)
    assert not other_spade, f"other spade packages installed: {other_spade}"
    assert names <= ALLOWED, f"unexpected dependencies: {sorted(names - ALLOWED)}"


def test_installed_package_is_the_venv_copy_not_the_checkout(installed, tmp_path):
    proc = subprocess.run(
        [str(installed / "python"), "-c", "import spade_envs; print(spade_envs.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    where = Path(proc.stdout.strip()).resolve()
    assert installed.parent.resolve() in where.parents and PACKAGE not in where.parents
    corpora = subprocess.run(
        [
            str(installed / "python"),
            "-c",
            "import spade_envs as se; print(se.example_corpus_path())",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(),
        timeout=60,
    )
    assert corpora.returncode == 0, corpora.stderr
    shipped = Path(corpora.stdout.strip()).resolve()
    assert installed.parent.resolve() in shipped.parents and (shipped / "manifest.jsonl").is_file()


def test_installed_script_plays_the_shipped_corpus(installed, tmp_path):
    env_id = json.loads(SHIPPED_MANIFEST.read_text(encoding="utf-8").splitlines()[0])["id"]
    proc = subprocess.run(
        [
            str(installed / "spade-envs"),
            "play",
            "example",
            env_id,
            "--agent",
            "random",
            "--episodes",
            "3",
            "--transcripts",
            str(tmp_path / "t"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].split()[:2] == ["env_id", "episodes"]
    row = lines[1].split()
    assert row[0] == env_id and row[1] == "3" and row[-1] == "0"  # three episodes, no errors
    assert 0.0 <= float(row[2]) <= 1.0
    assert len(list((tmp_path / "t").glob("*.json"))) == 3


def test_installed_script_lists_every_shipped_environment(installed, tmp_path):
    proc = subprocess.run(
        [str(installed / "spade-envs"), "list", "example"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    shipped = [
        json.loads(line)["id"]
        for line in SHIPPED_MANIFEST.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    listed = [line.split()[0] for line in proc.stdout.strip().splitlines()[1 : 1 + len(shipped)]]
    assert listed == shipped
    assert proc.stdout.strip().splitlines()[-1].startswith(f"{len(shipped)} environments (")


def test_installed_gymnasium_make_works_without_the_checkout(installed, tmp_path):
    env_id = json.loads(SHIPPED_MANIFEST.read_text(encoding="utf-8").splitlines()[0])["id"]
    code = (
        "import gymnasium, spade_envs\n"
        f"env = gymnasium.make('spade/{env_id}')\n"
        "obs, info = env.reset(seed=1)\n"
        "assert isinstance(obs, str) and obs\n"
        "obs, reward, terminated, truncated, info = env.step('\\\\boxed{0}')\n"
        "print(type(env.unwrapped).__name__, isinstance(reward, float))\n"
    )
    proc = subprocess.run(
        [str(installed / "python"), "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["SpadeGymEnv", "True"]
