"""Append one decode token's K and V to the static cache: one launch for both (Triton).

The plain-torch way, `k_cache[rows, :, positions] = k` and the same for v, is two advanced-indexing writes
(index_put), each its own launch of a general scatter kernel: on the H200 the profiler's attention unit
(cache write + decode attention, Qwen3-30B-A3B, B=1, 1k context) took 17.3 µs graph-replayed against 6.8 µs
for the attention kernels alone (2026-12-01, benchmarks/results/profile-qwen3-30b-a3b-*.json), so the two
writes cost about 10 µs per layer — 0.5 ms of a 3.6 ms decode step.

Napkin math: bytes = 2 · B·Hk·D·elem read + the same written (Qwen3-30B-A3B B=1: 2 KB) — nothing; the
kernel is one launch of latency. Grid (B, Hk): each program copies one head's D values of k and of v into
row positions[b] of its sequence. A position outside [0, S_max) writes nothing (the engine sizes the cache
so that cannot happen, and checking on the host would need a sync).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _kv_write_kernel(
    k_ptr, v_ptr, kc_ptr, vc_ptr, pos_ptr,  # k/v [B, Hk, D] in; caches [B, Hk, S_max, D]; positions [B]
    S_MAX, D,
    skb, skh, skd, svb, svh, svd,  # strides of k and v (elements)
    scb, sch, scs, scd, sdb, sdh, sds, sdd,  # strides of k_cache and v_cache
    BLOCK_D: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    pos = tl.load(pos_ptr + b).to(tl.int64)
    offs = tl.arange(0, BLOCK_D)
    ok = (pos >= 0) & (pos < S_MAX)
    pos = tl.where(ok, pos, 0)
    m = offs < tl.where(ok, D, 0)  # a bound, not a scalar mask: the interpreter mishandles scalar & vector masks
    kv = tl.load(k_ptr + b * skb + h * skh + offs * skd, mask=m)
    vv = tl.load(v_ptr + b * svb + h * svh + offs * svd, mask=m)
    tl.store(kc_ptr + b * scb + h * sch + pos * scs + offs * scd, kv, mask=m)
    tl.store(vc_ptr + b * sdb + h * sdh + pos * sds + offs * sdd, vv, mask=m)


def kv_write(k_cache: torch.Tensor, v_cache: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
             positions: torch.Tensor) -> None:
    """Write k[b], v[b] ([B, Hk, D]) at position positions[b] of sequence b of k_cache/v_cache ([B, Hk, S_max, D]),
    in place. Contract as `moelab.ops.attention.kv_write_reference`."""
    check_kv_write_args(k_cache, v_cache, k, v, positions)
    B, Hk, S, D = k_cache.shape
    if B == 0 or Hk == 0 or D == 0:
        return
    _kv_write_kernel[(B, Hk)](
        k, v, k_cache, v_cache, positions, S, D,
        *k.stride(), *v.stride(), *k_cache.stride(), *v_cache.stride(),
        BLOCK_D=triton.next_power_of_2(D), num_warps=1,
    )


def check_kv_write_args(k_cache, v_cache, k, v, positions) -> None:
    """Clear errors for what the write cannot do (shared by the reference and the kernel)."""
    if k_cache.dim() != 4 or v_cache.shape != k_cache.shape:
        raise ValueError(f"kv_write: k_cache and v_cache must be one shape [B, Hk, S_max, D], got "
                         f"{tuple(k_cache.shape)} and {tuple(v_cache.shape)}")
    B, Hk, _, D = k_cache.shape
    for name, t in (("k", k), ("v", v)):
        if tuple(t.shape) != (B, Hk, D):
            raise ValueError(f"kv_write: {name} must be [{B}, {Hk}, {D}] (one token per sequence), got {tuple(t.shape)}")
        if t.dtype != k_cache.dtype or t.device != k_cache.device:
            raise ValueError(f"kv_write: {name} is {t.dtype} on {t.device}, the cache {k_cache.dtype} on {k_cache.device}")
    if v_cache.dtype != k_cache.dtype or v_cache.device != k_cache.device:
        raise ValueError("kv_write: k_cache and v_cache must share dtype and device")
    if positions.shape != (B,) or positions.dtype not in (torch.int32, torch.int64) or positions.device != k_cache.device:
        raise ValueError(f"kv_write: positions must be [{B}] int32/int64 on {k_cache.device}, got "
                         f"{tuple(positions.shape)} {positions.dtype} on {positions.device}")
