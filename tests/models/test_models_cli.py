"""`moelab models` and `moelab roofline` through Typer's CliRunner (and one real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import moelab.cli
from moelab.errors import UserError

moelab.cli._load_commands()
runner = CliRunner()


def _run(*args):
    return runner.invoke(moelab.cli.app, list(args))


def test_models_json_lists_every_preset_with_counts():
    r = _run("models", "--json")
    assert r.exit_code == 0, r.output
    rows = {row["preset"]: row for row in json.loads(r.stdout)}
    assert rows["qwen3-30b-a3b"]["total_b"] == pytest.approx(30.53, abs=0.01)
    assert rows["qwen3-30b-a3b"]["active_b"] == pytest.approx(3.04, abs=0.01)
    assert rows["gpt-oss-120b"]["active_b"] == pytest.approx(5.13, abs=0.01)


def test_models_table(monkeypatch):
    import moelab.report
    monkeypatch.setattr(moelab.report.console, "width", 200)
    r = _run("models")
    assert r.exit_code == 0 and "qwen3-30b-a3b" in r.stdout


def test_roofline_json_parses():
    r = _run("roofline", "qwen3-30b-a3b", "--gpu", "h200", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["gpu"] == "H200" and d["batch"] == 1 and d["tp"] == 1 and len(d["contexts"]) == 1
    c = d["contexts"][0]
    assert c["ctx"] == 1024 and c["totals"]["step_floor_ms"] > 0 and c["totals"]["tokens_per_s"] > 0
    assert sum(o["share"] for o in c["ops"]) == pytest.approx(1.0)
    assert {"name", "group", "count", "bytes", "flops", "intensity", "bound", "floor_us", "share"} <= set(c["ops"][0])


def test_roofline_ctx_list_tp_and_plot(tmp_path):
    png = tmp_path / "r.png"
    r = _run("roofline", "qwen3-30b-a3b", "--gpu", "h200", "--ctx", "1024,65536", "--tp", "4", "--batch", "2",
             "--plot", str(png), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    a = [c["groups"]["attention"] for c in d["contexts"]]
    assert a[0] < a[1] and d["contexts"][0]["groups"]["communication"] > 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_roofline_tables_print(monkeypatch):
    import moelab.report
    monkeypatch.setattr(moelab.report.console, "width", 200)
    r = _run("roofline", "deepseek-v3", "--gpu", "h200", "--ctx", "1024,8192", "--dtype", "fp8")
    assert r.exit_code == 0, r.output
    assert "attention.mla" in r.stdout and "tokens/s" in r.stdout


@pytest.mark.parametrize("args", [
    ["roofline", "no-such-model", "--gpu", "h200"],
    ["roofline", "qwen3-30b-a3b", "--gpu", "h200", "--ctx", "abc"],
    ["roofline", "qwen3-30b-a3b", "--gpu", "h200", "--tp", "3"],
    ["roofline", "qwen3-30b-a3b", "--gpu", "no-such-gpu"],
])
def test_user_mistakes_raise_user_error(args):
    r = _run(*args)
    assert isinstance(r.exception, UserError) and "\n" not in str(r.exception)


def test_bad_model_exits_2_with_one_line():
    p = subprocess.run([sys.executable, "-m", "moelab", "roofline", "no-such-model", "--gpu", "h200"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert p.stderr.strip().startswith("moelab: error: unknown model 'no-such-model'")
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_roofline_default_gpu_without_cuda_is_h200_datasheet():
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the default is its measured ceilings")
    r = _run("roofline", "olmoe-1b-7b", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["gpu"] == "H200" and "no GPU here" in d["note"] and d["gpu_source"].startswith("datasheet")
