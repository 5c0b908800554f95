"""Does the weight tiles' shape in memory cost bandwidth? A probe, not a kernel of moelab.

    python benchmarks/probe_layout.py [--samples 10]

The census MoE kernel and the tensor-core linear read their weight [rows, K] as [BR, BK] tiles walking K: at
BK = 64 bf16 each tile is BR runs of 128 contiguous bytes, 4 KB apart (Qwen3-30B-A3B's H = 2048). Nsight Compute
(session 10, stage AP) put the census kernel at 81-84 % of the DRAM peak where the read-ceiling kernel, which reads
long contiguous runs, reaches 97 %. This probe reads the same bytes the same way (tl.dot against 16 columns, Triton
pipelining the loads, graph-replayed, 2 × 268 MB buffers so the L2 cannot serve them) from the row-major layout and
from a blocked one, where each [BR, BK] tile is one contiguous run: if the blocked layout is faster, repacking the
weights at load time is worth building. Prints GB/s and % of the measured read ceiling; JSON to $OUT.
"""

from __future__ import annotations

import argparse
import json
import os

import torch
import triton
import triton.language as tl

from moelab import hardware, timing
from moelab.kernels.stream import stream_read


@triton.jit
def _tile_read_kernel(w_ptr, x_ptr, out_ptr, K, BR: tl.constexpr, BK: tl.constexpr, BT: tl.constexpr,
                      PACKED: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs_r = tl.arange(0, BR)
    offs_k = tl.arange(0, BK)
    offs_t = tl.arange(0, BT)
    acc = tl.zeros((BR, BT), dtype=tl.float32)
    n_kb = K // BK
    for k0 in range(0, K, BK):
        if PACKED:  # tile (pid, k0 // BK) is BR·BK contiguous elements
            ptrs = w_ptr + (pid * n_kb + k0 // BK) * (BR * BK) + offs_r[:, None] * BK + offs_k[None, :]
        else:  # row-major [R, K]
            ptrs = w_ptr + (pid * BR + offs_r)[:, None] * K + (k0 + offs_k)[None, :]
        w = tl.load(ptrs, eviction_policy="evict_first")
        xt = tl.load(x_ptr + offs_t[None, :] * K + (k0 + offs_k)[:, None])
        acc = tl.dot(w, xt, acc)
    tl.store(out_ptr + (pid * BR + offs_r)[:, None] * BT + offs_t[None, :], acc)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=10)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("probe_layout.py: needs a CUDA GPU")
    ceil = hardware.ceilings()
    R, K = 65536, 2048
    bufs = [torch.randn(R, K, device="cuda").to(torch.bfloat16) for _ in range(2)]
    x = torch.randn(16, K, device="cuda").to(torch.bfloat16)
    nbytes = R * K * 2
    rows = []
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    m = timing.measure(lambda b: stream_read(b, block=16384, num_warps=8, grid=4 * sms), [(b,) for b in bufs],
                       mode="graph", samples=a.samples)
    rows.append(dict(cfg="stream_read (moelab hw's best)", us=m.median_us, iqr=m.iqr_us))
    for br, bk, nw, ns in [(32, 64, 2, 4), (64, 64, 4, 4), (32, 128, 2, 4), (32, 256, 2, 3), (16, 256, 2, 4),
                           (64, 128, 4, 3), (16, 512, 2, 3)]:
        for packed in (False, True):
            out = torch.empty(R, 16, device="cuda")

            def f(b, br=br, bk=bk, nw=nw, ns=ns, packed=packed, out=out):
                _tile_read_kernel[(R // br,)](b, x, out, K, BR=br, BK=bk, BT=16, PACKED=packed,
                                              num_warps=nw, num_stages=ns)
            m = timing.measure(f, [(b,) for b in bufs], mode="graph", samples=a.samples)
            rows.append(dict(cfg=f"{'blocked' if packed else 'row-major'} tiles {br}x{bk}, {nw} warps, {ns} stages",
                             us=m.median_us, iqr=m.iqr_us))
    print(f"{nbytes / 1e6:.0f} MB per call; read ceiling {ceil.read_gbps:.0f} GB/s")
    for r in rows:
        r["gbps"] = nbytes / (r["us"] * 1e3)
        r["pct_ceiling"] = 100 * r["gbps"] / ceil.read_gbps
        print(f"  {r['us']:8.1f} us ±{r['iqr']:.1f}  {r['gbps']:6.0f} GB/s  {r['pct_ceiling']:5.1f} %  {r['cfg']}")
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "probe_layout.json"), "w") as fh:
            json.dump(dict(env=timing.env_record(), read_gbps=ceil.read_gbps, bytes=nbytes, rows=rows), fh, indent=1)


if __name__ == "__main__":
    main()
