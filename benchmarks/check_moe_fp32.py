"""Test the acquire fix for the decode MoE kernels' two open GPU bugs (docs/worklog.md, session 3).

    python benchmarks/check_moe_fp32.py

Hypothesis: Triton 3.6 deleted the acquire after each phase-2 wait (an atomic whose result was unused), so
the activation loads that followed were ordered only by a relaxed spin; `_wait_geq` now returns a bound the
guarded loads use. If that was the cause, both bugs are gone with no other change:
1. the pair kernel in fp32 at the shapes that failed on the H200 (session 2), 10 seeds each: worst relative
   error against the fp32 reference (a pass is ≤ 1e-5; the bug gave ~1);
2. 8-warp programs (refused since session 1 because results moved between runs), bf16, 20 cases × 2 runs at
   Qwen3-30B-A3B and the tp=4 shard: worst error and run-to-run difference (a pass: bitwise equal runs).
3. the cost of the fix: Qwen3-30B-A3B T=1 bf16, routing included, graph-replayed (compare with the
   session-2 record, 30.4 µs).
"""

from __future__ import annotations

import torch

from moelab import kernels, ops, timing
from moelab.kernels import moe_decode as md
from moelab.kernels.moe_decode import moe_decode
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


def rel(a, b) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def main() -> None:
    print("== 1. fp32, pair kernel, worst rel err over 10 seeds (pass ≤ 1e-5)")
    for shape in FAILED:
        worst = 0.0
        for seed in range(10):
            x, w13, w2, w, ids, sh = case(*shape, seed, torch.float32)
            out = moe_pairs(x, w13, w2, w, ids, sh, out=torch.full_like(x, float("nan")))
            worst = max(worst, rel(out, ops.get("fused_moe", "eager")(x, w13, w2, w, ids, sh)))
        print(f"  T,E,H,I,k,shared={shape}: {worst:.2e} {'PASS' if worst <= 1e-5 else 'FAIL'}")

    print("== 2. 8-warp programs, bf16, 20 cases x 2 runs (pass: bitwise-equal runs, err ≤ 2e-2)")
    md.MAX_WARPS = 8  # lifted for this experiment only
    kernels = {
        "pairs": (moe_pairs, [dict(BLOCK_I=16, BLOCK_K=512, BLOCK_H=32, BLOCK_K2=256, num_warps=8),
                              dict(BLOCK_I=8, BLOCK_K=1024, BLOCK_H=64, BLOCK_K2=256, num_warps=8)]),
        "decode": (moe_decode, [dict(BLOCK_T=1, BLOCK_I=16, BLOCK_K=512, BLOCK_H=32, BLOCK_K2=512, num_warps=8),
                                dict(BLOCK_T=16, BLOCK_I=32, BLOCK_K=64, BLOCK_H=32, BLOCK_K2=64, num_warps=8)]),
    }
    g = torch.Generator(device="cuda").manual_seed(0)
    for name, (E, H, I, k) in {"qwen3": (128, 2048, 768, 8), "shard": (256, 2048, 128, 8)}.items():
        w13 = (torch.randn(E, 2 * I, H, device="cuda", generator=g) * H ** -0.5).bfloat16()
        w2 = (torch.randn(E, H, I, device="cuda", generator=g) * I ** -0.5).bfloat16()
        for T in (1, 4):
            cases = []
            for _ in range(20):
                x = torch.randn(T, H, device="cuda", generator=g).bfloat16()
                w, ids = ops.get("route", "eager")(torch.randn(T, E, device="cuda", generator=g), k)
                cases.append((x, w, ids, ops.get("fused_moe", "eager")(x, w13, w2, w, ids).float()))
            for kname, (fn, cfgs) in kernels.items():
                for cfg in cfgs:
                    if kname == "decode" and (cfg["BLOCK_T"] == 1) != (T == 1):
                        continue
                    worst, moving = 0.0, 0.0
                    try:
                        for x, w, ids, ref in cases:
                            kw = {"shared": None}
                            a = fn(x, w13, w2, w, ids, **kw, out=torch.full_like(x, float("nan")), config=dict(cfg))
                            b = fn(x, w13, w2, w, ids, **kw, out=torch.full_like(x, float("nan")), config=dict(cfg))
                            worst = max(worst, rel(a.float(), ref))
                            moving = max(moving, float((a.float() - b.float()).abs().max()))
                    except Exception as e:  # a config that does not compile is said, not fatal
                        print(f"  {name} T={T} {kname} {cfg}: {type(e).__name__}: {str(e)[:100]}")
                        continue
                    torch.cuda.synchronize()
                    left = sum(int(c.abs().sum()) for c in kernels._COUNTERS.values())
                    ok = moving == 0 and worst <= 2e-2 and left == 0
                    print(f"  {name} T={T} {kname:6s} {cfg}: err {worst:.2e}, run-to-run {moving:.1e}, "
                          f"counters left {left} {'PASS' if ok else 'FAIL'}")
    md.MAX_WARPS = 4

    print("== 3. cost: Qwen3-30B-A3B T=1 bf16, route + pair kernel, graph-replayed")
    E, H, I, k = 128, 2048, 768, 8
    n = timing.sets_for_l2(k * 3 * H * I * 2)
    layers = [((torch.randn(E, 2 * I, H, device="cuda") * H ** -0.5).bfloat16(),
               (torch.randn(E, H, I, device="cuda") * I ** -0.5).bfloat16()) for _ in range(3)]
    sets = [(torch.randn(1, H, device="cuda").bfloat16(), *layers[i % 3], torch.randn(1, E, device="cuda"))
            for i in range(n)]
    route = ops.get("route", "moelab")

    def f(x, w13, w2, lg):
        w, ids = route(lg, k)
        return moe_pairs(x, w13, w2, w, ids, out=torch.empty_like(x))
    us = [timing.measure(f, sets, mode="graph", samples=15, warmup=2).median_us for _ in range(2)]
    print(f"  median µs per call, twice: {us[0]:.2f}, {us[1]:.2f}")


if __name__ == "__main__":
    main()
