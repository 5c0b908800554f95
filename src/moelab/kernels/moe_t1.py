"""Direct-routed MoE for exactly one token (T=1): the pair kernel without partials or a last-arriver sum.

Napkin math as in `moe_decode` (Qwen3-30B-A3B, T=1: 75.5 MB → 16.6 µs at 4.54 TB/s; the tp=4 shard
E=256, I=128: 12.6 MB → 2.8 µs). What separates `moe_pairs` from that floor at T=1 is latency, not bytes:
after the down projection, each (pair, output block) program stores a partial, counts its arrival with
an atomic, and the last arriver reloads the partials — two more dependent trips to L2 per output block.

Here phase 2 is one program per block of BLOCK_H outputs holding the w2 slices of ALL k experts,
[k, BLOCK_H, I], loaded before it waits; it then waits for the k activations, does the k dot products and
the weighted sum in registers (fixed order: deterministic) and stores the output directly. Phase 1 is the
pair kernel's. Only the last output block touches an atomic, to reset the counters.
Registers bound the tile: k · BLOCK_H · next_pow2(I) elements per program (BLOCK_H=1 at I=768, 16 at I=128).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moelab.kernels import cdiv, counters, next_pow2
from moelab.kernels.moe_decode import _swiglu_rows, _wait_geq


@triton.jit
def _moe_t1_kernel(
    x_ptr, w13_ptr, w2_ptr, tw_ptr, tid_ptr,  # x[1,H], w13[E,2I,H], w2[E,H,I], topk w/ids [1,K]
    act_ptr, cnt_ptr, out_ptr,  # act[K, I] (x dtype), int32 counters [K + 1], out[1,H]
    H, I, E,
    s_w13e, s_w13r, s_w2e, s_w2r,
    K: tl.constexpr, K_PAD: tl.constexpr, I_PAD: tl.constexpr,
    N_IBLK: tl.constexpr, N1: tl.constexpr, N_HBLK: tl.constexpr,
    BLOCK_I: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_H: tl.constexpr,
):
    pid = tl.program_id(0)
    if pid < N1:
        # ---------------- phase 1: SiLU(x·gate)·(x·up), BLOCK_I rows of expert slot s ----------------
        s = pid // N_IBLK
        ib = pid % N_IBLK
        e = tl.load(tid_ptr + s)
        e = tl.where((e < 0) | (e >= E), 0, e).to(tl.int64)  # stay in bounds; the output is poisoned below
        w_base = w13_ptr + e * s_w13e
        offs_i = ib * BLOCK_I + tl.arange(0, BLOCK_I)
        imask = offs_i < I
        act = _swiglu_rows(w_base, s_w13r, x_ptr, offs_i, imask, I, H, BLOCK_I, BLOCK_K)
        tl.store(act_ptr + s * I + offs_i, act.to(act_ptr.dtype.element_ty), mask=imask)
        tl.debug_barrier()
        tl.atomic_add(cnt_ptr + s, 1, sem="release", scope="gpu")
    else:
        # ------- phase 2: BLOCK_H outputs, all k experts' w2 slices in flight before the wait -------
        hb = pid - N1
        offs_h = hb * BLOCK_H + tl.arange(0, BLOCK_H)
        hmask = offs_h < H
        offs_j = tl.arange(0, K_PAD)
        jmask = offs_j < K
        ids = tl.load(tid_ptr + offs_j, mask=jmask, other=0)
        bad = tl.max((((ids < 0) | (ids >= E)) & jmask).to(tl.int32), axis=0) > 0
        ev = tl.where((ids < 0) | (ids >= E), 0, ids).to(tl.int64)
        offs_c = tl.arange(0, I_PAD)
        cmask = offs_c < I
        m3 = jmask[:, None, None] & hmask[None, :, None] & cmask[None, None, :]
        w = tl.load(w2_ptr + ev[:, None, None] * s_w2e + offs_h[None, :, None] * s_w2r + offs_c[None, None, :],
                    mask=m3, other=0.0, eviction_policy="evict_first")  # [K_PAD, BLOCK_H, I_PAD]
        target = tl.cdiv(I, BLOCK_I)
        I_ready = I
        for j in tl.static_range(K):
            I_ready = tl.minimum(I_ready, _wait_geq(cnt_ptr + j, target, I, ""))
        a = tl.load(act_ptr + offs_j[:, None] * I + offs_c[None, :], mask=jmask[:, None] & (offs_c < I_ready)[None, :],
                    other=0.0, cache_modifier=".cg").to(tl.float32)  # [K_PAD, I_PAD]
        y = tl.sum(w.to(tl.float32) * a[:, None, :], axis=2)  # [K_PAD, BLOCK_H]
        tw = tl.load(tw_ptr + offs_j, mask=jmask, other=0.0).to(tl.float32)
        o = tl.sum(y * tw[:, None], axis=0)  # [BLOCK_H]
        o = tl.where(bad, float("nan"), o)
        tl.store(out_ptr + offs_h, o.to(out_ptr.dtype.element_ty), mask=hmask)
        # The last output block resets the counters (it alone pays an atomic round trip).
        tl.debug_barrier()
        done = tl.atomic_add(cnt_ptr + K, 1, sem="acq_rel", scope="gpu")
        if done == N_HBLK - 1:
            tl.store(cnt_ptr + offs_j, tl.zeros((K_PAD,), dtype=tl.int32), mask=jmask)
            tl.store(cnt_ptr + K, 0)


def t1_config(k: int, H: int, I: int) -> dict:
    """Launch parameters: phase 1 as the pair kernel's H200 optimum; BLOCK_H so the w2 tile of all k experts,
    k·BLOCK_H·next_pow2(I) elements, stays near 16K per program: the tp=4 shard (k=8, I=128) gets 16, the
    measured best of {1, 16} there (14.4 µs with routing, H200 2026-12-01; ptxas sm_90: 168 registers)."""
    bh = max(1, min(32, next_pow2(max(1, 16384 // (k * next_pow2(I))))))
    return dict(BLOCK_I=8, BLOCK_K=512, BLOCK_H=bh, num_warps=4)


def moe_t1(x, w13, w2, topk_weights, topk_ids, *, out, config: dict | None = None):
    """Launcher for T=1 without a shared expert (args checked by `moelab.kernels.moe.fused_moe`)."""
    T, H = x.shape
    if T != 1:
        raise ValueError(f"moe_t1 takes exactly one token, got T={T}")
    E, I2, _ = w13.shape
    I = I2 // 2
    k = topk_ids.shape[1]
    cfg = dict(t1_config(k, H, I), **(config or {}))
    num_warps = cfg.pop("num_warps")
    n_iblk = cdiv(I, cfg["BLOCK_I"])
    n_hblk = cdiv(H, cfg["BLOCK_H"])
    n1 = k * n_iblk
    act = torch.empty(k, I, dtype=x.dtype, device=x.device)
    ids = (topk_ids if topk_ids.dtype == torch.int32 else topk_ids.to(torch.int32)).contiguous()
    _moe_t1_kernel[(n1 + n_hblk,)](
        x, w13, w2, topk_weights.contiguous(), ids, act, counters(x.device, k + 1, "moe"), out,
        H, I, E, w13.stride(0), w13.stride(1), w2.stride(0), w2.stride(1),
        K=k, K_PAD=next_pow2(k), I_PAD=next_pow2(I),
        N_IBLK=n_iblk, N1=n1, N_HBLK=n_hblk, num_warps=num_warps, **cfg,
    )
    return out
