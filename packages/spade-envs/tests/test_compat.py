"""Compat mode: games written for the released SPADE code load, validate and play as they are.

The fixture ``fixtures/upstream_release`` is a released-layout corpus of four such games:
numpy imported by the game (000000), ``deque``/``Counter`` used without an import (000001), a
``solution()`` of space-separated boxed moves whose win pays 2.0 (000002), and a strategy text
as ``solution()`` (000003). In strict mode the same games fail with stable reason codes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import spade_envs as se
from spade_envs.compat import (
    COMPAT_NAMES,
    check_env_compat,
    compat_sandbox_config,
    compat_solution,
    compat_source,
)

RELEASE = Path(__file__).parent / "fixtures" / "upstream_release"
SOLUTIONS = {  # how compat mode reads each game's solution()
    "game_000000": "answer",
    "game_000001": "actions",
    "game_000002": "actions",
    "game_000003": "unplayable",
}
STRICT_CODES = {  # check_env in the sandbox, strict mode: (code, the sandbox's reason)
    "game_000000": ("construct_failed", "forbidden_import"),
    "game_000001": ("reset_raised", "env_exception"),
    "game_000002": ("solution_fails", None),
    "game_000003": ("solution_fails", None),
}


@pytest.fixture(scope="module")
def corpus():
    return se.load_corpus(RELEASE)


@pytest.mark.parametrize(
    ("text", "kind", "actions"),
    [
        ("\\boxed{R} \\boxed{D}", "actions", ["\\boxed{R}", "\\boxed{D}"]),
        ("\\boxed{1}\n\\boxed{{2}}\n", "actions", ["\\boxed{1}", "\\boxed{{2}}"]),
        ("42", "answer", ["\\boxed{42}"]),
        ("First count.\nThen add.", "unplayable", []),
        ("Answer: \\boxed{3}", "unplayable", []),
        ("", "unplayable", []),
        (None, "unplayable", []),
        ("\\boxed{unclosed", "unplayable", []),
    ],
)
def test_compat_solution_reading(text, kind, actions):
    assert compat_solution(text) == (kind, actions)


def test_prelude_defines_the_released_namespace_and_keeps_line_numbers_close():
    source = "from __future__ import annotations\nx = deque([1])\n"
    wrapped = compat_source(source)
    assert wrapped.splitlines()[0].startswith("from __future__ import annotations; ")
    namespace: dict = {}
    exec(compile(wrapped, "<g>", "exec"), namespace)
    assert all(name in namespace for name in COMPAT_NAMES) and namespace["np"].__name__ == "numpy"
    assert len(wrapped.splitlines()) == len(source.splitlines()) + 1


def test_a_released_corpus_loads_in_compat_mode(corpus):
    assert corpus.mode == "compat" and corpus.ids() == list(SOLUTIONS)
    assert corpus.record("game_000002").file == "games/game_000002.py"
    assert se.load_corpus("example").mode == "strict"


@pytest.mark.parametrize("env_id", list(SOLUTIONS))
def test_each_game_validates_in_compat_mode_in_the_sandbox(corpus, env_id):
    factory = corpus.factory(env_id, sandbox=True)
    report = check_env_compat(factory, seeds=(0, 1, 2), max_turns=10)
    assert report.solutions == (SOLUTIONS[env_id],) * 3
    assert report.playable is (SOLUTIONS[env_id] != "unplayable")


@pytest.mark.parametrize("env_id", list(SOLUTIONS))
def test_each_game_fails_strict_mode_with_its_reason_code(corpus, env_id):
    factory = corpus.factory(env_id, sandbox=True, mode="strict")
    with pytest.raises(se.ContractError) as info:
        se.check_env(factory, seeds=(0, 1, 2), max_turns=10)
    code, sandbox_reason = STRICT_CODES[env_id]
    assert info.value.code == code
    cause = info.value.__cause__
    assert getattr(getattr(cause, "reason", None), "value", None) == sandbox_reason


def test_compat_games_play_through_the_chat_runner(corpus):
    """Each playable game is won by replaying its own solution; the 2.0 win pays 1 (clipped)."""
    specs, replies = [], []
    for env_id, kind in SOLUTIONS.items():
        if kind == "unplayable":
            continue
        env = corpus.factory(env_id)(max_turns=10)
        env.reset(seed=4)
        _, actions = compat_solution(env.solution())
        specs.append(se.EpisodeSpec(corpus.factory(env_id, sandbox=True), seed=4, env_id=env_id))
        replies.append(actions)

    def agent(chats):
        out = []
        for chat in chats:
            index = next(i for i, s in enumerate(specs) if chat[1]["content"] == first[s.env_id])
            turn = sum(m["role"] == "assistant" for m in chat)
            out.append(f"My move: {replies[index][turn]}")
        return out

    first = {s.env_id: s.factory(max_turns=10).reset(seed=4)[0] for s in specs}
    results = se.run_episodes(specs, agent)
    for result in results:
        assert result.error is None and result.episode_return == 1.0, result.env_id
    walk = next(r for r in results if r.env_id == "game_000002")
    assert walk.turns[-1].reward == 1.0 and walk.turns[-1].info["raw_reward"] == 2.0


def test_numpy_stays_behind_the_import_policy():
    source = compat_source(
        "import os\nclass LeakEnv:\n    def __init__(self, max_turns=10): pass\n"
        "    def reset(self, seed=None): return 'x', {}\n"
        "    def step(self, a): return 'x', 0.0, True, False, {}\n"
        "    def solution(self): return '1'\n    def close(self): pass\n"
    )
    import spade_sandbox as ss

    config = compat_sandbox_config(ss.SandboxConfig())
    assert "numpy" in config.allowed_imports and "os" not in config.allowed_imports
    with pytest.raises(ss.SandboxError) as info:
        ss.open_env(source, config=config)
    assert info.value.reason.value == "forbidden_import"


def test_designed_max_turns_is_read_without_running_the_code(corpus):
    from spade_envs.compat import designed_max_turns

    got = {i: designed_max_turns(corpus.sources[i]) for i in corpus.ids()}
    assert got == {"game_000000": 10, "game_000001": 10, "game_000002": 12, "game_000003": 5}
    assert designed_max_turns("class AEnv:\n    def __init__(self, *, max_turns=7): pass\n") == 7
    assert designed_max_turns("class AEnv:\n    def __init__(self, max_turns): pass\n") is None
    assert designed_max_turns("class A:\n    def __init__(self, max_turns=3): pass\n") is None
    assert designed_max_turns("def (") is None
