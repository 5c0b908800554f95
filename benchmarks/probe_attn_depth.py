"""Bytes in flight per SM in the attention split kernel: 64-key tiles with deeper pipelines against the shipped
128-key tiles on 3 stages, at the long-context shapes.

    python benchmarks/probe_attn_depth.py [--shapes 8x16384,1x65536] [--stages 3,4,5,6,7] [--samples 25]

Why: Nsight Compute (stage CQ, ncu-…CQ log) puts the split kernel at B=8 × 16k at 84-86 % of DRAM peak with one
4-warp program per SM and ~128 KB of K/V requested ahead per SM (2 of 3 stages of 64 KB), where the read-ceiling
kernel reaches 97 % with 4 programs of 8 warps per SM and ~256 KB in flight. A 64-key tile is 32 KB of K + V, so
S stages keep (S - 1) × 32 KB ahead: 7 stages 192 KB, in 224 KB of shared memory. The split count stays the
shipped one (one program per SM). Graph-replayed, L2 defeated by rotating caches, two passes (the second reversed);
each config checked against the reference once. Saved as `probe-attn-depth-*.json`.
"""

from __future__ import annotations

import argparse

import torch

from moelab import hardware, ops, timing
from moelab.kernels import attention as attn

HQ, HK, D = 32, 4, 128


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="8x16384,1x65536")
    ap.add_argument("--stages", default="3,4,5,6,7", help="num_stages of the 64-key tiles")
    ap.add_argument("--samples", type=int, default=25)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("probe_attn_depth: needs a CUDA GPU")
    gbps = hardware.ceilings().read_gbps
    dt, dev = torch.bfloat16, "cuda"
    ref_fn = ops.get("decode_attention", "eager")
    rows = []
    for shape in a.shapes.split(","):
        b, s = (int(x) for x in shape.split("x"))
        kv_bytes = 2 * b * HK * s * D * 2
        floor = kv_bytes / (gbps * 1e3)
        sets = [(torch.randn(b, HQ, D, device=dev).to(dt), torch.randn(b, HK, s, D, device=dev).to(dt),
                 torch.randn(b, HK, s, D, device=dev).to(dt), torch.full((b,), s, device=dev, dtype=torch.int32))
                for _ in range(timing.sets_for_l2(kv_bytes))]
        bn0, splits = attn.launch_params(b, HK, s, D, attn.sm_count(torch.device(dev)))
        ref = ref_fn(*sets[0])
        cfgs = [(bn0, 3)] + [(64, int(st)) for st in a.stages.split(",") if st]
        fns = {}
        for bn, st in cfgs:
            def f(q, k, v, lens, bn=bn, st=st):
                return attn.decode_attention(q, k, v, lens, num_splits=splits, block_n=bn, num_stages=st)
            try:
                err = float((f(*sets[0]).float() - ref.float()).norm() / ref.float().norm())
            except Exception as e:  # a depth that does not fit in shared memory: say so, keep going
                print(f"{shape} BLOCK_N={bn} stages={st}: not run ({str(e).splitlines()[0][:100]})")
                continue
            if not err <= 2e-2:
                raise SystemExit(f"probe_attn_depth: BLOCK_N={bn} stages={st} off by {err:.3g} at {shape}")
            fns[(bn, st)] = f
        times: dict = {c: [] for c in fns}
        for order in (list(fns), list(fns)[::-1]):
            for c in order:
                times[c].append(timing.measure(fns[c], sets, mode="graph", samples=a.samples).median_us)
        for (bn, st), ts in times.items():
            us = sum(ts) / len(ts)
            rows.append(dict(B=b, ctx=s, num_splits=splits, block_n=bn, num_stages=st, median_us=us, passes_us=ts,
                             pct_floor=100 * floor / us, ahead_kb=(st - 1) * bn * D * 2 * 2 // 1024,
                             shipped=(bn, st) == (bn0, 3)))
            print(f"{shape:9s} BLOCK_N={bn:3d} stages={st}  ahead {(st - 1) * bn * D * 4 // 1024:3d} KB  "
                  f"{us:7.2f} us ({'/'.join(f'{t:.2f}' for t in ts)})  {100 * floor / us:5.1f} % of floor")
    print("saved", timing.save_result("probe-attn-depth", {"read_gbps": gbps, "rows": rows}))


if __name__ == "__main__":
    main()
