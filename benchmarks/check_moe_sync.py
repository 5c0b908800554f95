"""Stress the decode MoE kernels' cross-program synchronisation on a GPU: many calls, many configs.

    python benchmarks/check_moe_sync.py

A race shows as an error that moves between calls on the same inputs, or as counters left non-zero
after a call. Prints the worst relative error per (shape, path, config) and the counters' state.
The first run (2026-12-01, results/sync-check-nvidia-h200-20261201.log) found results moving between runs
with 8-warp programs (BLOCK_I=16) on every shape, and none with 2 or 4 warps. The cause was found in session 3:
Triton 3.6 deleted the acquire after each phase-2 wait (its result was unused); with the fix, 8-warp programs
are stable (results/acquire-check-nvidia-h200-20261201T1112.log).
"""

from __future__ import annotations

import torch

from moelab import kernels, ops
from moelab.kernels import moe_decode as md
from moelab.kernels.moe_decode import moe_decode
from moelab.kernels.moe_pairs import moe_pairs

SHAPES = {"qwen3": (128, 2048, 768, 8, 0), "shard": (256, 2048, 128, 8, 0), "qwen35": (256, 2048, 512, 8, 512)}
CONFIGS = {
    "pairs": [dict(BLOCK_I=8, BLOCK_K=512, BLOCK_H=32, BLOCK_K2=256, num_warps=4),
              dict(BLOCK_I=4, BLOCK_K=512, BLOCK_H=16, BLOCK_K2=512, num_warps=2)],
    "decode": [dict(BLOCK_T=1, BLOCK_I=8, BLOCK_K=512, BLOCK_H=16, BLOCK_K2=512, num_warps=4)],
}


def main() -> None:
    dev, dt = "cuda", torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(0)
    for name, (E, H, I, k, SI) in SHAPES.items():
        w13 = (torch.randn(E, 2 * I, H, device=dev, generator=g) * H ** -0.5).to(dt)
        w2 = (torch.randn(E, H, I, device=dev, generator=g) * I ** -0.5).to(dt)
        sh = None
        if SI:
            sh = ((torch.randn(2 * SI, H, device=dev, generator=g) * H ** -0.5).to(dt),
                  (torch.randn(H, SI, device=dev, generator=g) * SI ** -0.5).to(dt),
                  (torch.randn(1, H, device=dev, generator=g) * H ** -0.5).to(dt))
        for T in (1, 2):
            cases = []
            for _ in range(20):
                x = torch.randn(T, H, device=dev, generator=g).to(dt)
                w, ids = ops.get("route", "eager")(torch.randn(T, E, device=dev, generator=g), k)
                cases.append((x, w, ids, ops.get("fused_moe", "eager")(x, w13, w2, w, ids, sh).float()))
            for path, cfgs in CONFIGS.items():
                for cfg in cfgs:
                    worst, moving = 0.0, 0.0
                    for x, w, ids, ref in cases:
                        run = {"pairs": moe_pairs, "decode": moe_decode}[path]
                        a = run(x, w13, w2, w, ids, sh, out=torch.full_like(x, float("nan")), config=cfg)
                        b = run(x, w13, w2, w, ids, sh, out=torch.full_like(x, float("nan")), config=cfg)
                        worst = max(worst, float((a.float() - ref).norm() / ref.norm()))
                        moving = max(moving, float((a.float() - b.float()).abs().max()))
                    torch.cuda.synchronize()
                    left = sum(int(c.abs().sum()) for c in kernels._COUNTERS.values())
                    print(f"{name:7s} T={T} {path:6s} {cfg}: worst rel err {worst:.2e}, run-to-run max diff {moving:.2e}, "
                          f"counters left {left}")


if __name__ == "__main__":
    main()
