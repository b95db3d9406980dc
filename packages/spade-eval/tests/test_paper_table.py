"""Paper rows from results.json files: upstream's test facts as conformance cases."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from spade_eval import paper
from spade_eval.render_table import main as table_main

FIXTURE = Path(__file__).parent / "fixtures" / "upstream_results_rq1.json"
PY = sys.executable


def cells(markdown: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in markdown.splitlines()]


def write(tmp_path, doc, name="results.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_column_maps_are_upstreams():
    assert list(paper.RQ1_COLUMNS) == ["AIME-25", "AIME-26", "GPQA-Diamond", "LiveCodeBench",
                                       "RG:Math", "RG:Algorithmic", "RG:Cognition", "RG:Logic"]  # fmt: skip
    assert paper.RQ2_COLUMNS["BFCL-v4"] == "bfcl_overall_acc"
    assert paper.RQ2_COLUMNS["ACEBench"] == "acebench/en/overall"
    assert paper.RQ1_COLUMNS["RG:Logic"] == "gem_eval/category_rg_logic/win_rate"


def test_rq1_cli_on_upstream_results_gives_upstreams_cells(capsys):
    assert table_main(["--results", str(FIXTURE), "--rq", "RQ1", "--method-name", "SPADE"]) == 0
    rows = cells(capsys.readouterr().out)
    assert rows[0] == ["Method", *paper.RQ1_COLUMNS]
    assert rows[1] == ["---"] * 9
    assert rows[2] == ["SPADE", "47.4", "50.0", "62.0", "35.1", "—", "—", "—", "—"]


def test_missing_metric_is_an_em_dash(tmp_path, capsys):
    path = write(tmp_path, {"metrics": {"aime2025_pass1": 0.5}})
    assert table_main([path, "--rq", "RQ1", "--method-name", "partial"]) == 0
    assert cells(capsys.readouterr().out)[2] == ["partial", "50.0"] + ["—"] * 7


def test_rq2_percentages_and_nested_driver_layout(tmp_path, capsys):
    # upstream's driver nests metrics per suite; its tests use a flat mapping: both read alike
    nested = {"metrics": {"bfcl_full": {"bfcl_overall_acc": 0.404},
                          "tau2": {"gem_eval/tau2_retail_base/pass_at_1": 0.25},
                          "acebench": {"acebench/en/overall": 0.782, "acebench/en/normal": "n/a"}}}  # fmt: skip
    path = write(tmp_path, nested)
    assert table_main([path, "--rq", "RQ2", "--method-name", "SPADE", "--format", "csv"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Method," + ",".join(paper.RQ2_COLUMNS)
    assert out[1] == "SPADE,40.4,25.0,—,—,—,—,—,78.2"


def test_latex_rows_and_two_methods_and_png(tmp_path, capsys):
    ours = write(tmp_path, {"model": "ours", "suites": {},
                            "metrics": {"aime2026_pass1": 0.0625}}, "ours.json")  # fmt: skip
    png = tmp_path / "rq1.png"
    argv = [str(FIXTURE), ours, "--rq", "RQ1", "--format", "latex", "--plot", str(png)]
    assert table_main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == r"Qwen/Qwen3-4B-Instruct-2507 & 47.4 & 50.0 & 62.0 & 35.1 & — & — & — & — \\"
    assert lines[1] == r"ours & — & 6.2 & — & — & — & — & — & — \\"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--rq", "RQ1", "--method-name", "a", "--method-name", "b", "FIX"], "2 --method-name"),
        (["--method-name", "a", "FIX"], "needs --rq"),
        (["--rq", "RQ1", "/no/results.json"], "not a readable results.json"),
    ],
)
def test_errors_are_one_line(args, needle):
    args = [str(FIXTURE) if a == "FIX" else a for a in args]
    proc = subprocess.run([PY, "-m", "spade_eval.render_table", *args], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and needle in proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1


def test_cell_format():
    assert [paper.cell(v) for v in (0.474, 1, 0.0, None, "x", "0.25", 0.0625)] == [
        "47.4", "100.0", "0.0", "—", "—", "25.0", "6.2"]  # fmt: skip
