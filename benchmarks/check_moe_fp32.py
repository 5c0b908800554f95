"""Test the fence hypothesis for the pair kernel's fp32 bug on a GPU (docs/worklog.md), and price the fence.

    python benchmarks/check_moe_fp32.py

1. The shapes that failed on the H200 (session 2), fp32, 10 seeds each, the pair kernel with FENCE off and on:
   worst relative error against the fp32 reference (a pass is ≤ 1e-5; the bug gave ~1).
2. Qwen3-30B-A3B, T=1, bf16, routing counted in, graph-replayed with weights rotated past the L2: the
   pair kernel with FENCE off and on, side by side (what a fence in every thread costs).
If (1) is clean with the fence and dirty without, lift the fp32 guard in kernels/moe.py and turn FENCE on.
"""

from __future__ import annotations

import torch

from moelab import ops, timing
from moelab.kernels.moe_pairs import moe_pairs

FAILED = [(1, 8, 64, 32, 2, 0), (3, 16, 96, 48, 4, 0), (16, 8, 64, 32, 8, 0), (4, 8, 64, 32, 2, 48)]  # T, E, H, I, k, shared I


def case(T, E, H, I, k, SI, seed, dt):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(T, H, device="cuda", generator=g).to(dt)
    w13 = (torch.randn(E, 2 * I, H, device="cuda", generator=g) * H ** -0.5).to(dt)
    w2 = (torch.randn(E, H, I, device="cuda", generator=g) * I ** -0.5).to(dt)
    w, ids = ops.get("route", "eager")(torch.randn(T, E, device="cuda", generator=g), k)
    sh = None
    if SI:
        sh = ((torch.randn(2 * SI, H, device="cuda", generator=g) * H ** -0.5).to(dt),
              (torch.randn(H, SI, device="cuda", generator=g) * SI ** -0.5).to(dt),
              (torch.randn(1, H, device="cuda", generator=g) * H ** -0.5).to(dt))
    return x, w13, w2, w, ids, sh


def main() -> None:
    print("== fp32 correctness, pair kernel, worst rel err over 10 seeds")
    for shape in FAILED:
        errs = {}
        for fence in (False, True):
            worst = 0.0
            for seed in range(10):
                x, w13, w2, w, ids, sh = case(*shape, seed, torch.float32)
                out = moe_pairs(x, w13, w2, w, ids, sh, out=torch.full_like(x, float("nan")), config=dict(FENCE=fence))
                ref = ops.get("fused_moe", "eager")(x, w13, w2, w, ids, sh)
                worst = max(worst, float((out.double() - ref.double()).norm() / ref.double().norm()))
            errs[fence] = worst
        print(f"  T,E,H,I,k,shared={shape}: FENCE off {errs[False]:.2e}   FENCE on {errs[True]:.2e}")

    print("== cost, Qwen3-30B-A3B T=1 bf16, routing included, graph-replayed")
    E, H, I, k = 128, 2048, 768, 8
    n = timing.sets_for_l2(k * 3 * H * I * 2)
    layers = [((torch.randn(E, 2 * I, H, device="cuda") * H ** -0.5).bfloat16(),
               (torch.randn(E, H, I, device="cuda") * I ** -0.5).bfloat16()) for _ in range(3)]
    sets = [(torch.randn(1, H, device="cuda").bfloat16(), *layers[i % 3], torch.randn(1, E, device="cuda"))
            for i in range(n)]
    route = ops.get("route", "moelab")
    res = {}
    for fence in (False, True, False, True):  # interleaved, twice
        def f(x, w13, w2, lg, fence=fence):
            w, ids = route(lg, k)
            return moe_pairs(x, w13, w2, w, ids, out=torch.empty_like(x), config=dict(FENCE=fence))
        m = timing.measure(f, sets, mode="graph", samples=15, warmup=2)
        res.setdefault(fence, []).append(m.median_us)
    for fence, us in res.items():
        print(f"  FENCE {'on ' if fence else 'off'}: median µs per call {', '.join(f'{u:.2f}' for u in us)}")


if __name__ == "__main__":
    main()
