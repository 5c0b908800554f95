"""Why does a CUDA graph of ONE MoE layer time slower per call than a graph of eight? (session 13's open question)

    python benchmarks/probe_graph_calls.py [--tokens 8,32] [--samples 15]

`moelab bench moe` read T=32 at 309 µs with one call per graph and 271 with eight (stage BM), while the torch
profiler saw the same kernels run as fast in both (258 and 264 µs, 2.6 µs idle between replays: stage BO). Here,
Qwen3-30B-A3B shapes, routing included, per call, side by side in one process:
  * `timing.measure` of a graph of 1, 2 and 8 calls (the bench's timer);
  * a graph of 1 call replayed once per sample, synchronised, bracketed by events (no back-to-back replays);
  * the 1-call graph replayed back to back under the profiler's clock only (CUDA events, profiler active).
"""

from __future__ import annotations

import argparse
import statistics

import torch

from moelab import ops, timing
from moelab.kernels.moe import fused_moe


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", default="8,32")
    ap.add_argument("--samples", type=int, default=15)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("probe_graph_calls needs a CUDA GPU")
    E, H, I, k = 128, 2048, 768, 8
    layers = [((torch.randn(E, 2 * I, H, device="cuda") * H ** -0.5).bfloat16(),
               (torch.randn(E, H, I, device="cuda") * I ** -0.5).bfloat16()) for _ in range(4)]
    route = ops.get("route", "moelab")

    def layer(x, w13, w2, lg):
        w, ids = route(lg, k)
        return fused_moe(x, w13, w2, w, ids)

    for T in [int(t) for t in a.tokens.split(",")]:
        sets = [(torch.randn(T, H, device="cuda").bfloat16(), *layers[i % 4], torch.randn(T, E, device="cuda"))
                for i in range(8)]
        print(f"T={T}, µs per call (median of {a.samples}):")
        for n in (1, 2, 8):
            m = timing.measure(layer, sets[:n], samples=a.samples)
            print(f"  timing.measure, {n} call(s) per graph: {m.median_us:8.1f} ±{m.iqr_us:.1f} "
                  f"({m.to_dict().get('calls_per_sample')} calls per sample)")
        g = torch.cuda.CUDAGraph()
        for _ in range(2):
            layer(*sets[0])
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            layer(*sets[0])
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        one = []
        for _ in range(a.samples):
            torch.cuda.synchronize()
            start.record()
            g.replay()
            end.record()
            torch.cuda.synchronize()
            one.append(start.elapsed_time(end) * 1e3)
        print(f"  1-call graph, one replay per sample, synchronised: {statistics.median(one):8.1f}")
        for reps in (4, 16):
            times = []
            for _ in range(a.samples):
                torch.cuda.synchronize()
                start.record()
                for _ in range(reps):
                    g.replay()
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end) * 1e3 / reps)
            print(f"  1-call graph, {reps} replays back to back: {statistics.median(times):8.1f}")
        from torch.profiler import ProfilerActivity, profile
        times = []
        with profile(activities=[ProfilerActivity.CUDA]):
            for _ in range(a.samples):
                torch.cuda.synchronize()
                start.record()
                for _ in range(16):
                    g.replay()
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end) * 1e3 / 16)
        print(f"  1-call graph, 16 replays back to back, profiler on: {statistics.median(times):8.1f}")


if __name__ == "__main__":
    main()
