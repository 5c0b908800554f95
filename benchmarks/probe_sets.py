"""Does the number of argument sets in one captured graph change a kernel's per-call time?

    python benchmarks/probe_sets.py [--tokens 8,32,64,256] [--sets 1,2,8]

`moelab bench moe` sizes its rotation by `timing.sets_for_l2`: at T ≥ 8 one set of Qwen3-30B-A3B weights already
exceeds 3× the L2, so its graph holds one call, while `sweep_moe.py --grouped` captures two and read T=32 ~35 µs
faster (session 11, stages AY and BB). Here the same route + fused_moe call, on four weight copies, is timed with
graphs of 1, 2 and 8 calls. Prints µs per call for each.
"""

from __future__ import annotations

import argparse

import torch

from moelab import timing
from moelab.kernels.moe import fused_moe
from moelab.kernels.route import route

E, H, I, K = 128, 2048, 768, 8


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="8,32,64,256")
    ap.add_argument("--sets", default="1,2,8")
    ap.add_argument("--samples", type=int, default=10)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("probe_sets.py: needs a CUDA GPU")
    dev, dt = "cuda", torch.bfloat16
    copies = [((torch.randn(E, 2 * I, H, device=dev) * H ** -0.5).to(dt),
               (torch.randn(E, H, I, device=dev) * I ** -0.5).to(dt)) for _ in range(4)]
    counts = [int(s) for s in a.sets.split(",")]
    print("T   " + "  ".join(f"{n} set(s)" for n in counts) + "   (µs per call, graph-replayed)")
    for T in [int(t) for t in a.tokens.split(",")]:
        sets = [(torch.randn(T, H, device=dev).to(dt), *copies[i % 4], torch.randn(T, E, device=dev))
                for i in range(max(counts))]

        def f(x, w13, w2, lg):
            return fused_moe(x, w13, w2, *route(lg, K))

        # Interleaved: every set count once, then again in reverse (the drift seen in one-pass sweeps cancels).
        got = {n: [] for n in counts}
        for order in (counts, counts[::-1]):
            for n in order:
                got[n].append(timing.measure(f, sets[:n], mode="graph", samples=a.samples).median_us)
        print(f"{T:<4}" + "  ".join(f"{sum(v) / len(v):8.1f}" for v in got.values()))


if __name__ == "__main__":
    main()
