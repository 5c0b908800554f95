"""Where one MoE layer's time goes, kernel by kernel, at each T (torch profiler / CUPTI over graph replays).

    python benchmarks/trace_moe.py [--tokens 64,256,4096] [--calls 8] [--shape shard]

`moelab bench moe` gives one number per T; this splits it. Qwen3-30B-A3B shapes (or the tp=4 shard's), bf16,
routing included (the route kernel, then `fused_moe` on its default path), weights rotating over enough layer
copies that L2 cannot serve them, fresh routing per call: the bench's setup. A graph of `calls` layers is replayed
under the profiler (at least 24 calls in all; the gap between two replays belongs to the call after it); per kernel,
as `trace_decode.py` reports them, its own duration and its advance (its end minus the latest end before it: the
advances of one call sum to its span, launch gaps included), per call.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import torch

from moelab import hardware, ops, report, timing
from moelab.kernels.moe import fused_moe

from trace_decode import kernel_events, short

# (E, H, I, k): Qwen3-30B-A3B, and the first worklog's tp=4 shard of Qwen3.5-35B-A3B (issue 3's line)
MOE_SHAPES = {"qwen3-30b-a3b": (128, 2048, 768, 8), "shard": (256, 2048, 128, 8)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", default="64,256,4096")
    ap.add_argument("--shape", default="qwen3-30b-a3b", choices=sorted(MOE_SHAPES),
                    help="Qwen3-30B-A3B's MoE, or the tp=4 shard of Qwen3.5-35B-A3B's (E=256, I=128; no shared expert)")
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("--no-save", action="store_true")
    a = ap.parse_args()
    if a.calls < 1:
        raise SystemExit(f"trace_moe: --calls must be >= 1, not {a.calls}")
    if not torch.cuda.is_available():
        raise SystemExit("trace_moe needs a CUDA GPU")
    E, H, I, k = MOE_SHAPES[a.shape]
    ceil = hardware.ceilings()
    layers = [((torch.randn(E, 2 * I, H, device="cuda") * H ** -0.5).bfloat16(),
               (torch.randn(E, H, I, device="cuda") * I ** -0.5).bfloat16()) for _ in range(3)]
    route = ops.get("route", "moelab")
    results = []
    for T in [int(t) for t in a.tokens.split(",")]:
        sets = [(torch.randn(T, H, device="cuda").bfloat16(), *layers[i % 3], torch.randn(T, E, device="cuda"))
                for i in range(a.calls)]

        def layer(x, w13, w2, lg):
            w, ids = route(lg, k)
            return fused_moe(x, w13, w2, w, ids)

        for st in sets:
            layer(*st)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for st in sets:
                layer(*st)
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
        from torch.profiler import ProfilerActivity, profile

        replays = max(3, -(-24 // a.calls))  # at least 24 calls traced
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(replays):
                g.replay()
            torch.cuda.synchronize()
        ev = kernel_events(prof)
        n_all = replays * a.calls
        per = len(ev) // n_all
        if per * n_all != len(ev):
            raise SystemExit(f"T={T}: {len(ev)} kernels do not split into {n_all} equal calls")
        # The first replay may be cold; each call counts from the end of the one before (across replays too, so the
        # GPU's idle time between two graph launches is the next call's).
        calls = [ev[i * per:(i + 1) * per] for i in range(a.calls, n_all)]
        rows: dict[str, dict] = defaultdict(lambda: {"dur": 0.0, "advance": 0.0})
        spans = []
        prev_end = max(e for _, _, e in ev[(a.calls - 1) * per:a.calls * per])
        for c in calls:
            start = prev_end
            latest = start
            for name, s, e in c:
                r = rows[short(name)]
                r["dur"] += e - s
                r["advance"] += max(0.0, e - latest)
                latest = max(latest, e)
            spans.append(latest - start)
            prev_end = latest
        n = len(calls)
        span = sum(spans) / n
        flops = 2 * T * k * 3 * H * I
        table = [{"kernel": name, "dur_us": r["dur"] / n, "advance_us": r["advance"] / n,
                  "share_pct": 100 * r["advance"] / n / span} for name, r in rows.items()]
        report.table(table, ["kernel", "dur_us", "advance_us", "share_pct"],
                     title=f"MoE layer trace, {a.shape}, T={T}: {span:.1f} µs per layer "
                           f"({flops / span / 1e6:.0f} TFLOP/s, {per} kernels)")
        results.append(dict(T=T, span_us=span, kernels_per_call=per, rows=table, tflops=flops / span / 1e6))
    if not a.no_save:
        path = timing.save_result("trace-moe", {"shape": a.shape, "calls_per_graph": a.calls,
                                                "read_gbps": ceil.read_gbps,
                                                "bf16_tflops": ceil.bf16_tflops, "results": results})
        print(f"saved {path}")


if __name__ == "__main__":
    main()
