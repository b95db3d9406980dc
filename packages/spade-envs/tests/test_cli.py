"""``spade-envs`` end to end: real subprocesses (``python -m spade_envs.cli`` and the installed
console script), a real corpus on disk, and a pseudo-terminal for the interactive player."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import spade_envs as se
from conftest import GUESS_HINT, GUESS_SOURCE

pytestmark = pytest.mark.timeout(
    120
)  # a child stuck at a prompt must fail the test, not hang the run

MODULE = [sys.executable, "-m", "spade_envs.cli"]
SMALL_SOURCE = GUESS_SOURCE.replace("high=50", "high=8")
CRASH_SOURCE = GUESS_SOURCE.replace("guess = int(found[-1])", "guess = int(found[-1]) // 0")
TABLE_HEADER = ["env_id", "episodes", "mean_return", "win_rate", "mean_turns", "errors"]


def console_script() -> list[str]:
    """The ``spade-envs`` entry point installed beside this interpreter."""
    path = Path(sys.executable).parent / "spade-envs"
    found = str(path) if path.exists() else shutil.which("spade-envs")
    assert found, f"the spade-envs console script is not installed next to {sys.executable}"
    return [found]


def run(
    *args: str, command: list[str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [*(command or MODULE), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Three guessing games (two Math, one Logic) written in the released corpus layout."""
    records = [
        se.EnvRecord(
            id="guess_wide", skill="Math", hint=GUESS_HINT, sha256="", title="Guess in 1..50"
        ),
        se.EnvRecord(
            id="guess_small",
            skill="Math",
            hint=GUESS_HINT,
            sha256="",
            title="Guess in 1..8",
            max_turns=4,
        ),
        se.EnvRecord(
            id="guess_logic",
            skill="Logic",
            hint=GUESS_HINT,
            sha256="",
            title="Guess, filed as logic",
        ),
    ]
    sources = {"guess_wide": GUESS_SOURCE, "guess_small": SMALL_SOURCE, "guess_logic": GUESS_SOURCE}
    return se.write_corpus(tmp_path_factory.mktemp("cli") / "corpus", records, sources)


@pytest.fixture(scope="module")
def crash_corpus(tmp_path_factory) -> Path:
    records = [se.EnvRecord(id="crashes", skill="Math", hint=GUESS_HINT, sha256="")]
    return se.write_corpus(
        tmp_path_factory.mktemp("cli") / "crash", records, {"crashes": CRASH_SOURCE}
    )


def summary_rows(stdout: str) -> dict[str, dict[str, float]]:
    """Parse the summary table of ``play --agent``; fails unless it is well formed."""
    lines = stdout.strip().splitlines()
    assert lines[0].split() == TABLE_HEADER, stdout
    rows = {}
    for line in lines[1:]:
        env_id, *numbers = line.split()
        assert len(numbers) == 5, line
        rows[env_id] = dict(zip(TABLE_HEADER[1:], map(float, numbers), strict=True))
    return rows


def assert_one_line_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("spade-envs: error: "), lines[0]
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert proc.stdout == ""


# --- list and show ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["module", "script"])
def test_list_prints_every_id_with_its_skill_and_the_counts(corpus, command):
    proc = run("list", corpus, command=MODULE if command == "module" else console_script())
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].split()[:3] == ["id", "skill", "split"]
    table = {line.split()[0]: line.split()[1] for line in lines[1:4]}
    assert table == {"guess_wide": "Math", "guess_small": "Math", "guess_logic": "Logic"}
    assert lines[-1] == "3 environments (Logic: 1, Math: 2)"
    assert "Guess in 1..8" in proc.stdout


def test_list_filtered_by_skill_counts_only_that_skill(corpus):
    proc = run("list", corpus, "--skill", "Math")
    assert proc.returncode == 0, proc.stderr
    ids = [line.split()[0] for line in proc.stdout.strip().splitlines()[1:-2]]
    assert ids == ["guess_wide", "guess_small"]
    assert proc.stdout.strip().splitlines()[-1] == "2 environments (Math: 2)"


def test_list_with_an_unknown_skill_is_a_user_error(corpus):
    assert_one_line_error(run("list", corpus, "--skill", "Chemistry"), "Chemistry", "Logic, Math")


def test_show_prints_record_hint_and_source(corpus):
    proc = run("show", corpus, "guess_small")
    assert proc.returncode == 0, proc.stderr
    fields = dict(re.findall(r"^(\w+):\s+(.*)$", proc.stdout, re.MULTILINE))
    assert (
        fields["id"] == "guess_small" and fields["skill"] == "Math" and fields["max_turns"] == "4"
    )
    assert fields["hint"] == GUESS_HINT
    assert fields["sha256"] == se.sha256_text(SMALL_SOURCE)
    assert SMALL_SOURCE.strip() in proc.stdout
    bare = run("show", corpus, "guess_small", "--no-source")
    assert (
        bare.returncode == 0 and "class GuessEnv" not in bare.stdout and GUESS_HINT in bare.stdout
    )


def test_shipped_example_corpus_lists_a_dozen_environments_over_six_skills():
    proc = run("list", "example")
    assert proc.returncode == 0, proc.stderr
    footer = proc.stdout.strip().splitlines()[-1]
    match = re.fullmatch(r"(\d+) environments \((.*)\)", footer)
    assert match, footer
    counts = dict(item.split(": ") for item in match.group(2).split(", "))
    assert set(counts) == set(se.SKILLS)
    assert sum(map(int, counts.values())) == int(match.group(1)) == len(se.load_corpus("example"))


# --- play with a scripted agent --------------------------------------------------------------


@pytest.mark.parametrize("command", ["module", "script"])
def test_play_random_summary_matches_the_transcripts_and_the_library(corpus, tmp_path, command):
    out = tmp_path / "transcripts"
    proc = run(
        "play",
        corpus,
        "guess_small",
        "--agent",
        "random",
        "--episodes",
        6,
        "--seed",
        3,
        "--transcripts",
        out,
        command=MODULE if command == "module" else console_script(),
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    row = summary_rows(proc.stdout)["guess_small"]

    files = sorted(out.glob("*.json"))
    assert [f.name for f in files] == sorted(f"guess_small-seed{s}.json" for s in range(3, 9))
    episodes = [json.loads(f.read_text()) for f in files]
    returns = [e["episode_return"] for e in episodes]
    assert row["episodes"] == 6 and row["errors"] == 0
    assert row["mean_return"] == pytest.approx(statistics.fmean(returns), abs=5e-4)
    assert row["win_rate"] == pytest.approx(sum(r >= 1.0 for r in returns) / 6, abs=5e-3)
    assert row["mean_turns"] == pytest.approx(
        statistics.fmean(len(e["turns"]) for e in episodes), abs=0.05
    )
    for e in episodes:
        assert 1 <= len(e["turns"]) <= 4 and e["hinted"] is False and e["error"] is None
        assert e["terminated"] or e["truncated"]
        assert [m["role"] for m in e["messages"][:2]] == ["system", "user"]
        assert "HINT:" not in e["messages"][1]["content"]

    # The same batch in-process gives the same returns: the CLI adds nothing of its own.
    agent = se.RandomAgent(3)
    factory = se.load_env(SMALL_SOURCE)
    library = se.run_episodes(
        [se.EpisodeSpec(factory, seed=s, env_id="guess_small", max_turns=4) for s in range(3, 9)],
        lambda batch: [agent(m) for m in batch],
    )
    assert [r.episode_return for r in library] == returns
    assert [len(r.turns) for r in library] == [len(e["turns"]) for e in episodes]


def test_play_random_is_reproducible_and_the_seed_matters(corpus, tmp_path):
    def replies(seed: int) -> tuple[str, list[list[str]]]:
        out = tmp_path / f"seed{seed}-{len(list(tmp_path.iterdir()))}"
        proc = run(
            "play",
            corpus,
            "guess_wide",
            "--agent",
            "random",
            "--episodes",
            4,
            "--seed",
            seed,
            "--transcripts",
            out,
        )
        assert proc.returncode == 0, proc.stderr
        episodes = [json.loads(f.read_text()) for f in sorted(out.glob("*.json"))]
        return proc.stdout, [[t["reply"] for t in e["turns"]] for e in episodes]

    first, again, other = replies(1), replies(1), replies(100)
    assert first == again
    assert first[1] != other[1]


def test_play_random_with_hint_puts_the_hint_in_every_first_observation(corpus, tmp_path):
    proc = run(
        "play",
        corpus,
        "guess_wide",
        "--agent",
        "random",
        "--episodes",
        2,
        "--hint",
        "--transcripts",
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    files = sorted(tmp_path.glob("*.json"))
    assert [f.name for f in files] == ["guess_wide-seed0-hint.json", "guess_wide-seed1-hint.json"]
    for f in files:
        episode = json.loads(f.read_text())
        assert episode["hinted"] is True
        assert episode["messages"][1]["content"].endswith(f"\n\nHINT: {GUESS_HINT}")


def test_play_all_reports_one_row_per_environment(corpus, tmp_path):
    proc = run(
        "play", corpus, "--all", "--agent", "random", "--episodes", 3, "--transcripts", tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    rows = summary_rows(proc.stdout)
    assert list(rows) == ["guess_wide", "guess_small", "guess_logic"]
    assert all(r["episodes"] == 3 and 0.0 <= r["mean_return"] <= 1.0 for r in rows.values())
    assert len(list(tmp_path.glob("*.json"))) == 9


def test_play_replay_agent_wins_with_the_known_answer(corpus):
    secret_env = se.load_env(SMALL_SOURCE)()
    secret_env.reset(seed=0)
    answer = secret_env.solution()
    proc = run(
        "play",
        corpus,
        "guess_small",
        "--agent",
        "replay",
        "--actions",
        f"\\boxed{{99}}||{answer}",
        "--episodes",
        1,
    )
    assert proc.returncode == 0, proc.stderr
    row = summary_rows(proc.stdout)["guess_small"]
    assert row == {
        "episodes": 1,
        "mean_return": 1.0,
        "win_rate": 1.0,
        "mean_turns": 2.0,
        "errors": 0,
    }


def test_an_environment_that_crashes_is_reported_and_exits_1(crash_corpus):
    proc = run("play", crash_corpus, "crashes", "--agent", "random", "--episodes", 2)
    assert proc.returncode == 1
    row = summary_rows(proc.stdout)["crashes"]
    assert row["errors"] == 2 and row["mean_return"] == 0.0
    errors = proc.stderr.strip().splitlines()
    assert len(errors) == 2 and all("(environment): ZeroDivisionError" in line for line in errors)
    assert "Traceback" not in proc.stderr


def test_play_random_on_a_shipped_environment():
    env_id = se.load_corpus("example").ids()[0]
    proc = run("play", "example", env_id, "--agent", "random", "--episodes", 3)
    assert proc.returncode == 0, proc.stderr
    assert summary_rows(proc.stdout)[env_id]["episodes"] == 3


# --- user mistakes: exit 2, one line on stderr ------------------------------------------------


@pytest.mark.parametrize(
    "args, fragments",
    [
        (("show", "{corpus}", "no_such_env"), ("'no_such_env'", "spade-envs list")),
        (("play", "{corpus}", "no_such_env", "--agent", "random"), ("'no_such_env'",)),
        (("play", "{corpus}", "no_such_env"), ("'no_such_env'",)),
        (("list", "{missing}"), ("not found",)),
        (("play", "{missing}", "x", "--agent", "random"), ("not found",)),
        (("play", "{corpus}", "guess_wide", "--agent", "openai"), ("--base-url",)),
        (("play", "{corpus}", "guess_wide", "--agent", "openai", "--model", "m"), ("--base-url",)),
        (("play", "{corpus}", "guess_wide", "--agent", "replay"), ("--actions",)),
        (
            ("play", "{corpus}", "guess_wide", "--agent", "random", "--episodes", "0"),
            ("--episodes",),
        ),
        (("play", "{corpus}", "--all"), ("--all needs an agent",)),
        (("play", "{corpus}", "--agent", "random"), ("ENV_ID",)),
        # upper bounds on counts, checked before anything is built
        (
            ("play", "{corpus}", "--all", "--agent", "random", "--episodes", "1000001"),
            ("--episodes must be between 1 and 1,000,000",),
        ),
        (("play", "{corpus}", "guess_wide", "--max-turns", "0"), ("--max-turns",)),
        (("play", "{corpus}", "guess_wide", "--max-turns", "1001"), ("--max-turns",)),
        (
            ("play", "{corpus}", "guess_wide", "--agent", "random", "--concurrency", "5000"),
            ("--concurrency must be between 1 and 1,024",),
        ),
        (("validate", "{missing}.py", "--max-turns", "99999"), ("--max-turns",)),
        (("validate", "{missing}.py"), ("no such file",)),
        (("play", "{missing}.py"), ("no such file",)),
        (("play", "{corpus}", "guess_wide", "--hint-text", "x"), ("--hint-text is for a .py",)),
    ],
)
def test_user_mistakes_give_exit_2_and_one_line(corpus, tmp_path, args, fragments):
    filled = [a.format(corpus=corpus, missing=tmp_path / "nowhere") for a in args]
    assert_one_line_error(run(*filled), *fragments)


def test_a_tampered_corpus_is_refused_naming_the_record(corpus, tmp_path):
    copy = shutil.copytree(corpus, tmp_path / "tampered")
    game = copy / se.load_corpus(corpus).record("guess_logic").file
    game.write_text(game.read_text().replace("1 and", "0 and"))
    assert_one_line_error(run("list", copy), "guess_logic", "SHA-256")


def test_openai_agent_against_a_dead_server_is_an_agent_error_not_a_crash(corpus):
    # Port 9 (discard) on loopback refuses connections: each episode records an agent error.
    proc = run(
        "play",
        corpus,
        "guess_small",
        "--agent",
        "openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--episodes",
        1,
    )
    assert proc.returncode == 1
    assert summary_rows(proc.stdout)["guess_small"]["errors"] == 1
    assert "(agent): EndpointError" in proc.stderr and "Traceback" not in proc.stderr
    assert "http://127.0.0.1:9/v1/chat/completions: failed after" in proc.stderr


# --- interactive play through a pseudo-terminal ----------------------------------------------


class Terminal:
    """A child process on a pseudo-terminal: ``send`` types a line, ``expect`` waits for text."""

    def __init__(self, args: list[str]):
        master, slave = os.openpty()
        env = {**os.environ, "TERM": "dumb", "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            args,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
        os.close(slave)
        self.master = master
        self.output = ""
        self.seen = 0  # expect() searches only what came after the previous match

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 4096)
        except OSError:  # EIO: the child closed the terminal
            return False
        if not chunk:
            return False
        self.output += chunk.decode("utf-8", "replace").replace("\r\n", "\n")
        return True

    def expect(self, text: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while text not in self.output[self.seen :]:
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(min(left, 0.5)):
                if text in self.output[self.seen :]:
                    break
                raise AssertionError(f"did not see {text!r}; the terminal showed:\n{self.output}")
        end = self.output.index(text, self.seen) + len(text)
        before, self.seen = self.output[self.seen : end], end
        return before

    def send(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def close(self, timeout: float = 20.0) -> int:
        """Drain the output until the child exits; fails if it is still running after ``timeout``."""
        deadline = time.monotonic() + timeout
        try:
            while self.proc.poll() is None and time.monotonic() < deadline and self._read(0.5):
                pass
            return self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            os.close(self.master)


@pytest.fixture
def terminal():
    opened: list[Terminal] = []

    def start(*args: str) -> Terminal:
        opened.append(Terminal([*MODULE, *map(str, args)]))
        return opened[-1]

    yield start
    for t in opened:
        if t.proc.poll() is None:
            t.proc.kill()
            t.proc.wait()


def secret_of(source: str, seed: int) -> int:
    env = se.load_env(source)()
    env.reset(seed=seed)
    return int(re.fullmatch(r"\\boxed\{(\d+)\}", env.solution()).group(1))


def test_interactive_play_wrong_then_winning_answer(corpus, terminal):
    secret = secret_of(GUESS_SOURCE, 7)
    wrong = secret + 1 if secret < 50 else secret - 1
    t = terminal("play", corpus, "guess_wide", "--seed", 7)
    opening = t.expect("[1/10] > ")
    assert "Guess my number between 1 and 50. You have 10 turns." in opening
    assert "HINT:" not in opening
    t.send(f"\\boxed{{{wrong}}}")
    feedback = t.expect("[2/10] > ")
    assert ("Lower." if wrong > secret else "Higher.") in feedback
    t.send(f"I am sure now: \\boxed{{{secret}}}")
    assert "Correct!" in t.expect("Correct!")
    t.expect("episode return: 1.00 (won) after 2 turns")
    assert t.close() == 0
    assert "[3/10]" not in t.output


def test_interactive_play_with_hint_shows_it_once_after_the_task(corpus, terminal):
    t = terminal("play", corpus, "guess_wide", "--hint", "--seed", 2)
    opening = t.expect("[1/10] > ")
    assert f"Answer as \\boxed{{n}}.\n\nHINT: {GUESS_HINT}" in opening
    assert opening.count("HINT:") == 1
    t.send(":q")
    t.expect("episode return: 0.00 (not won) after 0 turns")
    assert t.close() == 0


def test_interactive_play_runs_out_of_turns(corpus, terminal):
    secret = secret_of(SMALL_SOURCE, 5)
    wrong = [g for g in range(1, 9) if g != secret]
    t = terminal("play", corpus, "guess_small", "--seed", 5)
    for turn in range(1, 5):
        t.expect(f"[{turn}/4] > ")
        t.send(f"\\boxed{{{wrong[turn - 1]}}}")
    t.expect("episode return: 0.00 (not won) after 4 turns")
    assert t.close() == 0
    assert "[5/4]" not in t.output


def test_interactive_play_ends_cleanly_on_end_of_input(corpus, terminal):
    t = terminal("play", corpus, "guess_wide")
    t.expect("[1/10] > ")
    os.write(t.master, b"\x04")  # Ctrl-D on an empty line: end of input
    t.expect("(input closed)")
    t.expect("episode return: 0.00 (not won) after 0 turns")
    assert t.close() == 0
    assert "Traceback" not in t.output


def test_interactive_play_of_a_shipped_environment_with_its_solution(terminal):
    corpus = se.load_corpus("example")
    record = corpus.record(corpus.ids()[0])
    env = corpus.factory(record.id)(max_turns=record.max_turns)
    env.reset(seed=4)
    moves = se.solution_actions(env.solution())
    t = terminal("play", "example", record.id, "--seed", 4)
    for turn, move in enumerate(moves, 1):
        t.expect(f"[{turn}/{record.max_turns}] > ")
        t.send(move)
    t.expect(f"episode return: 1.00 (won) after {len(moves)} turns")
    assert t.close() == 0


def test_play_shows_control_characters_as_escapes_not_terminal_codes():
    from spade_envs.cli import printable

    assert printable("\x1b[31mred\x1b[0m\tok\n\x00\x07") == "\\x1b[31mred\\x1b[0m\tok\n\\x00\\x07"
    assert printable("plain text, ünïcode") == "plain text, ünïcode"
    assert printable("\u202e") == "\\u202e"  # right-to-left override


# --- one file, validate, empty corpora, Ctrl-C ------------------------------------------------


@pytest.fixture
def game_file(tmp_path) -> Path:
    path = tmp_path / "my_guess.py"
    path.write_text(GUESS_SOURCE, encoding="utf-8")
    return path


def test_list_of_an_empty_corpus_file_is_an_error_not_zero_environments(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    assert_one_line_error(run("list", empty), "holds no environments")


def test_play_a_single_py_file_by_its_name(game_file, tmp_path):
    proc = run(
        "play", game_file, "--agent", "replay", "--actions", "\\boxed{25}||\\boxed{12}",
        "--episodes", 2, "--hint-text", GUESS_HINT, "--transcripts", tmp_path / "t",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert summary_rows(proc.stdout)["my_guess"]["episodes"] == 2
    files = sorted((tmp_path / "t").glob("my_guess-seed*-hint.json"))
    assert len(files) == 2
    first = json.loads(files[0].read_text())["messages"][1]["content"]
    assert first.endswith(f"HINT: {GUESS_HINT}")


def test_play_a_single_py_file_with_hint_but_no_hint_text_is_a_user_error(game_file):
    assert_one_line_error(run("play", game_file, "--hint"), "--hint-text")


def test_validate_accepts_a_good_file_and_rejects_a_bad_one_with_its_reason(game_file, tmp_path):
    bad = tmp_path / "crashes.py"
    bad.write_text(CRASH_SOURCE, encoding="utf-8")
    syntax = tmp_path / "syntax.py"
    syntax.write_text("class BrokenEnv(:\n", encoding="utf-8")
    proc = run("validate", game_file, bad, syntax, "--hint-text", GUESS_HINT, timeout=120)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith(f"{game_file}: valid (GuessEnv; checked on seeds ")
    assert lines[1].startswith(f"{bad}: rejected: [") and "ZeroDivisionError" in lines[1]
    assert lines[2].startswith(f"{syntax}: rejected: ") and len(lines) == 3
    assert "Traceback" not in proc.stderr


def test_validate_in_process_gives_the_same_verdict(game_file):
    proc = run("validate", game_file, "--no-sandbox")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{game_file}: valid (GuessEnv")


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        line = next(x for x in f if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


@pytest.mark.timeout(180)
def test_a_huge_batch_starts_at_once_and_ctrl_c_keeps_what_finished(tmp_path):
    # 60 environments x 100,000 episodes: 6 million episodes, none built before it is played.
    out = tmp_path / "t"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    args = ["play", "example", "--all", "--agent", "random", "--episodes", "100000"]
    proc = subprocess.Popen(
        [*MODULE, *args, "--transcripts", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(list(out.glob("*.json"))) < 16 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        assert len(list(out.glob("*.json"))) >= 16, "no batch finished within 60 s"
        assert _rss_mib(proc.pid) < 400  # 6 million specs up front took gigabytes
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert stderr.strip().splitlines() == ["spade-envs: interrupted; what finished was kept"]
    rows = summary_rows(stdout)
    kept = list(out.glob("*.json"))
    assert sum(r["episodes"] for r in rows.values()) == len(kept) >= 16
