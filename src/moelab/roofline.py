"""The analytic roofline of a decode step: the least time each op can take on a GPU, and the step's floor.

Per op (bytes, FLOPs from `models.graph`):
    floor = max(bytes / read bandwidth, FLOPs / matmul rate)     for "compute" ops (tensor-core matmuls)
    floor = bytes / read bandwidth                               for "memory" ops (elementwise, norms, scans)
    floor = bytes on the wire / interconnect bandwidth + latency for "comm" ops (estimated)
The matmul rate is the bf16 rate, or the fp8 rate for fp8 weights when the GPU has one. Intensity is
FLOPs / byte; an op is compute-bound when its intensity exceeds the ridge point (rate / bandwidth).
The step floor is Σ floor × count; the tokens/s ceiling is batch / step floor. Launch and dispatch
costs are not in the floor: they are what a measured profile is compared against it to find.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from moelab.hardware import Ceilings
from moelab.models.graph import GROUPS, Op

# Per-call latency of a small all-reduce when no measurement is given: the one-shot all-reduce target
# of 8 µs for a 4 KB message on 4 H200s (issue 8). A target, not a measurement: comm floors are marked
# estimated for that reason.
DEFAULT_COMM_LATENCY_US = 8.0


@dataclass(frozen=True)
class OpFloor:
    """One op's place on the roofline. Times in µs; `share` is its fraction of the step floor."""

    name: str
    group: str
    kind: str
    count: int
    bytes: int
    flops: int
    intensity: float  # FLOP per byte
    bound: str  # "memory" | "compute" | "comm"
    floor_us: float  # one call
    step_us: float  # floor_us × count
    share: float
    estimated: bool = False
    shapes: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RooflineReport:
    """Per-op floors and the step totals for one (model, batch, context, tp, dtype) on one GPU."""

    ops: list[OpFloor]
    batch: int
    gpu: str
    step_floor_us: float
    bytes_per_step: int
    flops_per_step: int
    read_gbps: float
    matmul_tflops: float

    @property
    def step_floor_ms(self) -> float:
        return self.step_floor_us / 1e3

    @property
    def tokens_per_s(self) -> float:
        """Decode ceiling: `batch` tokens per step floor."""
        return self.batch / (self.step_floor_us * 1e-6) if self.step_floor_us > 0 else float("inf")

    def group_shares(self) -> dict[str, float]:
        """Fraction of the step floor per group (every group of GROUPS present, zeros included)."""
        out = {g: 0.0 for g in GROUPS}
        for o in self.ops:
            out[o.group] += o.share
        return out

    def totals(self) -> dict[str, Any]:
        return {"step_floor_ms": self.step_floor_ms, "tokens_per_s": self.tokens_per_s,
                "bytes_per_step": self.bytes_per_step, "flops_per_step": self.flops_per_step,
                "batch": self.batch, "gpu": self.gpu, "read_gbps": self.read_gbps,
                "matmul_tflops": self.matmul_tflops}

    def to_dict(self) -> dict[str, Any]:
        return {"totals": self.totals(), "groups": self.group_shares(), "ops": [o.to_dict() for o in self.ops]}


def _matmul_tflops(c: Ceilings, dtype: str) -> float:
    if dtype == "fp8" and c.fp8_tflops:
        return c.fp8_tflops
    return c.bf16_tflops


def analyze(ops: Sequence[Op], ceilings: Ceilings, batch: int = 1,
            comm_latency_us: float = DEFAULT_COMM_LATENCY_US) -> RooflineReport:
    """Place each op of a decode step on the roofline of `ceilings` (see the module docstring).

    `batch` is the number of sequences the step decodes (for the tokens/s ceiling). Comm ops use
    `ceilings.interconnect_gbps` (per-GPU bus bandwidth) plus `comm_latency_us` per call; without an
    interconnect figure only the latency is counted. Raises ValueError on non-positive ceilings.
    """
    if ceilings.read_gbps <= 0 or ceilings.bf16_tflops <= 0:
        raise ValueError(f"{ceilings.name}: read bandwidth and bf16 rate must be positive")
    bw = ceilings.read_gbps * 1e9
    rows: list[tuple[Op, float, float, str, bool]] = []
    for op in ops:
        intensity = op.flops / op.bytes if op.bytes else float("inf") if op.flops else 0.0
        if op.kind == "comm":
            wire = op.bytes / (ceilings.interconnect_gbps * 1e9) if ceilings.interconnect_gbps else 0.0
            t, bound, est = wire * 1e6 + comm_latency_us, "comm", True
        else:
            t_mem = op.bytes / bw * 1e6
            t_cmp = op.flops / (_matmul_tflops(ceilings, op.dtype) * 1e12) * 1e6 if op.kind == "compute" else 0.0
            t, bound, est = (t_cmp, "compute", False) if t_cmp > t_mem else (t_mem, "memory", False)
        rows.append((op, intensity, t, bound, est))
    step = sum(t * op.count for op, _, t, _, _ in rows)
    floors = [OpFloor(op.name, op.group, op.kind, op.count, op.bytes, op.flops, i, bound, t, t * op.count,
                      (t * op.count / step) if step else 0.0, est, op.shapes)
              for op, i, t, bound, est in rows]
    return RooflineReport(floors, batch, ceilings.name, step, sum(o.step_bytes for o in ops),
                          sum(o.step_flops for o in ops), ceilings.read_gbps, ceilings.bf16_tflops)


def plot(reports: Sequence[RooflineReport], ceilings: Ceilings, path: str, title: str = "",
         labels: Sequence[str] | None = None) -> None:
    """Write a log-log roofline chart (PNG) to `path`: the bandwidth slope, the matmul roof(s), and every
    non-comm op of each report as a labelled point at (intensity, FLOPs / floor). `labels` (one per
    report, e.g. "S=4096") tell apart the points of an op that differs between reports."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bw, peak = ceilings.read_gbps * 1e9, ceilings.bf16_tflops * 1e12
    labels = list(labels) if labels else [""] * len(reports)
    variants: dict[tuple[str, int, int], tuple[OpFloor, list[str]]] = {}  # identical ops drawn once
    for r, lab in zip(reports, labels):
        for o in r.ops:
            if o.kind != "comm" and o.flops > 0:
                variants.setdefault((o.name, o.bytes, o.flops), (o, []))[1].append(lab)
    n_variants = {name: sum(k[0] == name for k in variants) for name, _, _ in variants}
    pts = [(o, ", ".join(labs) if n_variants[o.name] > 1 else "") for o, labs in variants.values()]
    xs = [o.intensity for o, _ in pts] or [1.0]
    lo, hi = min(min(xs) / 4, 0.1), max(max(xs) * 4, peak / bw * 20)
    fig, ax = plt.subplots(figsize=(10, 6.5), dpi=120)
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [min(bw * x, peak) / 1e12 for x in grid], color="black", lw=2,
            label=f"roof: {ceilings.read_gbps:,.0f} GB/s, {ceilings.bf16_tflops:,.0f} TFLOP/s bf16")
    if ceilings.fp8_tflops:
        ax.plot(grid, [min(bw * x, ceilings.fp8_tflops * 1e12) / 1e12 for x in grid], color="gray", lw=1,
                ls="--", label=f"fp8 roof: {ceilings.fp8_tflops:,.0f} TFLOP/s")
    ax.axvline(peak / bw, color="gray", lw=0.8, ls=":")
    colors = dict(zip(GROUPS, plt.rcParams["axes.prop_cycle"].by_key()["color"] * 2))
    # Ops of nearly equal intensity sit on the same spot of the roof: one point, one joined label.
    clusters: list[dict] = []
    for o, lab in sorted(pts, key=lambda p: p[0].intensity):
        y = o.flops / (o.floor_us * 1e-6) / 1e12 if o.floor_us > 0 else 0.0
        c = clusters[-1] if clusters else None
        if c is None or math.log10(o.intensity / c["x"]) > 0.03 or abs(math.log10(max(y, 1e-12) / max(c["y"], 1e-12))) > 0.03:
            c = {"x": o.intensity, "y": y, "names": [], "share": -1.0, "group": o.group}
            clusters.append(c)
        c["names"].append(f"{o.name} ({lab})" if lab else o.name)
        if o.share > c["share"]:  # the point takes the colour of its heaviest op
            c["share"], c["group"] = o.share, o.group
    seen: set[str] = set()
    for i, c in enumerate(clusters):
        ax.scatter([c["x"]], [c["y"]], color=colors[c["group"]], s=20 + 400 * c["share"], zorder=3, alpha=0.8,
                   label=c["group"] if c["group"] not in seen else None)
        seen.add(c["group"])
        text = "\n".join(", ".join(c["names"][j:j + 3]) for j in range(0, len(c["names"]), 3))
        ax.annotate(text, (c["x"], c["y"]), fontsize=7, xytext=(8, -14 if i % 2 else 6), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("attainable TFLOP/s at the floor")
    ax.set_title(title or f"decode-step roofline on {ceilings.name}")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
