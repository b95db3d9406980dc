"""Which episodes a cycle plays per environment, and on which seeds.

The released code plays each new game ``trajectories_per_game`` times without the hint (these
are trained) and, separately, ``hint_plays_per_game`` times with it on their own seeds (these
only feed the designer's regret; they are not trained). :func:`plan_episodes` gives that plan
for one environment; every seed comes from ``(run seed, cycle, env id, stream, index)`` so any
episode replays on its own (upstream derives them from Python's per-process ``hash``, which
does not replay). ``paired=True`` plays the hinted episodes on the unhinted episodes' seeds
(the regret then compares the same instances).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


def episode_seed(run_seed: int, cycle: int, env_id: str, stream: str, index: int) -> int:
    """A 31-bit seed fixed by its coordinates (stable across processes and platforms)."""
    key = f"{run_seed}:{cycle}:{env_id}:{stream}:{index}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:4], "big") & 0x7FFFFFFF


@dataclass(frozen=True)
class PlannedEpisode:
    """One episode to play: its seed, whether it gets the hint, whether it is trained."""

    seed: int
    hinted: bool
    trained: bool


def plan_episodes(
    run_seed: int,
    cycle: int,
    env_id: str,
    episodes: int,
    hint_plays: int,
    *,
    paired: bool = False,
    train_hinted: bool = False,
) -> list[PlannedEpisode]:
    """``episodes`` unhinted (trained) episodes, then ``hint_plays`` hinted ones (trained only
    with ``train_hinted``). ``paired``: hinted episode ``i`` reuses unhinted seed
    ``i % episodes``; otherwise hinted seeds are their own stream."""
    if episodes < 0 or hint_plays < 0:
        raise ValueError(f"episode counts must be >= 0, got {episodes} and {hint_plays}")
    if paired and hint_plays and not episodes:
        raise ValueError("paired hint plays need at least one unhinted episode to pair with")
    plain = [episode_seed(run_seed, cycle, env_id, "play", i) for i in range(episodes)]
    out = [PlannedEpisode(s, False, True) for s in plain]
    for i in range(hint_plays):
        seed = plain[i % episodes] if paired else episode_seed(run_seed, cycle, env_id, "hint", i)
        out.append(PlannedEpisode(seed, True, train_hinted))
    return out
