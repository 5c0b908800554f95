"""Launch each of batch 1's and batch 8's heavy decode kernels a few times, eagerly, for Nsight Compute to read.

    ncu --clock-control none -k regex:'_moe|_linear|_split|_stream' --section SpeedOfLight ... \
        python benchmarks/ncu_kernels.py [--only census8,pairs1,qkv8,o8,attn8,router8,read,grouped256,grouped4096,
                                              attn8x16k,attn64k]

Qwen3-30B-A3B shapes, bf16, random weights: the census MoE kernel at T=8, the pair kernel at T=1, the tensor-core
linear at T=8 (qkv 5120×2048, o 2048×4096), decode attention at batch 8 with 1k context (GQA 32/4 × 128; and at the
long-context targets, batch 8 × 16k and 1 × 64k), the
one-launch router at T=8, the grouped (prefill) path at T=256 and 4096 (once with N_FASTEST, Y_LOWP and TMA off,
once with the defaults, which have them on: the kernels of each run in that order), and the read-ceiling kernel of
`moelab hw` (what the hardware counters say a pure stream reaches, to read the others by).
Nothing is timed here: the counters are the output. Each kernel runs RUNS times on fresh inputs.
"""

from __future__ import annotations

import argparse

import torch

from moelab import ops
from moelab.kernels.attention import decode_attention
from moelab.kernels.linear import linear
from moelab.kernels.moe_decode import moe_decode
from moelab.kernels.moe_grouped import moe_grouped
from moelab.kernels.moe_pairs import moe_pairs
from moelab.kernels.router import router
from moelab.kernels.stream import stream_read

RUNS = 3
E, H, I, K = 128, 2048, 768, 8


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only",
                    default="census8,pairs1,qkv8,o8,attn8,router8,read,grouped256,grouped4096,attn8x16k,attn64k")
    a = ap.parse_args()
    unknown = set(a.only.split(",")) - set(ap.get_default("only").split(","))
    if unknown:
        ap.error(f"--only: unknown kernel {sorted(unknown)[0]!r}; one of {ap.get_default('only')}")
    if not torch.cuda.is_available():
        raise SystemExit("ncu_kernels.py: needs a CUDA GPU (it launches kernels for Nsight Compute to read)")
    dev, dt = "cuda", torch.bfloat16
    want = set(a.only.split(","))
    w13 = (torch.randn(E, 2 * I, H, device=dev) * H ** -0.5).to(dt)
    w2 = (torch.randn(E, H, I, device=dev) * I ** -0.5).to(dt)
    for name, T, run in (("census8", 8, moe_decode), ("pairs1", 1, moe_pairs)):
        if name not in want:
            continue
        for _ in range(RUNS):
            tw, ids = ops.get("route", "eager")(torch.randn(T, E, device=dev), K)
            x = torch.randn(T, H, device=dev).to(dt)
            run(x, w13, w2, tw, ids, None, out=torch.empty_like(x))
    for name, N, Kd in (("qkv8", 5120, 2048), ("o8", 2048, 4096)):
        if name in want:
            w = (torch.randn(N, Kd, device=dev) * Kd ** -0.5).to(dt)
            for _ in range(RUNS):
                linear(torch.randn(8, Kd, device=dev).to(dt), w)
    # Batch 8 at 1k, and the long-context lines of issue 4
    for name, b, s in (("attn8", 8, 1024), ("attn8x16k", 8, 16384), ("attn64k", 1, 65536)):
        if name in want:
            kc = torch.randn(b, 4, s, 128, device=dev).to(dt)
            vc = torch.randn_like(kc)
            lens = torch.full((b,), s, dtype=torch.int32, device=dev)
            for _ in range(RUNS):
                decode_attention(torch.randn(b, 32, 128, device=dev).to(dt), kc, vc, lens)
    if "router8" in want:
        wr = (torch.randn(E, H, device=dev) * H ** -0.5).to(dt)
        for _ in range(RUNS):
            router(torch.randn(8, H, device=dev).to(dt), wr, K)
    for name, T in (("grouped256", 256), ("grouped4096", 4096)):
        if name in want:
            tw, ids = ops.get("route", "eager")(torch.randn(T, E, device=dev), K)
            x = torch.randn(T, H, device=dev).to(dt)
            for cfg in (dict(N_FASTEST=False, Y_LOWP=False, TMA=False), {}):  # the options off, then the defaults
                moe_grouped(x, w13, w2, tw, ids, out=torch.empty_like(x), config=cfg)
    if "read" in want:
        # `moelab hw`'s best on the H200 (hw-…T215629: 16384 words, 8 warps, 4 programs per SM), over 4 GiB
        sms = torch.cuda.get_device_properties(dev).multi_processor_count
        buf = torch.empty(1 << 30, dtype=torch.int32, device=dev)
        for _ in range(RUNS):
            stream_read(buf, block=16384, num_warps=8, grid=4 * sms)
    torch.cuda.synchronize()
    print("ncu_kernels.py: launched", ",".join(sorted(want)))


if __name__ == "__main__":
    main()
