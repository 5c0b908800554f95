"""The bookkeeping of a profile, pure (no torch, no timer): per-op time × count, shares, groups, the gap.

Input rows (one per measured unit, as `runner.profile` makes them):
    {"name", "group", "count", "floor_us" (per call), "bytes" (per call), "estimated" (bool),
     "impls": {impl: {"graph": {"us": float | None, ...}, "host": {"us": ...}, "launches": int | None}}}
Per implementation:
    kernel time of a call = its graph-replayed time (the kernels alone), else its host-launched time
                            (marked "host": it could not be captured), estimated rows their floor;
    step_us of a row      = kernel time × count;        share = step_us / Σ step_us;
    groups                = Σ step_us per group of the first worklog's part 2 (moe + shared expert,
                            attention, norm, lm_head, linear_attention, embedding) + communication, other;
    kernel_sum_us         = Σ step_us of the measured rows but the collectives (what the GPU must spend,
                            launches aside); comm_us = Σ step_us of the collectives, measured under torchrun
                            (`profile.comm`), estimated on one GPU;
    the gap               = chained step (host-launched, and graph-replayed) − kernel_sum_us: what
                            dispatch and launches add (46.5 of 87 ms in the worklog), with the step's
                            counted launches beside it (gap per launch).
"""

from __future__ import annotations

from typing import Any

from moelab.models.graph import GROUPS


def call_us(row: dict[str, Any], impl: str) -> tuple[float | None, str]:
    """One call's kernel time of `row` under `impl` and where it came from: graph | host | estimated | none."""
    if row.get("estimated"):
        return row["floor_us"], "estimated"
    r = row["impls"].get(impl) or {}
    g = (r.get("graph") or {}).get("us")
    if g is not None:
        return g, "graph"
    h = (r.get("host") or {}).get("us")
    if h is not None:
        return h, "host"
    return None, "none"


def breakdown(rows: list[dict[str, Any]], impl: str, step_floor_us: float | None = None) -> dict[str, Any]:
    """The step breakdown of one implementation (see the module docstring). Rows without a time for
    `impl` are listed in `missing` and left out of the sums."""
    ops, missing = [], []
    for row in rows:
        us, src = call_us(row, impl)
        if us is None:
            missing.append(row["name"])
            continue
        r = row["impls"].get(impl) or {}
        host = None if row.get("estimated") else (r.get("host") or {}).get("us")
        ops.append({"name": row["name"], "group": row["group"], "count": row["count"], "call_us": us,
                    "source": src, "step_us": us * row["count"],
                    "host_step_us": None if host is None else host * row["count"],
                    "launches": r.get("launches"), "floor_us": row["floor_us"],
                    "pct_of_floor": 100.0 * row["floor_us"] / us if us > 0 else None})
    total = sum(o["step_us"] for o in ops)
    for o in ops:
        o["share"] = o["step_us"] / total if total > 0 else 0.0
    groups = {g: {"us": 0.0, "share": 0.0} for g in GROUPS}
    for o in ops:
        groups[o["group"]]["us"] += o["step_us"]
    for g in groups.values():
        g["share"] = g["us"] / total if total > 0 else 0.0
    # The kernel sum is the GPU work the chained step also runs: measured rows, collectives aside (the chain runs
    # none; under torchrun they are measured, on one GPU estimated — `comm_us` either way).
    measured = [o for o in ops if o["source"] != "estimated" and o["group"] != "communication"]
    hosts = [o["host_step_us"] for o in measured]
    launches = [o["launches"] for o in measured]
    kernel_sum = sum(o["step_us"] for o in measured)
    comm = [o for o in ops if o["group"] == "communication"]
    return {
        "impl": impl, "ops": ops, "groups": groups, "missing": missing,
        "total_us": total, "kernel_sum_us": kernel_sum,
        "estimated_us": sum(o["step_us"] for o in ops if o["source"] == "estimated"),
        "comm_us": sum(o["step_us"] for o in comm),
        "comm_measured": bool(comm) and all(o["source"] != "estimated" for o in comm),
        "host_sum_us": sum(hosts) if hosts and None not in hosts else None,
        "launches_sum": (sum(n * o["count"] for n, o in zip(launches, measured))
                         if launches and None not in launches else None),
        "floor_us": step_floor_us,
        "pct_of_floor": 100.0 * step_floor_us / total if step_floor_us and total > 0 else None,
    }


def gap(bd: dict[str, Any], step: dict[str, Any] | None) -> dict[str, Any] | None:
    """The chained step against the per-op sum of `bd`. `step`: {"host_us", "graph_us" (either may be
    None), "launches"}; the chain runs no collective, so the sum compared is the measured rows' only."""
    if not step:
        return None
    k = bd["kernel_sum_us"]
    host, graph, n = step.get("host_us"), step.get("graph_us"), step.get("launches")
    out = {"kernel_sum_us": k, "step_host_us": host, "step_graph_us": graph, "launches": n,
           "gap_host_us": None if host is None else host - k,
           "gap_graph_us": None if graph is None else graph - k,
           "graph_vs_sum_pct": None if graph is None or k <= 0 else 100.0 * (graph / k - 1.0),
           # the chain plus the step's collectives (measured under torchrun, else estimated)
           "step_with_comm_est_us": None if host is None
           else (graph if graph is not None else host) + bd["comm_us"],
           "comm_measured": bd["comm_measured"]}
    out["gap_per_launch_us"] = (out["gap_host_us"] / n if out["gap_host_us"] is not None and n else None)
    return out


def sweep(breakdowns: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """(ctx, breakdown) pairs -> one row per context: total and the share of every group (in %)."""
    return [{"ctx": ctx, "total_us": bd["total_us"],
             **{f"{g}_%": 100.0 * bd["groups"][g]["share"] for g in GROUPS}} for ctx, bd in breakdowns]
