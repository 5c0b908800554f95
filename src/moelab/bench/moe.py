"""`moelab bench moe`: one MoE layer, every implementation side by side, against the floor.

Every implementation maps (x[T,H], router_logits[T,E]) → out[T,H], routing included:
  hf_loop          the transformers expert loop (host-launched: its host syncs forbid graph capture)
  hf_loop+compile  torch.compile of it (graph breaks at the data-dependent loop)
  gather_bmm       index_select + bmm (first worklog), host-launched and graph-replayed
  gather_bmm+compile
  moelab           route kernel + fused_moe kernel, host-launched and graph-replayed
Weights rotate over several layer copies and each rotation set has its own logits, so neither the L2
nor a repeated routing can serve a call from cache. There are at least MIN_SETS sets, so a graph replays
MIN_SETS layers back to back, as a decode step's graph does (48 layers for Qwen3-30B-A3B): with one set per graph
(what L2 alone asks for above ~180 MB of weights), every call also paid a whole graph launch, which no layer of a
real step pays, and every replay repeated the same routing. The floor of a call is
    max(distinct experts hit × bytes per expert / read bandwidth,  FLOPs / bf16 matmul rate),
with the read bandwidth measured (or from the datasheet with --gpu), averaged over the sets. Where FLOPs set the
floor (prefill sizes), the bf16 matmul rate is measured again just before and just after moelab's graph-replayed
samples (`hardware.matmul_rate`, the ceiling's own kernel), and the floor divides by the fastest of the ceiling's
rate and those two: on an H200 the rate moves 700-800 TFLOP/s with the power state (session 24, stage DY), and a
floor divided by a dip flatters the kernel (row keys window_bf16_tflops, floor_bf16_tflops).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch

from moelab import hardware, ops, timing
from moelab.bench.baselines import gather_bmm, gather_bmm_bytes, hf_expert_loop

GATHER_BMM_MAX_BYTES = 16 * 2**30  # beyond this, gather_bmm's weight copy does not fit: reported as skipped
MIN_SETS = 8  # calls per graph at least: see the module docstring (session 13, bench-moe-…, docs/worklog.md)


@dataclass
class MoeShape:
    E: int
    H: int
    I: int
    k: int
    shared_I: int = 0
    shared_gate: bool = False
    scoring: str = "softmax"
    renormalize: bool = True

    def expert_bytes(self, elt: int = 2) -> int:
        return 3 * self.H * self.I * elt

    def shared_bytes(self, elt: int = 2) -> int:
        return (3 * self.H * self.shared_I + (self.H if self.shared_gate else 0)) * elt

    def flops(self, T: int) -> float:
        return 2.0 * T * (self.k * 3 * self.H * self.I + 3 * self.H * self.shared_I)


def shape_from_spec(spec, tp: int = 1, shared: bool = True) -> MoeShape:
    """Routed experts sharded along I over tp ranks (as tensor-parallel serving does)."""
    if not spec.num_experts:
        raise ValueError(f"{spec.name} has no routed experts")
    if spec.expert_intermediate % tp:
        raise ValueError(f"expert width {spec.expert_intermediate} does not split over tp={tp}")
    sI = spec.shared_intermediate // tp if shared else 0
    return MoeShape(E=spec.num_experts, H=spec.hidden, I=spec.expert_intermediate // tp, k=spec.top_k,
                    shared_I=sI, shared_gate=bool(sI and spec.shared_gate),
                    scoring="sigmoid" if spec.scoring == "sigmoid" else "softmax",
                    renormalize=bool(spec.norm_topk_prob))


def _torch_route(logits, k, renormalize):
    p = torch.softmax(logits, dim=-1, dtype=torch.float32)
    w, ids = torch.topk(p, k, dim=-1)
    if renormalize:
        w = w / w.sum(-1, keepdim=True)
    return w, ids


def make_impls(shape: MoeShape) -> dict[str, Callable]:
    """name → fn(x, logits, w13, w2, shared) → out. Baselines route in torch; moelab with its kernel."""
    k, rn = shape.k, shape.renormalize
    block = ops.get("moe_block", "moelab")

    def _shared(fn):
        def with_shared(x, logits, w13, w2, sh):
            y = fn(x, logits, w13, w2)
            if sh is not None:
                sw13, sw2, sg = sh
                gu = x @ sw13.t()
                a, b = gu.chunk(2, dim=-1)
                s = (torch.nn.functional.silu(a) * b) @ sw2.t()
                y = y + (torch.sigmoid(x @ sg.t()) * s if sg is not None else s)
            return y
        return with_shared

    def hf(x, logits, w13, w2):
        w, ids = _torch_route(logits, k, rn)
        return hf_expert_loop(x, w13, w2, w, ids)

    def gb(x, logits, w13, w2):
        w, ids = _torch_route(logits, k, rn)
        return gather_bmm(x, w13, w2, w, ids)

    def ml(x, logits, w13, w2, sh):  # moelab's routed block as a caller runs it (its own ids: no host check)
        return block(x, logits, w13, w2, k, rn, sh)[0]

    return {"hf_loop": _shared(hf), "gather_bmm": _shared(gb), "moelab": ml}


def run(shape: MoeShape, tokens: list[int], *, read_gbps: float, bf16_tflops: float, samples: int = 20,
        compile_baselines: bool = True, progress: Callable[[str], None] | None = None,
        min_sets: int = MIN_SETS) -> list[dict]:
    """Measure every implementation at every T; one row per T (times in µs, per call, median)."""
    if not torch.cuda.is_available():
        raise RuntimeError("moelab bench moe needs a CUDA GPU (times on a CPU would say nothing about one)")
    dev, dt = torch.device("cuda"), torch.bfloat16
    impls = make_impls(shape)
    compiled: dict[str, Callable] = {}
    if compile_baselines:
        compiled = {f"{n}+compile": torch.compile(f) for n, f in impls.items() if not n.startswith("moelab")}
    layer_bytes = shape.E * shape.expert_bytes()
    copies_max = max(1, min(4, int(8 * 2**30 // max(layer_bytes, 1))))
    gen = torch.Generator(device=dev).manual_seed(0)

    def rnd(*s, scale):
        return (torch.randn(*s, device=dev, dtype=torch.float32, generator=gen) * scale).to(dt)

    n_layers = copies_max
    layers = [(rnd(shape.E, 2 * shape.I, shape.H, scale=shape.H ** -0.5),
               rnd(shape.E, shape.H, shape.I, scale=shape.I ** -0.5)) for _ in range(n_layers)]
    sh = None
    if shape.shared_I:
        sh = (rnd(2 * shape.shared_I, shape.H, scale=shape.H ** -0.5), rnd(shape.H, shape.shared_I, scale=shape.shared_I ** -0.5),
              rnd(1, shape.H, scale=shape.H ** -0.5) if shape.shared_gate else None)
    rows = []
    for T in tokens:
        expected_u = shape.E * (1 - (1 - shape.k / shape.E) ** T)
        n_sets = max(min_sets, timing.sets_for_l2(int(expected_u * shape.expert_bytes() + shape.shared_bytes())))
        sets = []
        for i in range(n_sets):
            w13, w2 = layers[i % n_layers]
            sets.append((rnd(T, shape.H, scale=1.0), torch.randn(T, shape.E, device=dev, generator=gen), w13, w2, sh))
        distinct = statistics.fmean(
            float(torch.unique(_torch_route(s[1], shape.k, True)[1]).numel()) for s in sets)
        bytes_ = distinct * shape.expert_bytes() + shape.shared_bytes()
        floor_us = max(bytes_ / (read_gbps * 1e3), shape.flops(T) / (bf16_tflops * 1e6))
        row = {"T": T, "distinct_experts": distinct, "bytes": bytes_, "flops": shape.flops(T), "floor_us": floor_us,
               "sets": n_sets}
        # Correctness first, against the fp32 reference, on the first set.
        x, lg, w13, w2, _ = sets[0]
        ref_w, ref_ids = ops.get("route", "eager")(lg, shape.k, "softmax", shape.renormalize)
        ref = ops.get("fused_moe", "eager")(x, w13, w2, ref_w, ref_ids, sh)
        for name in [n for n in impls if n.startswith("moelab")]:
            got = impls[name](*sets[0])
            row[f"{name}_rel_err"] = float((got.float() - ref.float()).norm() / ref.float().norm())
        candidates: list[tuple[str, Callable, str]] = []
        for name, fn in list(impls.items()) + list(compiled.items()):
            base = name.split("+")[0]
            if base == "gather_bmm" and gather_bmm_bytes(T, shape.k, shape.E, shape.H, shape.I) > GATHER_BMM_MAX_BYTES:
                row[f"{name}_host_us"] = row[f"{name}_graph_us"] = None
                continue
            candidates.append((name, fn, "host"))
            if base != "hf_loop":  # the loop's host syncs cannot be captured in a graph
                candidates.append((name, fn, "graph"))
        compute_bound = shape.flops(T) / (bf16_tflops * 1e6) > bytes_ / (read_gbps * 1e3)
        window: list[float] = []
        for name, fn, mode in candidates:
            if progress:
                progress(f"T={T} {name} {mode}")
            beside = compute_bound and name == "moelab" and mode == "graph"
            try:
                if beside:  # the matmul rate of this very minute, just before and just after moelab's samples
                    window.append(hardware.matmul_rate(samples=10)["rate_per_s"] / 1e12)
                m = timing.measure(fn, sets, mode=mode, samples=samples)
                if beside:
                    window.append(hardware.matmul_rate(samples=10)["rate_per_s"] / 1e12)
                row[f"{name}_{mode}_us"] = m.median_us
                row[f"{name}_{mode}_iqr_us"] = m.iqr_us
            except Exception as e:  # a baseline that cannot run at this size is reported, not hidden
                if name.startswith("moelab"):
                    raise
                row[f"{name}_{mode}_us"] = None
                row[f"{name}_{mode}_error"] = f"{type(e).__name__}: {str(e)[:120]}"
        best_base = min((v for k_, v in row.items() if k_.endswith("_us") and v is not None and not k_.startswith("moelab")
                         and k_ not in ("floor_us",) and not k_.endswith("iqr_us")), default=None)
        if window:  # a compute-bound floor divides by the faster of the ceiling's rate and this minute's
            row["window_bf16_tflops"] = window
            row["floor_bf16_tflops"] = rate = max([bf16_tflops, *window])
            row["floor_us"] = floor_us = max(bytes_ / (read_gbps * 1e3), shape.flops(T) / (rate * 1e6))
        ml = row.get("moelab_graph_us")
        row["pct_of_floor"] = 100.0 * floor_us / ml if ml else None
        row["best_baseline_us"] = best_base
        row["speedup_vs_best_baseline"] = best_base / ml if (best_base and ml) else None
        rows.append(row)
        del sets
        torch.cuda.empty_cache()
    return rows
