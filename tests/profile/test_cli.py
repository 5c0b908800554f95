"""`moelab profile` through Typer's CliRunner with the fake meter (and one real subprocess without a GPU)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest
import torch
from typer.testing import CliRunner

import moelab.cli
from moelab.errors import UserError
from moelab.models.graph import GROUPS

moelab.cli._load_commands()


def _run(*args):
    return CliRunner().invoke(moelab.cli.app, ["profile", *args])


def test_json_schema(fake_meter, tiny_models, tmp_path):
    out_csv, out_png = tmp_path / "ops.csv", tmp_path / "p.png"
    r = _run(str(tiny_models["tiny-qwen3.5"]), "--batch", "2", "--ctx", "16,32", "--tp", "2", "--impl", "eager",
             "--gpu", "h200", "--json", "--no-save", "--csv", str(out_csv), "--plot", str(out_png))
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert {"model", "batch", "tp", "contexts", "impls", "gpu", "read_gbps", "per_ctx", "step", "sweep", "notes",
            "env"} <= set(res)
    assert res["contexts"] == [16, 32] and res["impls"] == ["eager"] and res["tp"] == 2
    for pc in res["per_ctx"]:
        assert {"ctx", "ops", "step_floor_us", "breakdown"} <= set(pc)
        bd = pc["breakdown"]["eager"]
        assert set(bd["groups"]) == set(GROUPS)
        assert sum(o["share"] for o in bd["ops"]) == pytest.approx(1.0)
        for row in pc["ops"]:
            assert {"name", "group", "count", "covers", "bytes", "flops", "floor_us", "estimated", "impls"} <= set(row)
            if not row["estimated"]:
                m = row["impls"]["eager"]
                assert {"graph", "host", "launches", "gbps"} <= set(m)
    s = res["step"]["impls"]["eager"]
    assert {"host_us", "graph_us", "launches", "gap", "rel_err_vs_eager"} <= set(s)
    assert {"kernel_sum_us", "gap_host_us", "gap_graph_us", "gap_per_launch_us"} <= set(s["gap"])
    rows = list(csv.DictReader(out_csv.open()))
    assert {r["ctx"] for r in rows} == {"16", "32"} and any(r["impl"] == "estimate" for r in rows)
    assert out_png.stat().st_size > 10_000


def test_tables_print(fake_meter, tiny_models, monkeypatch):
    import moelab.report
    monkeypatch.setattr(moelab.report.console, "width", 250)
    r = _run(str(tiny_models["tiny-qwen3-moe"]), "--ctx", "16", "--impl", "eager", "--gpu", "h200", "--no-save")
    assert r.exit_code == 0, r.output
    for text in ("per op", "step breakdown by group", "dispatch and launch gap", "experts"):
        assert text in r.stdout


@pytest.mark.parametrize("args, msg", [
    (["--impl", "eager,fast"], "--impl"),
    (["--ctx", "0"], "--ctx"),
    (["--plot", "x.jpg"], "--plot"),
    (["--dtype", "fp8"], "--dtype"),
    (["--tp", "5"], "--tp 5 does not divide"),  # named before the GPU is asked for
])
def test_bad_flags_are_user_errors(fake_meter, tiny_models, args, msg):
    r = _run(str(tiny_models["tiny-qwen3-moe"]), "--gpu", "h200", "--no-save", *args)
    assert isinstance(r.exception, UserError) and msg in str(r.exception)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message printed without a GPU")
def test_no_gpu_one_line_exit_2():
    p = subprocess.run([sys.executable, "-m", "moelab", "profile", "qwen3-30b-a3b"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("moelab: error:") and "moelab roofline" in lines[0]
