"""Direct-routed MoE for the smallest T with no wait between the two projections: split over I.

Napkin math (Qwen3-30B-A3B, T=1, bf16): 8 experts × (2I·H + H·I) · 2 B = 75.5 MB → 16.6 µs at 4.54 TB/s;
FLOPs 2 · 8 · 3·I·H = 75 MFLOP (1 FLOP/byte). Extra traffic here: fp32 partials, one row of H per
producer, written once and read once, mostly from L2: T=1, BLOCK_I=32: 192 × 8 KB = 1.5 MB (2 % of the weights).

Why: `moe_pairs` measured 26 µs at T=1 for 16.6 µs of bytes. Its down projection waits for a slot's whole
activation vector, so w2 streams only as phase 1 drains, and each output block then pays an arrival atomic
and a reload of partials: a chain of dependent trips, ~10 µs of latency (the tp=4 shard: 12.7 µs for
2.7 µs of bytes). Here the down projection is split over I instead of over H — a block of BLOCK_I rows of
gate/up gives SiLU(g)·u for exactly the BLOCK_I columns of w2 it multiplies — so one program does both
projections for its rows with no other program's data:
  * producers, programs (slot, block of BLOCK_I rows): act = SiLU(x·gate)·(x·up) on the rows (rounded to x's
    dtype, as the reference), then w2[e][:, rows] · act × routing weight → an fp32 partial row of H; one
    release-increment of a single arrival counter. No producer ever waits.
  * reducers, N_RED programs after all producers (higher indices, so they start last and only wait on lower
    indices: no deadlock, and the interpreter's in-order run works): wait for the counter to reach the
    producer count, then each sums the partials of BLOCK_R outputs in (token, top-k, row block) order —
    bitwise deterministic — into out; the last reducer resets the counters (no memset launch).
The shared expert (Qwen2-MoE, Qwen3-Next, Qwen3.5) is one more slot per token, weighted by sigmoid(gate · x),
which each of its producers computes itself (an H-long dot). With router logits the producers also route
(softmax top-k), so a whole MoE layer is one launch.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moelab.kernels.moe_decode import _counters, _pop_warps, _wait_geq
from moelab.kernels.moe_pairs import _softmax_topk_slot, _swiglu_rows


@triton.jit
def _moe_split_kernel(
    # pointers
    x_ptr, w13_ptr, w2_ptr, tw_ptr, tid_ptr,  # x[T,H], w13[E,2I,H], w2[E,H,I], topk w/ids [T,K] (outputs if FUSED_ROUTE)
    logits_ptr,  # router logits [T,E] (read only if FUSED_ROUTE)
    sw13_ptr, sw2_ptr, sgate_ptr,  # shared expert [2IS,H], [H,IS], [1,H]
    part_ptr, cnt_ptr, out_ptr,  # partials fp32 [N_PROD, H]; int32 counters [2]; out[T,H]
    # sizes
    H, I, IS, E,
    # strides (elements)
    s_xt, s_w13e, s_w13r, s_w2e, s_w2r, s_ot,
    # meta
    T: tl.constexpr, K: tl.constexpr, N_IBLK: tl.constexpr, N_PROD: tl.constexpr, N_RED: tl.constexpr,
    BLOCK_I: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_H2: tl.constexpr, BLOCK_R: tl.constexpr,
    BLOCK_P: tl.constexpr,
    HAS_SHARED: tl.constexpr, SHARED_GATE: tl.constexpr,
    FUSED_ROUTE: tl.constexpr, E_PAD: tl.constexpr, RENORM: tl.constexpr,
):
    # counters: [0] producers arrived; [1] reducers done (the last resets both).
    P: tl.constexpr = T * K
    pid = tl.program_id(0)
    if pid < N_PROD:
        # ---------------- producer: both projections for BLOCK_I rows of one slot ----------------
        s = pid // N_IBLK
        ib = pid % N_IBLK
        is_shared = s >= P
        t = tl.where(is_shared, s - P, s // K)
        if FUSED_ROUTE:
            e, route_w = _softmax_topk_slot(logits_ptr + t * E, E, s % K, K, E_PAD, RENORM)
            if (ib == 0) & (s < P):  # hand the routing to the caller too
                tl.store(tid_ptr + s, e.to(tl.int32))
                tl.store(tw_ptr + s, route_w)
        else:
            e = tl.load(tid_ptr + tl.minimum(s, P - 1))
            e = tl.where((e < 0) | (e >= E), 0, e).to(tl.int64)  # stay in bounds; the reducer poisons the token
            route_w = tl.load(tw_ptr + tl.minimum(s, P - 1)).to(tl.float32)
        I_s = tl.where(is_shared, IS, I)
        if ib * BLOCK_I < I_s:
            w_base = tl.where(is_shared, sw13_ptr, w13_ptr + e * s_w13e)  # branch-free: no value-yielding `if`
            s_row = tl.where(is_shared, H, s_w13r)
            offs_i = ib * BLOCK_I + tl.arange(0, BLOCK_I)
            imask = offs_i < I_s
            act = _swiglu_rows(w_base, s_row, x_ptr + t * s_xt, offs_i, imask, I_s, H, BLOCK_I, BLOCK_K)
            act = act.to(x_ptr.dtype.element_ty).to(tl.float32)  # the activation dtype's rounding, as the reference
            weight = route_w
            if HAS_SHARED:
                if SHARED_GATE:
                    # sigmoid(gate · x[t]) for the shared slot (its producers each compute it: H·2 B from L2)
                    gacc = tl.zeros((BLOCK_K,), dtype=tl.float32)
                    for k0 in range(0, H, BLOCK_K):
                        offs_g = k0 + tl.arange(0, BLOCK_K)
                        gm = offs_g < tl.where(is_shared, H, 0)  # non-shared slots: no loads
                        gacc += (tl.load(sgate_ptr + offs_g, mask=gm, other=0.0).to(tl.float32)
                                 * tl.load(x_ptr + t * s_xt + offs_g, mask=gm, other=0.0).to(tl.float32))
                    weight = tl.where(is_shared, tl.sigmoid(tl.sum(gacc, axis=0)), weight)
                else:
                    weight = tl.where(is_shared, 1.0, weight)
            act = act * weight
            # Down projection of these BLOCK_I columns of w2 for every output: w2[e][h, rows], BLOCK_H2 at a time.
            w2_base = tl.where(is_shared, sw2_ptr, w2_ptr + e * s_w2e)
            s2 = tl.where(is_shared, IS, s_w2r)
            for h0 in range(0, H, BLOCK_H2):
                offs_h = h0 + tl.arange(0, BLOCK_H2)
                hmask = offs_h < H
                w = tl.load(w2_base + offs_h[:, None] * s2 + offs_i[None, :], mask=hmask[:, None] & imask[None, :],
                            other=0.0, eviction_policy="evict_first")
                y = tl.sum(w.to(tl.float32) * act[None, :], axis=1)
                tl.store(part_ptr + pid * H + offs_h, y, mask=hmask)
        tl.debug_barrier()  # all threads' partial stores precede the release
        tl.atomic_add(cnt_ptr, 1, sem="release", scope="gpu")
    else:
        # ---------------- reducer: BLOCK_R outputs of every token, fixed summation order ----------------
        r = pid - N_PROD
        offs_h = r * BLOCK_R + tl.arange(0, BLOCK_R)
        hmask = offs_h < H
        _wait_geq(cnt_ptr, N_PROD)
        n_i = tl.cdiv(I, BLOCK_I)
        offs_p = tl.arange(0, BLOCK_P)
        for t in tl.static_range(T):
            total = tl.zeros((BLOCK_R,), dtype=tl.float32)
            for j in tl.static_range(K):
                row0 = (t * K + j) * N_IBLK
                for p0 in range(0, n_i, BLOCK_P):
                    pm = (p0 + offs_p) < n_i
                    tile = tl.load(part_ptr + (row0 + p0 + offs_p)[:, None] * H + offs_h[None, :],
                                   mask=pm[:, None] & hmask[None, :], other=0.0, cache_modifier=".cg")
                    total += tl.sum(tile, axis=0)
            if HAS_SHARED:
                n_is = tl.cdiv(IS, BLOCK_I)
                row0 = (P + t) * N_IBLK
                for p0 in range(0, n_is, BLOCK_P):
                    pm = (p0 + offs_p) < n_is
                    tile = tl.load(part_ptr + (row0 + p0 + offs_p)[:, None] * H + offs_h[None, :],
                                   mask=pm[:, None] & hmask[None, :], other=0.0, cache_modifier=".cg")
                    total += tl.sum(tile, axis=0)
            if not FUSED_ROUTE:  # routed ids come from the caller: poison a token with an id out of range
                offs_j = tl.arange(0, E_PAD)  # E_PAD ≥ K here (the launcher makes it so)
                ids = tl.load(tid_ptr + t * K + offs_j, mask=offs_j < K, other=0)
                bad = tl.max((((ids < 0) | (ids >= E)) & (offs_j < K)).to(tl.int32), axis=0) > 0
                total = tl.where(bad, float("nan"), total)
            tl.store(out_ptr + t * s_ot + offs_h, total.to(out_ptr.dtype.element_ty), mask=hmask)
        tl.debug_barrier()
        done = tl.atomic_add(cnt_ptr + 1, 1, sem="acq_rel", scope="gpu")
        if done == N_RED - 1:
            tl.store(cnt_ptr, 0)
            tl.store(cnt_ptr + 1, 0)


SPLIT_MAX_T = 4  # the reducers unroll over tokens (T is a compile-time constant): keep it to decode sizes


def split_config(T: int, k: int, H: int, I: int) -> dict:
    """Launch parameters: BLOCK_I rows per producer (T=1, Qwen3-30B-A3B: 8 slots × 24 blocks = 192 producers at
    32), the gate/up GEMV in chunks of BLOCK_K, w2 columns BLOCK_H2 rows at a time. Not yet measured: the
    sweep (benchmarks/sweep_moe.py --mode split) decides."""
    return dict(BLOCK_I=32 if I >= 512 else 16, BLOCK_K=256, BLOCK_H2=64, num_warps=4)


def moe_split(x, w13, w2, topk_weights, topk_ids, shared=None, *, out, config: dict | None = None,
              router_logits=None, renormalize: bool = True):
    """Launcher: args already checked by `moelab.kernels.moe.fused_moe`. Returns out[T, H].

    With `router_logits` [T, E] the producers route (softmax top-k, renormalised if asked) and write the
    routing into `topk_weights` / `topk_ids` (fp32 / int32 [T, k] buffers): one launch per layer.
    """
    T, H = x.shape
    if T > SPLIT_MAX_T:
        raise ValueError(f"the split MoE kernel takes at most {SPLIT_MAX_T} tokens, got T={T}")
    E, I2, _ = w13.shape
    I = I2 // 2
    k = topk_ids.shape[1]
    fused_route = router_logits is not None
    cfg = dict(split_config(T, k, H, I), **(config or {}))
    num_warps = _pop_warps(cfg)
    IS = shared[1].shape[1] if shared is not None else 0
    n_slots = T * k + (T if shared is not None else 0)
    n_iblk = triton.cdiv(max(I, IS), cfg["BLOCK_I"])
    n_prod = n_slots * n_iblk
    # Reducers: ~32 blocks of outputs (each reads T·(k+1)·n_iblk partial rows of BLOCK_R from L2).
    block_r = cfg.pop("BLOCK_R", max(16, triton.next_power_of_2(triton.cdiv(H, 32))))
    n_red = triton.cdiv(H, block_r)
    part = torch.empty(n_prod, H, dtype=torch.float32, device=x.device)
    if fused_route:
        ids = topk_ids  # output buffers, checked by the caller
    else:
        ids = (topk_ids if topk_ids.dtype == torch.int32 else topk_ids.to(torch.int32)).contiguous()
    sw13, sw2, sgate = shared if shared is not None else (x, x, None)
    _moe_split_kernel[(n_prod + n_red,)](
        x, w13, w2, topk_weights if fused_route else topk_weights.contiguous(), ids,
        router_logits if fused_route else x, sw13, sw2, sgate if sgate is not None else x,
        part, _counters(x.device, 2), out,
        H, I, IS, E,
        x.stride(0), w13.stride(0), w13.stride(1), w2.stride(0), w2.stride(1), out.stride(0),
        T=T, K=k, N_IBLK=n_iblk, N_PROD=n_prod, N_RED=n_red, BLOCK_R=block_r,
        BLOCK_P=min(32, triton.next_power_of_2(n_iblk)),
        HAS_SHARED=shared is not None, SHARED_GATE=sgate is not None, FUSED_ROUTE=fused_route,
        E_PAD=max(triton.next_power_of_2(E), triton.next_power_of_2(k)), RENORM=bool(renormalize),
        num_warps=num_warps, **cfg,
    )
    return out
