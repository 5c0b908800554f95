"""`moelab mine --report`: best kernels, failures by reason and source, the PNG."""

import json
import subprocess
import sys

import pytest
from fake_llm import ScriptedLLM
from fake_verify import FakeVerify
from test_loop import SCRIPT, _run

from moelab.errors import UserError
from moelab.mine import read_log, summarize, write_report
from moelab.mine.report import progress_series


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    with ScriptedLLM(SCRIPT) as llm:
        _run(d, llm, FakeVerify(), rounds=8, trials=1)
    return d


def test_summary_counts_by_source_and_code(run_dir):
    s = summarize(read_log(run_dir / "attempts.jsonl"))
    assert (s["attempts"], s["passed"], s["failed"]) == (8, 2, 6)
    (row,) = s["problems"]
    assert row["problem"] == "scale_add" and row["best_round"] == 1 and row["best_kernel"].endswith("round_001.py")
    assert row["speedup_vs_compile"] == 1.3 and row["speedup_vs_eager"] == 2.0 and row["pct_of_floor"] == 50.0
    fails = {(f["source"], f["code"]): f["attempts"] for f in s["failures"]}
    assert fails == {("verify", "compile_error"): 1, ("verify", "alias"): 1, ("verify", "mutation"): 1,
                     ("answer", "no_code"): 1, ("answer", "empty_answer"): 1, ("endpoint", "timeout"): 1,
                     ("endpoint", "malformed_answer"): 1}
    assert s["failures"][0]["source"] == "verify"  # the caught hacks come first


def test_best_speedup_series_ignores_failed_claims(run_dir):
    xs, ys = progress_series(read_log(run_dir / "attempts.jsonl"), "scale_add", "speedup_vs_compile")
    assert xs == list(range(1, 9)) and ys == [1.3] * 8  # the hack's 1000× never counts


def test_report_files_and_cli(run_dir):
    s = write_report(run_dir)
    png = run_dir / "report.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert json.loads((run_dir / "report.json").read_text())["passed"] == s["passed"] == 2
    out = subprocess.run([sys.executable, "-m", "moelab", "mine", "--report", str(run_dir), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["problems"][0]["best_round"] == 1
    out = subprocess.run([sys.executable, "-m", "moelab", "mine", "--report", str(run_dir)],
                         capture_output=True, text=True, timeout=120, env={**__import__("os").environ, "COLUMNS": "160"})
    assert out.returncode == 0 and "Failed attempts by reason" in out.stdout and "compile_error" in out.stdout


def test_report_of_a_directory_without_a_log(tmp_path):
    with pytest.raises(UserError, match="no mining log"):
        write_report(tmp_path)
    out = subprocess.run([sys.executable, "-m", "moelab", "mine", "--report", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.startswith("moelab: error:") and "Traceback" not in out.stderr
