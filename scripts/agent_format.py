"""How often a recipe's agent gives a parsed action, and what it returns, on the starter games.

    uv run python scripts/agent_format.py [--recipe quickstart] [--seeds 8] [--sample-seed 3]
        [--system-prompt TEXT | --default-system-prompt] [KEY=VALUE ...]

Loads the recipe's policy (after its cold start, when it has one), plays every training game
of the starter corpus (the quickstart's pool at cycle 1) for ``--seeds`` episodes each, half of them with the game's hint, with the
recipe's agent settings (answer prefix, sampling, turns), in this process without a sandbox,
and prints the share of turns whose reply gave a parsed action, the mean return, the malformed
turns per game and a few of their replies. ``KEY=VALUE`` overrides the recipe as on the
``spade train`` command line. Used to choose the quickstart's agent system prompt (README).
"""

from __future__ import annotations

import argparse
import collections
import sys
import time

import spade_envs as se
from spade_train.backends import make_backend
from spade_train.cold_start import policy_model
from spade_train.config import load_recipe
from spade_train.errors import RecipeError
from spade_train.play import PolicyAgent
from spade_train.steps.play import agent_system_prompt


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recipe", default="quickstart")
    parser.add_argument("--seeds", type=int, default=8, help="episodes per game")
    parser.add_argument("--sample-seed", type=int, default=3, help="the sampling seed")
    prompt = parser.add_mutually_exclusive_group()
    prompt.add_argument("--system-prompt", help="the agent's system prompt for this run")
    prompt.add_argument(
        "--default-system-prompt", action="store_true", help="spade-envs' default prompt"
    )
    parser.add_argument("overrides", nargs="*", help="recipe overrides, KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        cfg = load_recipe(args.recipe, args.overrides)
    except RecipeError as exc:
        print(f"agent_format: {exc}", file=sys.stderr)
        return 2
    if args.system_prompt is not None:
        cfg.agent.system_prompt = args.system_prompt
    elif args.default_system_prompt:
        cfg.agent.system_prompt = None
    kwargs = {**cfg.backend.backend_kwargs(cfg.seed), "model": policy_model(cfg, _say)}
    backend = make_backend(cfg.backend.name, **kwargs)
    corpus = se.load_corpus("starter")
    specs = [
        se.EpisodeSpec(
            corpus.factory(r.id),
            seed=1000 + k,
            env_id=r.id,
            max_turns=min(cfg.agent.max_turns, r.max_turns),
            hint=r.hint if k % 2 else None,
        )
        for r in corpus.records
        if r.split == "train"
        for k in range(args.seeds)
    ]
    a = cfg.agent
    agent = PolicyAgent(
        backend,
        lambda call: a.sampling.to_params(args.sample_seed + call),
        answer_prefix=a.answer_prefix,
        thinking=a.thinking,
    )
    started = time.monotonic()
    results = se.run_episodes(
        specs,
        agent,
        system_prompt=agent_system_prompt(cfg),
        concurrency=a.concurrency,
        scoring=a.scoring,
    )
    turns = [(x.env_id, t) for x in results for t in x.turns]
    bad = [(env, t.reply) for env, t in turns if t.malformed]
    mean_return = sum(x.episode_return for x in results) / len(results)
    print(f"system prompt: {agent_system_prompt(cfg)!r}")
    print(
        f"parsed {1 - len(bad) / len(turns):.3f} of {len(turns)} turns, mean return "
        f"{mean_return:.3f} over {len(results)} episodes ({time.monotonic() - started:.0f} s)"
    )
    print("malformed turns per game:", dict(collections.Counter(env for env, _ in bad)))
    for env, reply in bad[:8]:
        print(f"  {env}: {reply[:80]!r}")
    backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
