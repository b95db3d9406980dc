"""The seams between the steps: one environment source per mode (registered by name), frozen
design records with their verdict, and the run's resources opened and closed as one."""

from __future__ import annotations

import dataclasses
import os
import time
import typing
from pathlib import Path

import pytest
import spade_corpus as sc
import spade_envs as se
import spade_sandbox as ss
from spade_envs import RegistryError
from spade_train.backends.local import LocalBackend
from spade_train.config import RunConfig, load_recipe
from spade_train.core import judges
from spade_train.resources import NO_GROUNDING, QUIET, open_resources
from spade_train.rundir import RunDir
from spade_train.sources import ENV_SOURCES, DesignerSource, StaticSource, make_source
from spade_train.steps.records import Attempt, Design, Evidence, Validated, Verdict
from spade_train.types import Generation
from test_loop import SMALL, good_reply


def test_every_mode_has_its_environment_source_and_names_are_taken_once() -> None:
    modes = list(typing.get_args(RunConfig.model_fields["mode"].annotation))
    assert ENV_SOURCES.names() == modes
    seen = {}
    for mode in modes:
        if mode == "fixed-rlve" and not se.rlve_env_ids():
            continue  # rlve-gym not installed (spade-train[rlve])
        source = make_source(load_recipe("quickstart", [*SMALL, f"mode={mode}"]))
        seen[mode] = (source.plays_pool, source.measures_regret, source.sandbox_pool)
    assert seen["spade"] == (True, True, True)  # the designer's: pool draws, hint plays
    assert seen["fixed-static"] == (True, False, True)
    assert seen["fixed-procedural"] == (False, False, True)  # only its fresh environments
    if "fixed-rlve" in seen:
        assert seen["fixed-rlve"] == (False, False, False)  # RLVE runs in this process
    with pytest.raises(RegistryError, match="environment source 'spade' is already registered"):
        ENV_SOURCES.copy().register("spade", DesignerSource)
    with pytest.raises(FileNotFoundError, match="fixed.corpus: /nowhere does not exist"):
        StaticSource(load_recipe("quickstart", ["mode=fixed-static", "fixed.corpus=/nowhere"]))


def _design(**changes: object) -> Design:
    gen = Generation("reply", [1], [2, 3], [-0.1, -0.2])
    return dataclasses.replace(Design(0, 1, "Math", "reply", gen), **changes)  # type: ignore[arg-type]


def test_design_records_are_frozen_and_a_verdict_says_what_became_of_them() -> None:
    design = _design(source="class XEnv: pass", env_id="c0001_p0_g1_abc")
    with pytest.raises(dataclasses.FrozenInstanceError):
        design.hint = "changed"  # type: ignore[misc]
    passed = sc.ValidationReport(True, None, "ok", "runtime")
    slot = Validated(design, Verdict(report=passed))
    assert slot.valid and slot.reason is None and slot.parsed
    gate = judges.GateResult(True, "reject", checked=3, threw=3)
    rejected = Validated(
        design,
        Verdict(
            report=passed,
            rejected="reset_gate",
            rejected_message="criteria raised at all 3 seeds",
            evidence=Evidence(reset_gate=gate),
        ),
    )
    assert not rejected.valid and rejected.reason == "reset_gate"
    assert rejected.message == "criteria raised at all 3 seeds"
    row = rejected.to_row()
    assert row["pipeline"] == {"reset_gate": {"status": "reject", "checked": 3, "threw": 3}}
    assert row["valid"] is False and row["completion_tokens"] == 2
    # a kept repair: the slot plays the repair's environment, the trained text stays the first
    fix = _design(text="fixed", source="class YEnv: pass", env_id="c0001_p0_g1_def")
    first = _design(parse_error="no_code_block", parse_message="no code")
    repaired = Validated(
        first,
        Verdict(
            report=passed,
            repair=fix,
            repaired_turn=1,
            evidence=Evidence(
                repairs=(Attempt(None, None, "fixed", turn=1),),
                turn1=("no_code_block", "no code"),
            ),
        ),
    )
    assert repaired.valid and repaired.env_id == fix.env_id and repaired.reason is None
    row = repaired.to_row()
    assert row["text"] == "reply" and row["repaired_turn"] == 1
    assert row["pipeline"]["turn1"] == {"reason": "no_code_block", "message": "no code"}
    assert row["pipeline"]["repairs"] == [
        {"reason": None, "message": None, "text": "fixed", "turn": 1}
    ]
    unparsed = Validated(first)
    assert not unparsed.valid and unparsed.reason == "no_code_block" and not unparsed.parsed


class _Counted(LocalBackend):
    """The real local backend, counting its closes."""

    closed = 0

    def close(self) -> None:
        type(self).closed += 1
        super().close()


def _sandbox_children() -> set[int]:
    pids: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            text = (task / "children").read_text().split()
        except (FileNotFoundError, ProcessLookupError):  # a thread that ended meanwhile
            continue
        pids |= {int(p) for p in text}
    return {p for p in pids if Path(f"/proc/{p}").exists()}


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux's /proc")
def test_open_resources_opens_the_run_and_closes_what_it_opened(tmp_path) -> None:
    cfg = load_recipe("quickstart", [*SMALL, "validation.workers=1"])
    config = ss.SandboxConfig(limits=ss.Limits(call_wall_s=10.0))
    before = _sandbox_children()
    run = RunDir(tmp_path / "run").create()
    source = good_reply().split("```python\n", 1)[1].split("```", 1)[0]
    item = sc.ValidationItem(source, "reduce modulo each step", "e1", "Math", 4)
    with open_resources(
        cfg,
        run,
        backend=None,
        make_backend=lambda: _Counted(**cfg.backend.backend_kwargs(cfg.seed)),
        sandbox_config=config,
        sandbox_pool=True,
        grounding=NO_GROUNDING,
        progress=lambda: _Null(),
    ) as res:
        assert isinstance(res.backend, _Counted) and len(res.pools) == 1
        (report,) = res.validator.validate([item], (0,))
        assert report.valid, report.message  # validated in the run's warm pool
        assert _sandbox_children() - before  # whose workers are this process's children
        assert res.grounding.sample(2, index=0) == [] and res.progress is QUIET
    assert _Counted.closed == 1  # made here, so closed here
    deadline = time.time() + 30
    while _sandbox_children() - before and time.time() < deadline:
        time.sleep(0.2)
    assert not _sandbox_children() - before  # no sandbox worker outlives the run
    given = _Counted(**cfg.backend.backend_kwargs(cfg.seed))
    with open_resources(
        cfg,
        run,
        backend=given,
        make_backend=lambda: pytest.fail("a given backend is not made again"),
        sandbox_config=config,
        sandbox_pool=False,
        grounding=NO_GROUNDING,
        progress=lambda: _Null(),
    ) as res:
        assert res.backend is given and res.pools == ()
    assert _Counted.closed == 1  # the caller's backend is the caller's to close


class _Null:
    def __enter__(self):
        return QUIET

    def __exit__(self, *exc):
        return None
