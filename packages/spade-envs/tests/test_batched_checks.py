"""check_env through batched sandbox calls gives the reports and errors of step-by-step play.

A sandboxed environment takes a probe's actions in batches (fixed probes, replays, the hint
and the solution) or speculatively (the others: the actions they would choose while the
observation stays the same), and starts them from a kept reset in the same call. These tests
play the same checks step by step (``play._batched`` switched off) and compare."""

from __future__ import annotations

import pytest
import spade_envs as se
from conftest import GUESS_HINT, GUESS_SOURCE
from spade_envs import play

spade_sandbox = pytest.importorskip(
    "spade_sandbox", reason="the sandbox extra (spade-sandbox) is not installed"
)

# A wrong guess is answered the same way twice, then differently: speculation must stop there.
ECHOES = GUESS_SOURCE.replace('"Lower."', '("Lower." if self.turn % 3 else "Lower, again.")')
# The third step of any episode raises: the error names step #3 in both ways of playing.
RAISES = GUESS_SOURCE.replace(
    "self.turn += 1", "self.turn += 1\n        if self.turn == 3:\n            raise KeyError('x')"
)
# Bad reward on the fourth step of an episode.
BAD_REWARD = GUESS_SOURCE.replace(
    "self.turn += 1",
    "self.turn += 1\n        if self.turn == 4:\n            return 'x', 5.0, False, False, {}",
)


def outcome(source: str, config, monkeypatch, batched: bool) -> object:
    with monkeypatch.context() as m:
        if not batched:
            m.setattr(play, "_batched", lambda env: None)
        factory = se.load_env(source, sandbox=True, sandbox_config=config)
        try:
            return se.check_env(factory, seeds=(3, 17, 29), hint=GUESS_HINT)
        except se.ContractError as exc:
            return (exc.code, exc.message)
        finally:
            factory.close()


@pytest.mark.parametrize("name", ["guess", "echoes", "raises", "bad_reward"])
def test_batched_checks_equal_step_by_step_checks(name, monkeypatch):
    assert len({GUESS_SOURCE, ECHOES, RAISES, BAD_REWARD}) == 4  # each variant changed the game
    source = {"guess": GUESS_SOURCE, "echoes": ECHOES, "raises": RAISES, "bad_reward": BAD_REWARD}[
        name
    ]
    config = spade_sandbox.SandboxConfig(limits=spade_sandbox.Limits(call_wall_s=2.0))
    batched = outcome(source, config, monkeypatch, batched=True)
    assert batched == outcome(source, config, monkeypatch, batched=False)
    if name == "raises":
        assert batched[0] == "step_raised" and "step #3" in batched[1]
    if name == "bad_reward":
        assert batched[0] == "reward_out_of_bounds" and "step #4" in batched[1]


def test_a_worker_that_lost_its_kept_resets_falls_back_to_real_resets(monkeypatch):
    # A worker recycled every few episodes keeps no state across the recycle: every copy the
    # checker asks for in a batch is refused and replaced by a real reset.
    config = spade_sandbox.SandboxConfig(
        limits=spade_sandbox.Limits(call_wall_s=2.0), recycle_after_episodes=3
    )
    refused = []
    batched_play = play._play_batched

    def counting(*args, **kwargs):
        try:
            return batched_play(*args, **kwargs)
        except play.NotKept:
            refused.append(1)
            raise

    monkeypatch.setattr(play, "_play_batched", counting)
    batched = outcome(GUESS_SOURCE, config, monkeypatch, batched=True)
    assert isinstance(batched, se.CheckReport) and refused  # some copies were refused
    assert batched == outcome(GUESS_SOURCE, config, monkeypatch, batched=False)
