"""``spade-envs``: list, show and play the environments of a corpus.

    spade-envs list CORPUS
    spade-envs show CORPUS ENV_ID [--no-source]
    spade-envs play CORPUS ENV_ID [--hint] [--seed N]                   # a person, in the terminal
    spade-envs play CORPUS ENV_ID --agent random --episodes 20         # a batch, with a summary
    spade-envs play CORPUS ENV_ID --agent openai --base-url URL --model NAME
    spade-envs play CORPUS --all --agent random                        # every environment
    spade-envs fetch --out DIR [--repo R] [--revision REV] [--expected-games N]  # a release

CORPUS is a corpus directory, a packed .jsonl/.parquet file, or ``example`` (the shipped one).
User mistakes print one line to stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from .agents import OpenAIChatAgent, RandomAgent, ReplayAgent
from .chat import EpisodeSpec, run_episodes, write_transcript
from .core import episode_return, with_hint
from .corpus import Corpus, load_corpus
from .errors import SpadeEnvsError

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spade-envs", description="List, show and play SPADE environments."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("fetch", help="download a released corpus (pinned revision) and verify it")
    p.add_argument(
        "--out",
        required=True,
        help="directory to create (must not exist, or hold the verified corpus)",
    )
    p.add_argument(
        "--repo", default=None, help="dataset repository (default: the GPT-5.5 static corpus)"
    )
    p.add_argument("--revision", default=None, help="commit to download (default: the pinned one)")
    p.add_argument(
        "--expected-games", type=int, default=None, help="games/game_*.py count to require (0: any)"
    )
    p.add_argument(
        "--endpoint", default=None, help="hub URL (default: $HF_ENDPOINT or the public hub)"
    )

    p = sub.add_parser("list", help="environment ids, skills and counts of a corpus")
    p.add_argument("corpus")
    p.add_argument("--skill", help="only this skill")

    p = sub.add_parser("show", help="one environment's record, hint and source")
    p.add_argument("corpus")
    p.add_argument("env_id")
    p.add_argument("--no-source", action="store_true", help="omit the source code")

    p = sub.add_parser("play", help="play interactively, or run an agent over episodes")
    p.add_argument("corpus")
    p.add_argument("env_id", nargs="?", help="environment id (omit with --all)")
    p.add_argument(
        "--all", action="store_true", help="every environment of the corpus (agent mode)"
    )
    p.add_argument("--hint", action="store_true", help="give the privileged hint")
    p.add_argument("--seed", type=int, default=0, help="episode seed (first seed of a batch)")
    p.add_argument("--max-turns", type=int, help="override the record's max_turns")
    p.add_argument("--agent", choices=["human", "random", "openai", "replay"], default="human")
    p.add_argument("--episodes", type=int, default=10, help="episodes per environment (agent mode)")
    p.add_argument("--base-url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", help="model name for --agent openai")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument(
        "--concurrency", type=int, default=8, help="requests in flight for --agent openai"
    )
    p.add_argument("--actions", help="replies for --agent replay, separated by '||'")
    p.add_argument("--sandbox", action="store_true", help="run the environment in spade-sandbox")
    p.add_argument("--transcripts", type=Path, help="write one JSON transcript per episode here")
    return parser


def _list(corpus: Corpus, skill: str | None) -> None:
    records = [r for r in corpus if skill is None or r.skill == skill]
    if not records and skill is not None:
        raise SpadeEnvsError(
            f"no environment with skill {skill!r}; this corpus has: {', '.join(corpus.counts_by_skill())}"
        )
    width = max((len(r.id) for r in records), default=2)
    print(f"{'id':<{width}}  {'skill':<12}  {'split':<8}  title")
    for r in records:
        print(f"{r.id:<{width}}  {r.skill:<12}  {r.split:<8}  {r.title}")
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(Counter(r.skill for r in records).items()))
    print(f"\n{len(records)} environments ({counts})")


def _show(corpus: Corpus, env_id: str, no_source: bool) -> None:
    r = corpus.record(env_id)
    print(
        f"id:          {r.id}\nskill:       {r.skill}\nsplit:       {r.split}\nfile:        {r.file}"
    )
    print(
        f"title:       {r.title}\nmax_turns:   {r.max_turns}\norigin:      {r.origin}\nsha256:      {r.sha256}"
    )
    if r.description:
        print(f"description: {r.description}")
    print(f"hint:        {r.hint}")
    if not no_source:
        print("\n" + corpus.source(env_id).rstrip())


def printable(text: str) -> str:
    """``text`` safe for a terminal: control characters (ANSI escapes, NUL, bell) shown as
    ``\\xNN`` escapes instead of acting on the terminal; newlines and tabs kept. The checker
    rejects such observations (``observation_charset``); released corpora may still hold them."""
    return "".join(
        c
        if c in "\n\t" or c.isprintable()
        else f"\\x{ord(c):02x}"
        if ord(c) < 256
        else f"\\u{ord(c):04x}"
        for c in text
    )


def _play_human(corpus: Corpus, args: argparse.Namespace) -> int:
    record = corpus.record(args.env_id)
    max_turns = args.max_turns or record.max_turns
    env = corpus.factory(record.id, sandbox=args.sandbox)(max_turns=max_turns)
    observation, _ = env.reset(seed=args.seed)
    print(printable(with_hint(observation, record.hint if args.hint else None)))
    reward, terminated, turn = 0.0, False, 0
    try:
        while turn < max_turns:
            try:
                action = input(f"\n[{turn + 1}/{max_turns}] > ")
            except EOFError:
                print("\n(input closed)")
                break
            if action.strip() in (":q", ":quit"):
                break
            observation, reward, terminated, truncated, _ = env.step(action)
            turn += 1
            print(printable(observation))
            if terminated or truncated:
                break
    except KeyboardInterrupt:
        print("\n(interrupted)")
    finally:
        env.close()
    result = episode_return(reward, terminated)
    print(
        f"\nepisode return: {result:.2f} ({'won' if result >= 1.0 else 'not won'}) after {turn} turns"
    )
    return 0


def _agent(args: argparse.Namespace):
    if args.agent == "random":
        agent = RandomAgent(args.seed)
        return lambda batch: [agent(m) for m in batch]
    if args.agent == "replay":
        if not args.actions:
            raise SpadeEnvsError("--agent replay needs --actions 'reply1||reply2||…'")
        replay = ReplayAgent(args.actions.split("||"))
        return lambda batch: [replay(m) for m in batch]
    if not args.base_url or not args.model:
        raise SpadeEnvsError("--agent openai needs --base-url URL and --model NAME")
    return OpenAIChatAgent(
        args.base_url, args.model, temperature=args.temperature, concurrency=args.concurrency
    ).batch


def _play_agent(corpus: Corpus, args: argparse.Namespace) -> int:
    from tqdm import tqdm

    ids = corpus.ids() if args.all else [corpus.record(args.env_id).id]
    if args.episodes < 1:
        raise SpadeEnvsError("--episodes must be at least 1")
    specs = []
    for env_id in ids:
        record = corpus.record(env_id)
        factory = corpus.factory(env_id, sandbox=args.sandbox)
        for k in range(args.episodes):
            specs.append(
                EpisodeSpec(
                    factory,
                    seed=args.seed + k,
                    hint=record.hint if args.hint else None,
                    env_id=env_id,
                    max_turns=args.max_turns or record.max_turns,
                )
            )
    agent = _agent(args)
    bar = tqdm(total=len(specs), desc="episodes", unit="ep", file=sys.stderr, disable=None)

    def progress(done: int, total: int) -> None:
        bar.update(done - bar.n)

    results = run_episodes(specs, agent, on_turn=progress)
    bar.update(len(specs) - bar.n)
    bar.close()
    if args.transcripts:
        for r in results:
            write_transcript(
                r, args.transcripts / f"{r.env_id}-seed{r.seed}{'-hint' if r.hinted else ''}.json"
            )
    width = max(len(i) for i in ids)
    print(f"{'env_id':<{width}}  episodes  mean_return  win_rate  mean_turns  errors")
    for env_id in ids:
        rs = [r for r in results if r.env_id == env_id]
        mean = statistics.fmean(r.episode_return for r in rs)
        wins = sum(r.won for r in rs) / len(rs)
        turns = statistics.fmean(len(r.turns) for r in rs)
        errors = sum(r.error is not None for r in rs)
        print(
            f"{env_id:<{width}}  {len(rs):>8}  {mean:>11.3f}  {wins:>8.2f}  {turns:>10.1f}  {errors:>6}"
        )
    failed = [(r, r.error) for r in results if r.error is not None]
    for r, error in failed[:5]:
        print(
            f"error in {r.env_id} seed {r.seed} ({error.boundary}): {error.kind}: {error.message[:200]}",
            file=sys.stderr,
        )
    return 1 if failed else 0


def _fetch(args: argparse.Namespace) -> int:
    from . import fetch

    expected = fetch.DEFAULT_GAMES if args.expected_games is None else args.expected_games
    result = fetch.fetch_corpus(
        args.out,
        repo=args.repo or fetch.DEFAULT_REPO,
        revision=args.revision or fetch.DEFAULT_REVISION,
        expected_games=expected or None,
        endpoint=args.endpoint,
    )
    state = "downloaded and verified" if result.downloaded else "already there, verified"
    print(
        f"{result.path}: {result.games} games from {result.repo}@{result.revision[:12]}, "
        f"{state} ({result.files_verified} SHA-256 checked); "
        f"play with: spade-envs play {result.path} --all --agent random"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "fetch":
            return _fetch(args)
        corpus = load_corpus(args.corpus)
        if args.command == "list":
            _list(corpus, args.skill)
            return 0
        if args.command == "show":
            _show(corpus, args.env_id, args.no_source)
            return 0
        if not args.all and not args.env_id:
            raise SpadeEnvsError("play needs an ENV_ID (or --all with an agent)")
        if args.agent == "human":
            if args.all:
                raise SpadeEnvsError("--all needs an agent: add --agent random or --agent openai")
            return _play_human(corpus, args)
        return _play_agent(corpus, args)
    except SpadeEnvsError as exc:
        print(f"spade-envs: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
