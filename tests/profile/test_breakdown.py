"""The profiler's bookkeeping on hand-made rows: counts × times = totals, shares, groups, the gap."""

from __future__ import annotations

import pytest

from moelab.models.graph import GROUPS
from moelab.profile import breakdown as bk


def _row(name, group, count, floor, graph=None, host=None, launches=1, impl="moelab", estimated=False):
    return {"name": name, "group": group, "count": count, "floor_us": floor, "estimated": estimated,
            "impls": {} if estimated else {impl: {"graph": {"us": graph}, "host": {"us": host}, "launches": launches}}}


ROWS = [
    _row("add_rmsnorm", "norm", 96, 0.5, graph=2.0, host=20.0, launches=1),
    _row("experts", "moe", 48, 18.0, graph=30.0, host=60.0, launches=2),
    _row("qkv_proj", "attention", 48, 4.0, graph=5.0, host=15.0, launches=1),
    _row("lm_head", "lm_head", 1, 140.0, graph=None, host=150.0, launches=1),  # not capturable: host time
    _row("allreduce.moe", "communication", 48, 9.0, estimated=True),
]


def test_counts_times_totals_and_shares():
    bd = bk.breakdown(ROWS, "moelab", step_floor_us=2000.0)
    by = {o["name"]: o for o in bd["ops"]}
    assert by["add_rmsnorm"]["step_us"] == 96 * 2.0
    assert by["experts"]["step_us"] == 48 * 30.0
    assert by["lm_head"]["source"] == "host" and by["lm_head"]["step_us"] == 150.0
    assert by["allreduce.moe"]["source"] == "estimated" and by["allreduce.moe"]["step_us"] == 48 * 9.0
    want_total = 96 * 2 + 48 * 30 + 48 * 5 + 150 + 48 * 9
    assert bd["total_us"] == pytest.approx(want_total)
    assert bd["kernel_sum_us"] == pytest.approx(want_total - 48 * 9)
    assert bd["estimated_us"] == pytest.approx(48 * 9)
    assert sum(o["share"] for o in bd["ops"]) == pytest.approx(1.0)
    assert sum(g["share"] for g in bd["groups"].values()) == pytest.approx(1.0)
    assert set(bd["groups"]) == set(GROUPS)
    assert bd["groups"]["moe"]["us"] == pytest.approx(48 * 30.0)
    assert bd["groups"]["linear_attention"]["us"] == 0.0
    assert bd["host_sum_us"] == pytest.approx(96 * 20 + 48 * 60 + 48 * 15 + 150)
    assert bd["launches_sum"] == 96 * 1 + 48 * 2 + 48 * 1 + 1
    assert bd["pct_of_floor"] == pytest.approx(100 * 2000.0 / want_total)
    assert by["experts"]["pct_of_floor"] == pytest.approx(100 * 18.0 / 30.0)


def test_missing_impl_is_listed_not_summed():
    bd = bk.breakdown(ROWS, "eager")
    assert set(bd["missing"]) == {"add_rmsnorm", "experts", "qkv_proj", "lm_head"}
    assert bd["total_us"] == pytest.approx(48 * 9)  # only the estimate is left
    assert bd["launches_sum"] is None and bd["host_sum_us"] is None


def test_gap_against_the_chained_step():
    bd = bk.breakdown(ROWS, "moelab")
    k = bd["kernel_sum_us"]
    g = bk.gap(bd, {"host_us": k + 5000.0, "graph_us": k * 1.05, "launches": 250})
    assert g["gap_host_us"] == pytest.approx(5000.0)
    assert g["gap_graph_us"] == pytest.approx(0.05 * k)
    assert g["graph_vs_sum_pct"] == pytest.approx(5.0)
    assert g["gap_per_launch_us"] == pytest.approx(20.0)
    assert g["step_with_comm_est_us"] == pytest.approx(k * 1.05 + 48 * 9)
    g2 = bk.gap(bd, {"host_us": k + 100.0, "graph_us": None, "launches": None})
    assert g2["gap_graph_us"] is None and g2["gap_per_launch_us"] is None
    assert bk.gap(bd, None) is None


def test_sweep_rows_sum_to_100():
    rows = bk.sweep([(1024, bk.breakdown(ROWS, "moelab")), (4096, bk.breakdown(ROWS[:2], "moelab"))])
    for r in rows:
        assert sum(v for k, v in r.items() if k.endswith("_%")) == pytest.approx(100.0)
    assert rows[1]["moe_%"] > rows[0]["moe_%"]
