"""Top-k routing in one launch: softmax/top-k/renormalise, top-k then softmax, or sigmoid grouped top-k.

Napkin math (per token): reads E logits (E·4 B), writes k weights + k ids (8k B); ~E·(k+4) compares.
At decode sizes this kernel is pure latency (a few µs of launch, ~nothing of bandwidth): what matters
is that it is one launch, not the five of softmax + topk + sum + div + cast.
One program per token; top-k by k rounds of arg-max, ties to the lower index (as torch.topk here).
Up to chain_pdl's rows it releases the PDL-launched experts' kernel as it starts (`gdc_launch_dependents`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moelab.kernels import chain_pdl, check_device, env_int, next_pow2
from moelab.ops.moe import _check_route_args

_SCORING_CODE = {"softmax": 0, "topk_softmax": 1, "sigmoid": 2}


@triton.jit
def _route_rounds(score, weight, offs, kk, K: tl.constexpr, K_PAD: tl.constexpr, E_PAD: tl.constexpr,
                  WEIGHT: tl.constexpr):
    """K arg-max rounds over score [R, E_PAD] (ties to the lower index): (vals, ids) [R, K_PAD], vals the best scores,
    or with WEIGHT the chosen experts' `weight` (a sigmoid's, without its correction bias); past K zeros."""
    vals = tl.zeros((score.shape[0], K_PAD), dtype=tl.float32)
    ids = tl.zeros((score.shape[0], K_PAD), dtype=tl.int32)
    work = score
    for j in tl.static_range(K):
        best = tl.max(work, axis=1)
        bi = tl.min(tl.where(work == best[:, None], offs[None, :], E_PAD), axis=1)
        hit = offs[None, :] == bi[:, None]
        if WEIGHT:
            v = tl.sum(tl.where(hit, weight, 0.0), axis=1)
        else:
            v = best
        vals = tl.where(kk[None, :] == j, v[:, None], vals)
        ids = tl.where(kk[None, :] == j, bi[:, None], ids)
        work = tl.where(hit, -float("inf"), work)
    return vals, ids


@triton.jit
def _route_rows(x, offs, valid, bias_ptr, scaling,
                K: tl.constexpr, K_PAD: tl.constexpr, E_PAD: tl.constexpr,
                SCORING: tl.constexpr, RENORM: tl.constexpr, HAS_BIAS: tl.constexpr,
                N_GROUP: tl.constexpr, TOPK_GROUP: tl.constexpr, BITONIC: tl.constexpr = False):
    """(weights [R, K_PAD] fp32, ids [R, K_PAD] int32) of R tokens from their logits x [R, E_PAD] fp32 (-inf past
    E; offs = arange(E_PAD), valid = offs < E). Every token's rounds run side by side (reductions along axis 1), so
    R tokens cost about one token's chain of K arg-max rounds. (A round as one int64 max of the score's bits above the
    index, one reduction deep instead of two, chose bitwise the same and lost: the router alone 4.75 → 4.92 µs at
    Qwen3.5-35B-A3B T=1, batch 1 +0.01 ms, H100, session 30, h100/gpu-session-EM-…; removed.)
    BITONIC (`route_bitonic()`): no rounds; `tl.topk` (a bitonic top-k) of one int64 key an expert, the score's bits
    made signed-orderable above (−0.0 first made +0.0, so equal scores stay equal) and E_PAD − 1 − index below, so the
    keys are distinct and the largest is the best score's lowest index: the same choice and the same weights. Not for
    a sigmoid with a correction bias (the weight is not the score there), nor at k=1 (one round is all there is, and
    Triton 3.6's `tl.topk` fails to compile for k=1; 3.9's does not): the rounds run."""
    kk = tl.arange(0, K_PAD)
    if SCORING == 0:  # softmax, then top-k of the probabilities
        m = tl.max(x, axis=1)
        p = tl.exp(x - m[:, None])
        score = p / tl.sum(p, axis=1)[:, None]
    elif SCORING == 1:  # top-k of the logits (softmax over the k comes after)
        score = x
    else:  # sigmoid; the choice adds the correction bias, the weight does not
        s = tl.sigmoid(x)
        score = s
        if HAS_BIAS:
            score = s + tl.load(bias_ptr + offs, mask=valid, other=0.0).to(tl.float32)[None, :]
        score = tl.where(valid[None, :], score, -float("inf"))
        if N_GROUP > 1:
            # Group score = sum of the group's top-2 choices; keep the best TOPK_GROUP groups.
            G: tl.constexpr = E_PAD // N_GROUP
            R: tl.constexpr = x.shape[0]
            g3 = tl.reshape(score, (R, N_GROUP, G))
            gcol = tl.arange(0, G)[None, None, :]
            top1 = tl.max(g3, axis=2)  # [R, N_GROUP]
            first = tl.min(tl.where(g3 == top1[:, :, None], gcol, G), axis=2)
            top2 = tl.max(tl.where(gcol == first[:, :, None], -float("inf"), g3), axis=2)
            gscore = top1 + top2
            gidx = tl.arange(0, N_GROUP)[None, :]
            keep = tl.zeros((R, N_GROUP), dtype=tl.int1)
            for _ in tl.static_range(TOPK_GROUP):
                best = tl.max(gscore, axis=1)
                bi = tl.min(tl.where(gscore == best[:, None], gidx, N_GROUP), axis=1)
                hit = gidx == bi[:, None]
                keep = keep | hit
                gscore = tl.where(hit, -float("inf"), gscore)
            keep_e = tl.reshape(tl.broadcast_to(keep[:, :, None], (R, N_GROUP, G)), (R, E_PAD))
            score = tl.where(keep_e, score, -float("inf"))

    if BITONIC and K_PAD > 1 and not (SCORING == 2 and HAS_BIAS):
        sb = (score + 0.0).to(tl.int32, bitcast=True)
        ordered = tl.where(sb >= 0, sb, sb ^ 0x7FFFFFFF)  # signed-int order = float order
        key = (ordered.to(tl.int64) << 32) | (E_PAD - 1 - offs)[None, :].to(tl.int64)
        top = tl.topk(key, K_PAD)  # [R, K_PAD], largest first
        ids = (E_PAD - 1 - (top & 0xFFFFFFFF)).to(tl.int32)
        ob = (top >> 32).to(tl.int32)
        vals = tl.where(kk[None, :] < K, tl.where(ob >= 0, ob, ob ^ 0x7FFFFFFF).to(tl.float32, bitcast=True), 0.0)
    else:
        vals, ids = _route_rounds(score, s if SCORING == 2 else score, offs, kk, K, K_PAD, E_PAD, SCORING == 2)

    if SCORING == 1:
        vals = tl.where(kk[None, :] < K, vals, -float("inf"))
        m = tl.max(vals, axis=1)
        ev = tl.exp(vals - m[:, None])
        vals = ev / tl.sum(ev, axis=1)[:, None]
    elif RENORM:
        vals = vals / tl.sum(vals, axis=1)[:, None]
    if SCORING == 2:
        vals = vals * scaling
    return vals, ids


@triton.jit
def _route_kernel(
    logits_ptr, bias_ptr, w_ptr, ids_ptr,  # [T, E] in, [E] in, [T, K] out fp32, [T, K] out int32
    E, stride_lt,
    scaling,
    K: tl.constexpr, K_PAD: tl.constexpr, E_PAD: tl.constexpr,
    SCORING: tl.constexpr, RENORM: tl.constexpr, HAS_BIAS: tl.constexpr,
    N_GROUP: tl.constexpr, TOPK_GROUP: tl.constexpr,
    TRIGGER: tl.constexpr = False,  # release a PDL-launched next kernel (the experts) as each program starts
    USE_PDL: tl.constexpr = False,  # launched with PDL: wait for the previous kernel before reading or writing anything
    BITONIC: tl.constexpr = False,  # `_route_rows`' bitonic top-k instead of K rounds (route_bitonic())
):
    if TRIGGER:  # the experts' kernel waits for this one's completion in hardware (gdc_wait) before reading the ids
        tl.extra.cuda.gdc_launch_dependents()
    if USE_PDL:  # the logits may be the previous kernel's output, and w/ids buffers its input: touched only from here
        tl.extra.cuda.gdc_wait()
    t = tl.program_id(0)
    offs = tl.arange(0, E_PAD)
    valid = offs < E
    x = tl.load(logits_ptr + t * stride_lt + offs[None, :], mask=valid[None, :], other=-float("inf")).to(tl.float32)
    vals, ids = _route_rows(x, offs, valid, bias_ptr, scaling, K, K_PAD, E_PAD, SCORING, RENORM, HAS_BIAS,
                            N_GROUP, TOPK_GROUP, BITONIC)  # one row: [1, K_PAD]
    kk = tl.arange(0, K_PAD)[None, :]
    tl.store(w_ptr + t * K + kk, vals, mask=kk < K)
    tl.store(ids_ptr + t * K + kk, ids, mask=kk < K)


def route(
    router_logits: torch.Tensor,
    k: int,
    scoring: str = "softmax",
    renormalize: bool = True,
    *,
    correction_bias: torch.Tensor | None = None,
    n_group: int = 1,
    topk_group: int = 1,
    scaling: float = 1.0,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Routing kernel; contract and formulas as `moelab.ops.moe.route_reference`.

    Returns (topk_weights[T, k] fp32, topk_ids[T, k] int32); `out` may pass both buffers.
    """
    _check_route_args(router_logits, k, scoring, correction_bias, n_group, topk_group)
    check_device(router_logits, "route: router_logits")
    T, E = router_logits.shape
    if router_logits.stride(1) != 1:
        raise ValueError("router_logits must be contiguous along the expert dimension")
    if out is None:
        w = torch.empty(T, k, dtype=torch.float32, device=router_logits.device)
        ids = torch.empty(T, k, dtype=torch.int32, device=router_logits.device)
    else:
        w, ids = out
        if w.shape != (T, k) or ids.shape != (T, k) or w.dtype != torch.float32 or ids.dtype != torch.int32:
            raise ValueError(f"out must be (fp32 [T={T}, k={k}], int32 [T, k])")
    if T == 0:
        return w, ids
    e_pad = next_pow2(E)
    pdl = route_pdl(router_logits.device, T)
    if n_group > 1 and e_pad != E:
        raise ValueError(f"grouped routing needs a power-of-two expert count, got E={E}")
    _route_kernel[(T,)](
        router_logits, correction_bias if correction_bias is not None else router_logits, w, ids,
        E, router_logits.stride(0), float(scaling),
        K=k, K_PAD=next_pow2(k), E_PAD=e_pad, SCORING=_SCORING_CODE[scoring], RENORM=bool(renormalize),
        HAS_BIAS=correction_bias is not None, N_GROUP=n_group, TOPK_GROUP=topk_group,
        # The experts' kernel after it is PDL-launched up to chain_pdl's rows: released as this one starts, its grid is
        # resident when the ids land. Route + experts graph-replayed on the H200 (session 19, stage CU's
        # sweep_moe.py --mode block, sweep-moe-block-trigger-…T1818): Qwen3-30B-A3B T=1 26.3 → 25.5 µs, T=2 42.4 → 41.9,
        # T=8 119.9 → 119.2, T=4 a tie; Qwen3.5-35B-A3B T=1 24.2 → 22.9; beyond chain_pdl's rows nothing changes.
        TRIGGER=chain_pdl(router_logits.device, T),
        USE_PDL=pdl, BITONIC=route_bitonic(), num_warps=1 if e_pad <= 128 else 4,
        **({"launch_pdl": True} if pdl else {}),
    )
    return w, ids


# The route kernel PDL-launched in the chain (`kernels.chain_pdl`'s rows): resident and waiting in hardware while the
# kernel before it drains (in `moe_block`'s layers back to back, the previous layer's experts' kernel, which releases
# its dependents as it starts; in the engine at T=9..16, the router's logits GEMV), so its launch is off the critical
# path, and the experts' kernel it releases is resident earlier too. Measured and not adopted (H200, session 27,
# sweep_moe.py --mode block --route-pdl): Qwen3-30B-A3B T=1 24.87 -> 24.68 us, T=2..16 -0.3..+0.3, Qwen3.5 T=1
# 22.87 -> 22.37, its tp=4 shard T=1 12.06 -> 12.16 and T=8 63.3 -> 64.9: within the runs' spread, against a
# prediction of -0.5..-1.5 us at T=1. Off; $MOELAB_ROUTE_PDL=1 turns it on (read at launch).
ROUTE_PDL = 0


def route_pdl(device: torch.device, T: int) -> bool:
    """Whether the route kernel is PDL-launched: `chain_pdl(device, T)` and ROUTE_PDL (or $MOELAB_ROUTE_PDL) on."""
    return bool(env_int("MOELAB_ROUTE_PDL", ROUTE_PDL)) and chain_pdl(device, T)


# `_route_rows`' BITONIC form (`tl.topk` of int64 keys, no rounds). Each of the K rounds is a max, then the lowest
# index holding it; in the router's sm_90 PTX at T=1 on one warp (Triton 3.6, `benchmarks/regs_sm90.py --count
# shfl.sync`) they come after the softmax as 8 groups of 5 dependent shuffle levels. Packing a round into one int64
# max (session 29) lost; the bitonic top-k has no rounds: 9 levels of 8 independent shuffles (93 shuffles in all
# against 61), its compare-swaps in-thread between them.
# Measured in session 31 (H100, CUDA graphs, L2 defeated; the same choices bit for bit):
# - the route kernel alone: Qwen3.5 (E=256) 3.50 -> 2.16 us at T=1, 3.57 -> 2.23 at T=8; Qwen3-30B (E=128) 2.30 ->
#   1.92 and 2.38 -> 2.00. Qwen3.5 batch 8 (route after the dense GEMV) 8.31 -> 8.24 ms a token. So it is on there
#   (ROUTE_BITONIC, $MOELAB_ROUTE_BITONIC).
# - the one-launch router's last arriver: alone 4.87 -> 4.79 us (Qwen3.5 T=1), 3.74 -> 3.39 (Qwen3-30B T=1), but in
#   the batch-1 chain Qwen3.5 2.80 -> 2.82 ms twice and Qwen3-30B 2.87 -> 2.87. So it stays off there
#   (ROUTER_BITONIC, $MOELAB_ROUTER_BITONIC).
ROUTE_BITONIC = 1
ROUTER_BITONIC = 0


# Ranking the renormalised softmax by the logits (session 46: top-k of the logits, then a softmax over the k; the same
# experts but where two distinct logits round to one probability, and the same weights to the last bits) skips the
# max, the exponentials and the sum over all E: in the pair kernel's routing at the tp=4 shard, 31 -> 25 bar.sync and
# 227 -> 215 shfl.sync (Triton 3.6, sm_90). Measured a tie on an H100 (h100/gpu-session-GT-GU-…T1935.log): the shard
# T=1 9.90 -> 9.86 us (predicted -0.2..-0.6), Qwen3-30B-A3B batch 1 2.80 -> 2.79 ms in the chain. Not kept.


def route_bitonic(kernel: str = "route") -> bool:
    """Whether `kernel` ("route" or "router", the one-launch router's last arriver) routes with the bitonic top-k."""
    if kernel == "router":
        return bool(env_int("MOELAB_ROUTER_BITONIC", ROUTER_BITONIC))
    return bool(env_int("MOELAB_ROUTE_BITONIC", ROUTE_BITONIC))
