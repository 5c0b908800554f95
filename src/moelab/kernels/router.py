"""The MoE router in one launch: logits = x · W_routerᵀ, then top-k routing, for decode sizes (Triton).

Two ops in the plain way (cuBLAS GEMV for the logits, then `route`): on the H200 (2026-12-01, profile of
Qwen3-30B-A3B, B=1, graph-replayed) the GEMV took 5.7 µs for 0.5 MB and `route` 2.8 µs — 8.5 µs per layer
of pure latency against a floor of 0.1 µs.

Napkin math (T tokens, E experts, hidden H, bf16): bytes = E·H·2 (Qwen3-30B-A3B: 128 × 2048 × 2 = 0.5 MB,
0.11 µs at 4.6 TB/s) + T·H·2; FLOPs = 2·T·E·H. Latency-bound: what matters is one launch and a short chain.

One grid of E / BLOCK_E programs, launched with programmatic dependent launch on Hopper: each requests its
first weight chunk before waiting for the previous kernel (the norm that produces x). Each computes the logits of its BLOCK_E experts for every token (a GEMV
over H, fp32 accumulation, rounded to x's dtype as transformers' bf16 router Linear does), stores them, and
counts its arrival (release); the last program to arrive (acquire) computes every token's routing from the
whole logits tile with `route`'s own code (`_route_rows`: the same numerics, ties to the lower index) and
resets the counter, so no memset launch is needed.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moelab.kernels import cdiv, chain_pdl, check_device, counters, env_int, next_pow2, pdl_supported
from moelab.kernels.route import _SCORING_CODE, _route_rows, route_bitonic
from moelab.ops.moe import _check_route_args

ROUTER_MAX_T = 16  # decode sizes: the [T, BLOCK_E, BLOCK_H] product is held in registers
# The engine uses the one-launch router up to `fused_router_max_t(E)` tokens. When its last arriver routed the tokens
# one after another, it took 17.7 µs at T=8 against 8.0 for cuBLAS + `route`, while at T=1 it took 4.25 µs against
# more than 5.6 (H200, benchmarks/sweep_router.py, 2026-12-01 12:03). It now routes every token at once (the rows of
# one tile, `_route_rows`): at T=8 on 4 warps 6.0 µs against 8.1 for `dense` + `route` alone, and batch 8 7.81 →
# 7.77 ms per token in the chained step (session 9, gpu-session-AL-…T2338, ab-chain-…T234357; on 1 warp it had
# lost, 7.97 → 8.24, ab-chain-…T233130). T=2..7 are unmeasured: the fused form won at both measured ends.
# With more than 128 experts the one launch stops at one row (FUSED_ROUTER_MAX_T_WIDE): at Qwen3.5-35B-A3B (E=256) its
# 256 one-expert programs each re-read x, and alone (sweep_router.py, H100, session 30, gpu-session-EO-…T0726) it took
# 5.39 / 6.98 / 8.28 µs at T=2 / 4 / 8 against 5.15 / 5.93 / 6.10 for `dense` (moelab's GEMV now, cuBLAS in session
# 9) + `route`; in the batch-8 chain 8.36 → 8.32 ms a token (ab-chain-…T072421, two rounds; the tokens differ at
# near-ties of the logits). At Qwen3-30B-A3B (E=128) the batch-8 chain tied (9.71 / 9.72, …T072543): 8 rows stay.
# MOELAB_FUSED_ROUTER_MAX_T overrides both (1 gives the two-launch form above T=1).
FUSED_ROUTER_MAX_T = 8
FUSED_ROUTER_MAX_T_WIDE = 1  # more than 128 experts


def fused_router_max_t(E: int) -> int:
    """The largest T the engine routes `E` experts with the one-launch router (read at launch time: an A/B switch)."""
    default = FUSED_ROUTER_MAX_T if E <= 128 else FUSED_ROUTER_MAX_T_WIDE
    return min(env_int("MOELAB_FUSED_ROUTER_MAX_T", default), ROUTER_MAX_T)


@triton.jit
def _router_kernel(
    x_ptr, w_ptr, bias_ptr, logits_ptr, tw_ptr, ids_ptr, cnt_ptr,  # x[T,H], W[E,H], bias[E], logits fp32 [T,E],
    #                                                                weights fp32 [T,K], ids int32 [T,K], counter
    T, E, H, s_xt, s_we, scaling,
    T_PAD: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr, N_PROG: tl.constexpr,
    K: tl.constexpr, K_PAD: tl.constexpr, E_PAD: tl.constexpr,
    SCORING: tl.constexpr, RENORM: tl.constexpr, HAS_BIAS: tl.constexpr,
    N_GROUP: tl.constexpr, TOPK_GROUP: tl.constexpr, USE_PDL: tl.constexpr,
    TRIGGER: tl.constexpr,  # release a PDL-launched next kernel (the experts) as each program starts
    # NORM: the residual add + RMSNorm before the router in this launch (`add_rmsnorm_router`): every program
    # normalises the rows of h (+ res) itself (BLOCK_H ≥ H: one chunk) with `_add_rmsnorm_kernel`'s casting, program 0
    # stores them (xo) and the new residual (ro); x_ptr is then unused.
    h_ptr=None, res_ptr=None, nw_ptr=None, xo_ptr=None, ro_ptr=None, eps=1e-6, s_ht=0, s_rt=0, s_ot=0, s_qt=0,
    NORM: tl.constexpr = False, HAS_RES: tl.constexpr = False, OFFSET: tl.constexpr = False,
    BITONIC: tl.constexpr = False,  # `_route_rows`' bitonic top-k instead of K rounds (`route.route_bitonic("router")`)
):
    if TRIGGER:
        tl.extra.cuda.gdc_launch_dependents()
    pid = tl.program_id(0)
    offs_e = pid * BLOCK_E + tl.arange(0, BLOCK_E)
    emask = offs_e < E
    offs_t = tl.arange(0, T_PAD)
    tmask = offs_t < T
    offs_h = tl.arange(0, BLOCK_H)
    # The first weight chunk is requested before the PDL wait (the weight is no kernel's output); x after it.
    w = tl.load(w_ptr + offs_e[:, None] * s_we + offs_h[None, :], mask=emask[:, None] & (offs_h < H)[None, :],
                other=0.0, eviction_policy="evict_first")  # [BLOCK_E, BLOCK_H]
    if NORM:
        hmask = offs_h < H
        nw = tl.load(nw_ptr + offs_h, mask=hmask, other=0.0).to(tl.float32)  # no kernel's output either
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
    acc = tl.zeros((T_PAD, BLOCK_E), dtype=tl.float32)
    if NORM:
        m2 = tmask[:, None] & hmask[None, :]
        act_ty = h_ptr.dtype.element_ty
        hv = tl.load(h_ptr + offs_t[:, None] * s_ht + offs_h[None, :], mask=m2, other=0.0)
        if HAS_RES:  # the sum rounded to the activation dtype, as transformers adds
            hv = (hv.to(tl.float32) + tl.load(res_ptr + offs_t[:, None] * s_rt + offs_h[None, :], mask=m2,
                                              other=0.0).to(tl.float32)).to(act_ty)
        hf = hv.to(tl.float32)
        rstd = tl.rsqrt(tl.sum(hf * hf, axis=1) / H + eps)
        n = hf * rstd[:, None]
        if OFFSET:
            y = (n * (1.0 + nw[None, :])).to(act_ty)
        else:
            y = (n.to(act_ty).to(tl.float32) * nw[None, :]).to(act_ty)
        if pid == 0:
            tl.store(xo_ptr + offs_t[:, None] * s_ot + offs_h[None, :], y, mask=m2)
            if HAS_RES:
                tl.store(ro_ptr + offs_t[:, None] * s_qt + offs_h[None, :], hv, mask=m2)
        acc += tl.sum(y.to(tl.float32)[:, None, :] * w.to(tl.float32)[None, :, :], axis=2)
        logits = acc.to(act_ty).to(tl.float32)
    else:
        for h0 in range(0, H, BLOCK_H):
            offs_h = h0 + tl.arange(0, BLOCK_H)
            hmask = offs_h < H
            x = tl.load(x_ptr + offs_t[:, None] * s_xt + offs_h[None, :], mask=tmask[:, None] & hmask[None, :],
                        other=0.0)  # [T_PAD, BLOCK_H]
            acc += tl.sum(x.to(tl.float32)[:, None, :] * w.to(tl.float32)[None, :, :], axis=2)
            nh = offs_h + BLOCK_H
            w = tl.load(w_ptr + offs_e[:, None] * s_we + nh[None, :], mask=emask[:, None] & (nh < H)[None, :],
                        other=0.0, eviction_policy="evict_first")  # the next chunk (all-masked after the last)
        logits = acc.to(x_ptr.dtype.element_ty).to(tl.float32)  # the router Linear's output dtype, as in transformers
    tl.store(logits_ptr + offs_t[:, None] * E + offs_e[None, :], logits, mask=tmask[:, None] & emask[None, :])
    tl.debug_barrier()  # every thread's stores precede the release below
    arrived = tl.atomic_add(cnt_ptr, 1, sem="acq_rel", scope="gpu")
    if arrived == N_PROG - 1:
        # Last to arrive: all logits are visible (acquire; its result is used, so the compiler keeps it). Every
        # token's routing at once, as rows of one tile (`route`'s own code, `_route_rows`).
        offs = tl.arange(0, E_PAD)
        valid = offs < E
        kk = tl.arange(0, K_PAD)[None, :]
        rows = tl.load(logits_ptr + offs_t[:, None] * E + offs[None, :], mask=tmask[:, None] & valid[None, :],
                       other=-float("inf"), cache_modifier=".cg")  # [T_PAD, E_PAD]
        rows = tl.where(tmask[:, None], rows, 0.0)  # padding rows: finite (never stored), no NaN from their softmax
        vals, ids = _route_rows(rows, offs, valid, bias_ptr, scaling, K, K_PAD, E_PAD, SCORING, RENORM, HAS_BIAS,
                                N_GROUP, TOPK_GROUP, BITONIC)
        out_mask = tmask[:, None] & (kk < K)
        tl.store(tw_ptr + offs_t[:, None] * K + kk, vals, mask=out_mask)
        tl.store(ids_ptr + offs_t[:, None] * K + kk, ids, mask=out_mask)
        tl.store(cnt_ptr, 0)


ROUTER_TILE = 16384  # elements of the [T_PAD, BLOCK_E, BLOCK_H] product per program at 8+ rows (8 warps above 8K)


def router_config(T: int, E: int, H: int, block_e: int = 1, num_warps: int | None = None) -> dict:
    """BLOCK_E experts per program (E/BLOCK_E programs), BLOCK_H so the [T, BLOCK_E, BLOCK_H] product stays near
    ROUTER_TILE elements. One expert per program (benchmarks/sweep_router.py on the H200): at T=1 on one warp
    (2026-12-01 12:03, Qwen3-30B-A3B: 4.25 µs; 2 experts / 4 warps, the first guess, 5.36 µs) — one warp keeps the
    last arriver's reductions inside a warp. At T=8, x in one chunk of all H=2048 (each program reads x once from L2,
    not twice) on 8 warps: 6.57 µs against 8.25 for the 1024-wide chunks of an 8K tile on 8 warps and 9.54 on 4
    (session 11, gpu-session-AV-…; the sweep's weight rotation makes every figure ~2 µs above session 9's 5.99).
    Below 8 rows the earlier 8K tile stays (T=2..4 at H=2048 read all of H in one chunk with it already; larger H
    there is unmeasured either way); MOELAB_ROUTER_TILE=8192 gives the earlier tiles at 8 and 16 rows too, for an
    A/B."""
    t_pad = next_pow2(T)
    tile = env_int("MOELAB_ROUTER_TILE", ROUTER_TILE) if t_pad >= 8 else 8192
    block_h = max(16, min(next_pow2(H), tile // (t_pad * block_e)))
    if num_warps is None:
        num_warps = 1 if T == 1 else (8 if t_pad * block_e * block_h > 8192 else 4)
    return dict(BLOCK_E=block_e, BLOCK_H=block_h, num_warps=num_warps)


def router(x: torch.Tensor, weight: torch.Tensor, k: int, scoring: str = "softmax", renormalize: bool = True, *,
           correction_bias: torch.Tensor | None = None, n_group: int = 1, topk_group: int = 1, scaling: float = 1.0,
           config: dict | None = None, norm: tuple | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Router logits and top-k routing in one launch; contract as `moelab.ops.moe.router_reference`.

    x [T, H] (T ≤ ROUTER_MAX_T), weight [E, H]. Returns (topk_weights [T, k] fp32, topk_ids [T, k] int32).
    """
    check_router_args(x, weight)
    check_device(x, "router: x")
    T, H = x.shape
    E = weight.shape[0]
    _check_route_args(torch.empty(T, E, device="meta"), k, scoring, correction_bias, n_group, topk_group)
    if T > ROUTER_MAX_T:
        raise ValueError(f"router: the fused router kernel is for decode sizes (T ≤ {ROUTER_MAX_T}), got T={T}; "
                         "use a GEMM and `route` for prefill")
    w_out = torch.empty(T, k, dtype=torch.float32, device=x.device)
    ids = torch.empty(T, k, dtype=torch.int32, device=x.device)
    if T == 0:
        return w_out, ids
    e_pad = next_pow2(E)
    if n_group > 1 and e_pad != E:
        raise ValueError(f"grouped routing needs a power-of-two expert count, got E={E}")
    pick = {"BLOCK_E": "block_e", "num_warps": "num_warps"}
    cfg = router_config(T, E, H, **{pick[k_]: v for k_, v in (config or {}).items() if k_ in pick})
    cfg.update(config or {})
    num_warps = cfg.pop("num_warps")
    n_prog = cdiv(E, cfg["BLOCK_E"])
    logits = torch.empty(T, E, dtype=torch.float32, device=x.device)
    pdl = pdl_supported(x.device)  # the weight streams while the norm before it runs (kernels.pdl_supported)
    launch = {"launch_pdl": True} if pdl else {}
    if norm is None:
        norm_args = dict(h_ptr=x, res_ptr=x, nw_ptr=x, xo_ptr=x, ro_ptr=x, eps=0.0, s_ht=0, s_rt=0, s_ot=0, s_qt=0)
    else:  # (h, residual or None, norm weight, eps, offset, x out, residual out or None): see add_rmsnorm_router
        h, res, nw, eps, offset, xo, ro = norm
        if next_pow2(H) > cfg["BLOCK_H"]:
            cfg["BLOCK_H"] = next_pow2(H)  # the norm needs whole rows: one chunk
        norm_args = dict(h_ptr=h, res_ptr=res if res is not None else h, nw_ptr=nw, xo_ptr=xo,
                         ro_ptr=ro if ro is not None else xo, eps=float(eps), s_ht=h.stride(0),
                         s_rt=res.stride(0) if res is not None else 0, s_ot=xo.stride(0),
                         s_qt=ro.stride(0) if ro is not None else 0, NORM=True, HAS_RES=res is not None,
                         OFFSET=bool(offset))
    _router_kernel[(n_prog,)](
        x, weight, correction_bias if correction_bias is not None else logits, logits, w_out, ids,
        counters(x.device, 1, "router"), T, E, H, x.stride(0), weight.stride(0), float(scaling),
        T_PAD=next_pow2(T), N_PROG=n_prog, K=k, K_PAD=next_pow2(k), E_PAD=e_pad,
        SCORING=_SCORING_CODE[scoring], RENORM=bool(renormalize), HAS_BIAS=correction_bias is not None,
        N_GROUP=n_group, TOPK_GROUP=topk_group, USE_PDL=pdl,
        TRIGGER=chain_pdl(x.device, T),  # the experts' kernel after it (pairs or census) is PDL-launched: chain_pdl
        BITONIC=route_bitonic("router"), num_warps=num_warps, **norm_args, **launch, **cfg,
    )
    return w_out, ids


def add_rmsnorm_router(h: torch.Tensor, residual: torch.Tensor | None, norm_weight: torch.Tensor, eps: float,
                       weight: torch.Tensor, k: int, scoring: str = "softmax", renormalize: bool = True, *,
                       offset: bool = False, **routing) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """`add_rmsnorm` (the post-attention norm) and `router` in one launch: (x, new_residual, topk_weights, topk_ids).

    Every program of the router normalises the rows itself (a few KB from L2) instead of waiting for a norm kernel's
    launch to end: one dependent launch fewer per MoE layer in the decode chain. h, residual [T, H] (residual may be
    None), norm_weight [H] of h's dtype, contiguous; the rest as `router`. The casting is `add_rmsnorm`'s; its sum of
    squares may round in another order than the norm kernel's (a different reduction layout)."""
    if h.dim() != 2:
        raise ValueError(f"add_rmsnorm_router: h must be [T, H], got {tuple(h.shape)}")
    if residual is not None and (residual.shape != h.shape or residual.dtype != h.dtype or residual.device != h.device):
        raise ValueError(f"add_rmsnorm_router: residual is {tuple(residual.shape)} {residual.dtype}; expected h's "
                         f"{tuple(h.shape)} {h.dtype}")
    if norm_weight.shape != (h.shape[1],) or norm_weight.dtype != h.dtype or norm_weight.stride(0) != 1:
        raise ValueError(f"add_rmsnorm_router: norm_weight must be [{h.shape[1]}] {h.dtype}, contiguous; got "
                         f"{tuple(norm_weight.shape)} {norm_weight.dtype}")
    if h.stride(1) != 1 or (residual is not None and residual.stride(1) != 1):
        raise ValueError("add_rmsnorm_router: h and residual must be contiguous in their last dimension")
    x = torch.empty_like(h, memory_format=torch.contiguous_format)
    new_res = torch.empty_like(x) if residual is not None else h
    w, ids = router(x, weight, k, scoring, renormalize,
                    norm=(h, residual, norm_weight, eps, offset, x, new_res if residual is not None else None),
                    **routing)
    return x, new_res, w, ids


def check_router_args(x: torch.Tensor, weight: torch.Tensor) -> None:
    if x.dim() != 2 or weight.dim() != 2 or weight.shape[1] != x.shape[1]:
        raise ValueError(f"router: x must be [T, H] and weight [E, H] with the same H; got {tuple(x.shape)} and "
                         f"{tuple(weight.shape)}")
    if weight.dtype != x.dtype or weight.device != x.device:
        raise ValueError(f"router: weight is {weight.dtype} on {weight.device}, x {x.dtype} on {x.device}")
    if x.stride(1) != 1 or weight.stride(1) != 1:
        raise ValueError("router: x and weight must be contiguous in their last dimension")
