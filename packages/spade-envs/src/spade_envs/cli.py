"""``spade-envs``: list, show, play and validate the environments of a corpus or of one file.

    spade-envs list CORPUS
    spade-envs show CORPUS ENV_ID [--no-source]
    spade-envs play CORPUS ENV_ID [--hint] [--seed N]                   # a person, in the terminal
    spade-envs play my_game.py                                          # the one game of a file
    spade-envs play CORPUS ENV_ID --agent random --episodes 20         # a batch, with a summary
    spade-envs play CORPUS ENV_ID --agent openai --base-url URL --model NAME
    spade-envs play CORPUS --all --agent random                        # every environment
    spade-envs validate my_game.py [--hint-text TEXT]                  # the contract checker
    spade-envs fetch --out DIR [--repo R] [--revision REV] [--expected-games N]  # a release

CORPUS is a corpus directory, a packed .jsonl/.parquet file, ``example``, ``starter`` or
``tool_use`` (the shipped ones), or one environment's ``.py`` file (its id is the file name
without ``.py``). User mistakes print one line to stderr and exit with status 2; counts have
upper bounds (:data:`MAX_EPISODES`, :data:`MAX_TURNS`, :data:`MAX_CONCURRENCY`). Agent play
runs ``--concurrency`` episodes at a time, building each batch's episodes only when it starts,
and writes each batch's transcripts when it ends. Ctrl-C prints one line, keeps what finished
(transcripts written, the summary of the finished episodes) and exits with status 130.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import itertools
import signal
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .agents import OpenAIChatAgent, RandomAgent, ReplayAgent
from .chat import EpisodeResult, EpisodeSpec, run_episodes, write_transcript
from .checker import check_env
from .core import DEFAULT_MAX_TURNS, episode_return, with_hint
from .corpus import Corpus, EnvRecord, load_corpus
from .corpus_files import sha256_text
from .errors import ContractError, SourceError, SpadeEnvsError
from .source import find_env_class

__all__ = ["main", "build_parser", "MAX_EPISODES", "MAX_TURNS", "MAX_CONCURRENCY"]

#: Upper bounds of the counts the CLI takes (a larger one is a one-line user error).
MAX_EPISODES = 1_000_000
MAX_TURNS = 1_000
MAX_CONCURRENCY = 1_024


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spade-envs", description="List, show, play and validate SPADE environments."
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

    _add_play(sub.add_parser("play", help="play interactively, or run an agent over episodes"))
    _add_validate(
        sub.add_parser(
            "validate", help="check environment files against the contract (spade_envs.check_env)"
        )
    )
    return parser


def _add_play(p: argparse.ArgumentParser) -> None:
    p.add_argument("corpus", help="a corpus, a shipped corpus name, or one environment's .py file")
    p.add_argument("env_id", nargs="?", help="environment id (omit with --all or for a .py file)")
    p.add_argument(
        "--all", action="store_true", help="every environment of the corpus (agent mode)"
    )
    p.add_argument("--hint", action="store_true", help="give the privileged hint")
    p.add_argument("--hint-text", help="the hint of a .py file (implies --hint)")
    p.add_argument("--seed", type=int, default=0, help="episode seed (first seed of a batch)")
    p.add_argument(
        "--max-turns", type=int, help=f"override the record's max_turns (<= {MAX_TURNS})"
    )
    p.add_argument("--agent", choices=["human", "random", "openai", "replay"], default="human")
    p.add_argument(
        "--episodes",
        type=int,
        default=10,
        help=f"episodes per environment (agent mode, <= {MAX_EPISODES:,})",
    )
    p.add_argument(
        "--base-url", help="OpenAI-compatible server: its root or its /v1 (http://127.0.0.1:8000)"
    )
    p.add_argument("--model", help="model name for --agent openai")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument(
        "--concurrency",
        type=int,
        default=8,
        help=f"episodes played at once, and requests in flight for --agent openai (<= {MAX_CONCURRENCY})",
    )
    p.add_argument("--actions", help="replies for --agent replay, separated by '||'")
    p.add_argument("--sandbox", action="store_true", help="run the environment in spade-sandbox")
    p.add_argument("--transcripts", type=Path, help="write one JSON transcript per episode here")


def _add_validate(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", type=Path, help="one environment's .py file each")
    p.add_argument("--hint-text", help="the privileged hint to check with the files")
    p.add_argument(
        "--max-turns",
        type=int,
        default=DEFAULT_MAX_TURNS,
        help=f"turns an episode may take (<= {MAX_TURNS})",
    )
    p.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run the files in this process (the default runs them in spade-sandbox when installed)",
    )


def _bounded(name: str, value: int | None, low: int, high: int) -> None:
    """A one-line user error unless ``value`` (when given) lies in [low, high]."""
    if value is not None and not low <= value <= high:
        raise SpadeEnvsError(f"{name} must be between {low} and {high:,}, not {value:,}")


def _file_corpus(path: Path, hint: str | None) -> Corpus:
    """A one-environment corpus of the ``.py`` file at ``path`` (id: the file name without
    ``.py``; skill ``unknown``; the hint given, or none)."""
    if not path.is_file():
        raise SpadeEnvsError(f"{path}: no such file; pass an environment's .py file")
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpadeEnvsError(f"{path}: cannot be read as UTF-8 text ({exc})") from None
    class_name = find_env_class(source, None, str(path))
    record = EnvRecord(
        id=path.stem, skill="unknown", hint=hint or "", sha256=sha256_text(source),
        file=path.name, class_name=class_name, origin=str(path), title=class_name,
    )  # fmt: skip
    return Corpus(path=path, records=(record,), sources={record.id: source})


def _open_corpus(name: str, hint: str | None = None) -> Corpus:
    """The corpus (or ``.py`` file) named on the command line; an empty one is an error."""
    corpus = _file_corpus(Path(name), hint) if name.endswith(".py") else load_corpus(name)
    if not len(corpus):
        raise SpadeEnvsError(f"{name}: the corpus holds no environments (an empty manifest)")
    return corpus


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
    factory = corpus.factory(record.id, sandbox=args.sandbox)
    env = factory(max_turns=max_turns)
    reward, terminated, turn = 0.0, False, 0
    try:
        observation, _ = env.reset(seed=args.seed)
        print(printable(with_hint(observation, record.hint if args.hint else None)))
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
    finally:
        env.close()
        _close_factory(factory)
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


def _close_factory(factory: object) -> None:
    """Close a factory that holds resources (a sandboxed one's idle workers)."""
    close = None if isinstance(factory, type) else getattr(factory, "close", None)
    if callable(close):
        close()


class _Tally:
    """The summary of the episodes played so far, per environment, in the corpus's order."""

    def __init__(self, ids: Sequence[str]):
        self.ids = list(ids)
        self.rows: dict[str, list[float]] = {i: [0, 0.0, 0, 0, 0] for i in ids}
        self.errors: list[EpisodeResult] = []

    def add(self, results: Sequence[EpisodeResult]) -> None:
        for r in results:
            row = self.rows[r.env_id]  # episodes, return, wins, turns, errors
            row[0] += 1
            row[1] += r.episode_return
            row[2] += r.won
            row[3] += len(r.turns)
            if r.error is not None:
                row[4] += 1
                self.errors.append(r)

    def print(self) -> None:
        width = max(len(i) for i in self.ids)
        print(f"{'env_id':<{width}}  episodes  mean_return  win_rate  mean_turns  errors")
        for env_id in self.ids:
            n, total, wins, turns, errors = self.rows[env_id]
            if n:
                print(
                    f"{env_id:<{width}}  {int(n):>8}  {total / n:>11.3f}  {wins / n:>8.2f}  "
                    f"{turns / n:>10.1f}  {int(errors):>6}"
                )
        for r in self.errors[:5]:
            error = r.error
            assert error is not None
            print(
                f"error in {r.env_id} seed {r.seed} ({error.boundary}): {error.kind}: {error.message[:200]}",
                file=sys.stderr,
            )


def _specs(corpus: Corpus, args: argparse.Namespace, ids: Sequence[str], factories: dict):
    """The episodes to play, one at a time (never all at once: ``--episodes`` may be large)."""
    for env_id in ids:
        record = corpus.record(env_id)
        factories[env_id] = factory = corpus.factory(env_id, sandbox=args.sandbox)
        for k in range(args.episodes):
            yield EpisodeSpec(
                factory,
                seed=args.seed + k,
                hint=record.hint if args.hint else None,
                env_id=env_id,
                max_turns=args.max_turns or record.max_turns,
            )


def _progress(bar: Any, done: int) -> Callable[[int, int], None]:
    """``run_episodes``' ``on_turn`` for a batch that starts after ``done`` episodes."""
    return lambda finished, _total: bar.update(done + finished - bar.n)


@contextlib.contextmanager
def _interrupt_deferred() -> Iterator[None]:
    """Ctrl-C inside the block takes effect when the block ends (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def _play_agent(corpus: Corpus, args: argparse.Namespace) -> int:
    from tqdm import tqdm

    ids = corpus.ids() if args.all else [corpus.record(args.env_id).id]
    agent = _agent(args)
    tally = _Tally(ids)
    factories: dict[str, object] = {}
    specs = _specs(corpus, args, ids, factories)
    bar = tqdm(
        total=len(ids) * args.episodes, desc="episodes", unit="ep", file=sys.stderr, disable=None
    )
    try:
        while batch := list(itertools.islice(specs, args.concurrency)):
            done = bar.n
            results = run_episodes(batch, agent, on_turn=_progress(bar, done))
            with _interrupt_deferred():  # a batch's transcripts and its rows are kept together
                bar.update(done + len(batch) - bar.n)
                for r in results if args.transcripts else ():
                    name = f"{r.env_id}-seed{r.seed}{'-hint' if r.hinted else ''}.json"
                    write_transcript(r, args.transcripts / name)
                tally.add(results)
    finally:
        bar.close()
        tally.print()  # also after Ctrl-C: the episodes that finished
        for factory in factories.values():
            _close_factory(factory)
    return 1 if tally.errors else 0


def _validate(args: argparse.Namespace) -> int:
    """Each file through :func:`spade_envs.check_env`: one line per file, exit 1 if any fails."""
    sandbox = not args.no_sandbox and importlib.util.find_spec("spade_sandbox") is not None
    if not args.no_sandbox and not sandbox:
        print(
            "spade-envs: spade-sandbox is not installed, so the files run in this process "
            "(pip install 'spade-envs[sandbox]' to isolate them)",
            file=sys.stderr,
        )
    rejected = 0
    for path in args.files:
        if not path.is_file():
            raise SpadeEnvsError(f"{path}: no such file; pass an environment's .py file")
        try:
            corpus = _file_corpus(path, args.hint_text)
            record = corpus.records[0]
            factory = corpus.factory(record.id, sandbox=sandbox)
            try:
                report = check_env(factory, max_turns=args.max_turns, hint=args.hint_text)
            finally:
                _close_factory(factory)
        except (ContractError, SourceError) as exc:
            rejected += 1
            print(
                f"{path}: rejected: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
            )
            continue
        print(
            f"{path}: valid ({record.class_name}; checked on seeds {', '.join(map(str, report.seeds))})"
        )
    return 1 if rejected else 0


def _fetch(args: argparse.Namespace) -> int:
    from . import fetch

    _bounded("--expected-games", args.expected_games, 0, MAX_EPISODES)
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


def _play(args: argparse.Namespace) -> int:
    _bounded("--episodes", args.episodes, 1, MAX_EPISODES)
    _bounded("--max-turns", args.max_turns, 1, MAX_TURNS)
    _bounded("--concurrency", args.concurrency, 1, MAX_CONCURRENCY)
    if args.hint_text is not None and not args.corpus.endswith(".py"):
        raise SpadeEnvsError("--hint-text is for a .py file; a corpus's records carry their hints")
    args.hint = args.hint or args.hint_text is not None
    corpus = _open_corpus(args.corpus, args.hint_text)
    if args.env_id is None and not args.all and len(corpus) == 1:
        args.env_id = corpus.ids()[0]
    if not args.all and not args.env_id:
        raise SpadeEnvsError("play needs an ENV_ID (or --all with an agent)")
    if args.hint and args.corpus.endswith(".py") and not args.hint_text:
        raise SpadeEnvsError("--hint: a .py file carries no hint; pass --hint-text TEXT")
    if args.agent == "human":
        if args.all:
            raise SpadeEnvsError("--all needs an agent: add --agent random or --agent openai")
        return _play_human(corpus, args)
    return _play_agent(corpus, args)


def _run(args: argparse.Namespace) -> int:
    if args.command == "fetch":
        return _fetch(args)
    if args.command == "validate":
        _bounded("--max-turns", args.max_turns, 1, MAX_TURNS)
        return _validate(args)
    if args.command == "play":
        return _play(args)
    corpus = _open_corpus(args.corpus)
    if args.command == "list":
        _list(corpus, args.skill)
    else:
        _show(corpus, args.env_id, args.no_source)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except SpadeEnvsError as exc:
        print(f"spade-envs: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("spade-envs: interrupted; what finished was kept", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
