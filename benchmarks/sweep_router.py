"""Sweep the one-launch router's launch parameters on this GPU (graph-replayed, weights rotated past the L2).

    python benchmarks/sweep_router.py [--model qwen3-30b-a3b] [--tokens 1,8]

Side by side in one process: cuBLAS logits + moelab's `route` (two launches, what the engine ran before), and
`router` (one launch) at each (BLOCK_E, num_warps). The router is latency-bound (0.5 MB at Qwen3-30B-A3B:
0.11 µs of bandwidth): the profile of 2026-12-01 11:54 measured 5.6 µs for the one-launch form against 2.6 µs for
its GEMV part alone (bench-linear), so the last arriver's top-k chain is the suspect. Prediction: fewer warps
shorten that chain (its reductions cross fewer warps) — best at 1-2 warps, ~3.5 µs.
Session 9: the last arriver routes all T tokens at once (one [T, E] tile). Prediction at T=8: ~5 µs, against
~7 for `dense` + `route`, the engine's two launches at T > 1 then (4.5 + 2.7 µs of advance, trace-decode-…T215350).
Measured: 6.0 µs on 4 warps (gpu-session-AL-…T2338); the engine now fuses up to 8 rows, two launches above.
Session 30: `--bitonic` times the routing as one bitonic top-k (`MOELAB_ROUTE_BITONIC` and `MOELAB_ROUTER_BITONIC`,
set together) against the K rounds.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.nn.functional as F

from moelab import ops, timing
from moelab.kernels.router import router
from moelab.ops.linear import dense
from moelab.models.spec import load_spec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen3-30b-a3b")
    ap.add_argument("--tokens", default="1,8")
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--block-h", default="", help="also BLOCK_E=1 at these BLOCK_H (comma-separated) on 4 and 8 warps")
    ap.add_argument("--bitonic", action="store_true",
                    help="instead of the config grid: the default router and `route` with $MOELAB_ROUTE_BITONIC and $MOELAB_ROUTER_BITONIC 0 and 1 "
                         "(K arg-max rounds or one bitonic top-k), twice each, alternating")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("sweep_router needs a CUDA GPU")
    s = load_spec(a.model)
    E, H, k = s.num_experts, s.hidden, s.top_k
    route = ops.get("route", "moelab")
    for T in [int(t) for t in a.tokens.split(",")]:
        n = timing.sets_for_l2(E * H * 2, cap=max(64, 3 * timing.l2_bytes() // (E * H * 2) + 1))
        sets = [(torch.randn(T, H, device="cuda").bfloat16(), (torch.randn(E, H, device="cuda") * H ** -0.5).bfloat16())
                for _ in range(n)]
        ref = ops.get("router", "eager")(*sets[0], k)
        rows = []
        m = timing.measure(lambda x, w: route(F.linear(x, w), k), sets, mode="graph", samples=a.samples)
        rows.append(("cuBLAS + route", m.median_us, m.iqr_us))
        m = timing.measure(lambda x, w: route(dense(x, w), k), sets, mode="graph", samples=a.samples)
        rows.append(("dense + route (the engine above fused_router_max_t)", m.median_us, m.iqr_us))
        if a.bitonic:  # read at launch, so at each capture below
            logits = [(F.linear(x, w).float(),) for x, w in sets]
            for val in ("0", "1", "0", "1"):
                os.environ["MOELAB_ROUTE_BITONIC"] = os.environ["MOELAB_ROUTER_BITONIC"] = val
                got = router(*sets[0], k)
                same = (got[1].sort(1).values == ref[1].sort(1).values).float().mean().item()
                assert same > 0.9, f"router, MOELAB_ROUTE_BITONIC={val}: ids differ from the reference ({same:.0%} agree)"
                m = timing.measure(lambda x, w: router(x, w, k), sets, mode="graph", samples=a.samples)
                rows.append((f"router (default), MOELAB_ROUTE_BITONIC={val}", m.median_us, m.iqr_us))
                m = timing.measure(lambda lg: route(lg, k), logits, mode="graph", samples=a.samples)
                rows.append((f"route alone, MOELAB_ROUTE_BITONIC={val}", m.median_us, m.iqr_us))
                m = timing.measure(lambda x, w: route(dense(x, w), k), sets, mode="graph", samples=a.samples)
                rows.append((f"dense + route, MOELAB_ROUTE_BITONIC={val}", m.median_us, m.iqr_us))
            os.environ.pop("MOELAB_ROUTE_BITONIC"), os.environ.pop("MOELAB_ROUTER_BITONIC")
        cfgs = [] if a.bitonic else [dict(BLOCK_E=be, num_warps=nw) for be in (1, 2, 4, 8) for nw in (1, 2, 4, 8)]
        # Session 10's lead for batch 8: each of the 128 one-expert programs reads x from L2 in H / BLOCK_H serial
        # round trips (BLOCK_H = 1024 at T=8: two); all of H at once is one round trip, predicted −0.5 to −0.8 µs of
        # the 6.1 (the product [8, 1, 2048] is 64 fp32 values per thread on 8 warps, 128 on 4).
        cfgs += [dict(BLOCK_E=1, BLOCK_H=int(bh), num_warps=nw) for bh in a.block_h.split(",") if bh for nw in (4, 8)]
        for cfg in cfgs:
            got = router(*sets[0], k, config=dict(cfg))
            # As tests/kernels/test_router.py: a last-bit difference in the logits may swap two experts at a
            # near-tie, so the chosen sets must agree for nearly every (token, slot), not bit for bit.
            same = (got[1].sort(1).values == ref[1].sort(1).values).float().mean().item()
            assert same > 0.9, f"router {cfg}: ids differ from the reference ({same:.0%} agree)"
            m = timing.measure(lambda x, w, c=cfg: router(x, w, k, config=dict(c)), sets, mode="graph",
                               samples=a.samples)
            rows.append((str(cfg), m.median_us, m.iqr_us))
        print(f"== router {a.model} T={T} (E={E}, H={H}, k={k}; {n} weight sets)")
        for name, us, iqr in sorted(rows, key=lambda r: r[1])[:8 if not a.bitonic else None]:
            print(f"  {us:7.2f} µs ±{iqr:.2f}  {name}")


if __name__ == "__main__":
    main()
