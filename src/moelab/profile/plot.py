"""`--plot FILE`: one PNG, two panels — the stacked step breakdown per implementation (by group, with the
step floor and the measured chained step marked), and the roofline with each op's measured point."""

from __future__ import annotations

from typing import Any

from moelab.models.graph import GROUPS


def write(result: dict[str, Any], path: str) -> None:
    """Draw `result` (runner.profile's dict) at its first context into the PNG `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pc = result["per_ctx"][0]
    impls = result["impls"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 6.5), dpi=110)
    colors = dict(zip(GROUPS, plt.rcParams["axes.prop_cycle"].by_key()["color"] * 2))
    bottoms = [0.0] * len(impls)
    for g in GROUPS:
        vals = [pc["breakdown"][i]["groups"][g]["us"] / 1e3 for i in impls]
        if any(vals):
            ax1.bar(impls, vals, bottom=bottoms, color=colors[g], label=g)
            bottoms = [b + v for b, v in zip(bottoms, vals)]
    ax1.axhline(pc["step_floor_us"] / 1e3, color="black", ls="--", lw=1, label="step floor")
    step = result.get("step") or {}
    for x, i in enumerate(impls):
        s = (step.get("impls") or {}).get(i) or {}
        for key, marker in (("host_us", "v"), ("graph_us", "o")):
            if s.get(key):
                ax1.scatter([x], [s[key] / 1e3], color="black", marker=marker, zorder=4,
                            label=f"chained step, {key[:-3]}" if x == 0 else None)
    for x, b in enumerate(bottoms):  # linear scale: a log scale would distort stacked segments
        ax1.annotate(f"{b:.3g} ms", (x, b), ha="center", xytext=(0, 3), textcoords="offset points", fontsize=8)
    ax1.set_ylabel("ms per decode step (per-op time x count)")
    ax1.set_title(f"{result['model']}: B={result['batch']}, S={pc['ctx']}, tp={result['tp']} on {result['gpu']}")
    ax1.legend(fontsize=8)

    bw, peak = result["read_gbps"] * 1e9, result["bf16_tflops"] * 1e12
    pts = []
    for row in pc["ops"]:
        if row["estimated"] or not row["flops"]:
            continue
        for i in impls:
            r = row["impls"].get(i) or {}
            us = (r.get("graph") or {}).get("us") or (r.get("host") or {}).get("us")
            if us:
                pts.append((row["flops"] / row["bytes"], row["flops"] / (us * 1e-6) / 1e12, i, row["name"]))
    xs = [p[0] for p in pts] or [1.0]
    lo, hi = min(min(xs) / 4, 0.1), max(max(xs) * 4, peak / bw * 10)
    grid = [lo * (hi / lo) ** (k / 200) for k in range(201)]
    ax2.plot(grid, [min(bw * x, peak) / 1e12 for x in grid], color="black", lw=2,
             label=f"roof: {result['read_gbps']:,.0f} GB/s, {result['bf16_tflops']:,.0f} TFLOP/s")
    markers = {"eager": "x", "compile": "^", "moelab": "o"}
    for i in impls:
        sel = [p for p in pts if p[2] == i]
        ax2.scatter([p[0] for p in sel], [p[1] for p in sel], marker=markers.get(i, "o"), label=i, zorder=3)
    for x, y, i, name in pts:
        if i == impls[-1]:
            ax2.annotate(name, (x, y), fontsize=7, xytext=(5, 3), textcoords="offset points")
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax2.set_ylabel("achieved TFLOP/s (measured)")
    ax2.set_title("each op's measured point against the roofline")
    ax2.grid(True, which="both", lw=0.3, alpha=0.5)
    ax2.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
