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
whole logits row with `route`'s own code (`_route_row`: the same numerics, ties to the lower index) and
resets the counter, so no memset launch is needed.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moelab.kernels import cdiv, chain_pdl, counters, next_pow2, pdl_supported
from moelab.kernels.rmsnorm import _scaled
from moelab.kernels.route import _SCORING_CODE, _route_row
from moelab.ops.moe import _check_route_args

ROUTER_MAX_T = 16  # decode sizes: the [T, BLOCK_E, BLOCK_H] product is held in registers
# The engine uses the one-launch router up to FUSED_ROUTER_MAX_T tokens: its last arriver routes the tokens one
# after another, so at T=8 it took 17.7 µs against 8.0 for cuBLAS + `route`, while at T=1 it took 4.25 µs against
# more than 5.6 (H200, benchmarks/sweep_router.py, 2026-12-01 12:03). T=2..4 are unmeasured: kept to the measured win.
FUSED_ROUTER_MAX_T = 1


@triton.jit
def _router_kernel(
    x_ptr, w_ptr, bias_ptr, logits_ptr, tw_ptr, ids_ptr, cnt_ptr,  # x[T,H], W[E,H], bias[E], logits fp32 [T,E],
    #                                                                weights fp32 [T,K], ids int32 [T,K], counter
    res_ptr, nw_ptr, xo_ptr, ro_ptr,  # NORM only: residual [T,H], norm weight [H]; out: normed x, new residual [T,H]
    T, E, H, s_xt, s_we, scaling,
    s_rt, s_ot, SHARE, eps,  # NORM only: row strides of the residual and of both outputs; columns each program writes
    T_PAD: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr, N_PROG: tl.constexpr,
    K: tl.constexpr, K_PAD: tl.constexpr, E_PAD: tl.constexpr,
    SCORING: tl.constexpr, RENORM: tl.constexpr, HAS_BIAS: tl.constexpr,
    N_GROUP: tl.constexpr, TOPK_GROUP: tl.constexpr, USE_PDL: tl.constexpr,
    TRIGGER: tl.constexpr,  # release a PDL-launched next kernel (the experts) as each program starts
    NORM: tl.constexpr,  # x_ptr is the sublayer output h: x = RMSNorm(h + residual) · w here (`add_rmsnorm`'s numerics)
    OFFSET: tl.constexpr,  # NORM: the (1 + w) norm of Qwen3-Next
    SHARE_PAD: tl.constexpr,  # NORM: next power of two ≥ SHARE
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
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
    act_ty = x_ptr.dtype.element_ty
    if NORM:
        # Σ s² of every token (each program for all T rows: 4 KB per row from L2), s = h + residual rounded as
        # `add_rmsnorm` rounds it; the logits loop below recomputes s per chunk and scales it.
        ss = tl.zeros((T_PAD,), dtype=tl.float32)
        for h0 in range(0, H, BLOCK_H):
            offs_h = h0 + tl.arange(0, BLOCK_H)
            m2 = tmask[:, None] & (offs_h < H)[None, :]
            sv = _rounded_sum(x_ptr, res_ptr, offs_t, offs_h, s_xt, s_rt, m2, act_ty)
            ss += tl.sum(sv * sv, axis=1)
        rstd = tl.rsqrt(ss / H + eps)
        # This program's share of the columns goes out (a narrow tile of its own, so the stores stay vectors): the
        # experts read x, the next layer the residual.
        offs_s = pid * SHARE + tl.arange(0, SHARE_PAD)
        ms = tmask[:, None] & ((offs_s < (pid + 1) * SHARE) & (offs_s < H))[None, :]
        s_own = _rounded_sum(x_ptr, res_ptr, offs_t, offs_s, s_xt, s_rt, ms, act_ty)
        nw_own = tl.load(nw_ptr + offs_s, mask=offs_s < H, other=0.0).to(tl.float32)
        o_off = offs_t[:, None] * s_ot + offs_s[None, :]
        tl.store(xo_ptr + o_off, _scaled(s_own, rstd[:, None], nw_own[None, :], act_ty, OFFSET).to(act_ty), mask=ms)
        tl.store(ro_ptr + o_off, s_own.to(act_ty), mask=ms)
    acc = tl.zeros((T_PAD, BLOCK_E), dtype=tl.float32)
    for h0 in range(0, H, BLOCK_H):
        offs_h = h0 + tl.arange(0, BLOCK_H)
        hmask = offs_h < H
        m2 = tmask[:, None] & hmask[None, :]
        if NORM:
            sv = _rounded_sum(x_ptr, res_ptr, offs_t, offs_h, s_xt, s_rt, m2, act_ty)
            nw = tl.load(nw_ptr + offs_h, mask=hmask, other=0.0).to(tl.float32)
            x = _scaled(sv, rstd[:, None], nw[None, :], act_ty, OFFSET).to(act_ty)
        else:
            x = tl.load(x_ptr + offs_t[:, None] * s_xt + offs_h[None, :], mask=m2, other=0.0)  # [T_PAD, BLOCK_H]
        acc += tl.sum(x.to(tl.float32)[:, None, :] * w.to(tl.float32)[None, :, :], axis=2)
        nh = offs_h + BLOCK_H
        w = tl.load(w_ptr + offs_e[:, None] * s_we + nh[None, :], mask=emask[:, None] & (nh < H)[None, :],
                    other=0.0, eviction_policy="evict_first")  # the next chunk (all-masked after the last)
    logits = acc.to(x_ptr.dtype.element_ty).to(tl.float32)  # the router Linear's output dtype, as in transformers
    tl.store(logits_ptr + offs_t[:, None] * E + offs_e[None, :], logits, mask=tmask[:, None] & emask[None, :])
    tl.debug_barrier()  # every thread's stores precede the release below
    arrived = tl.atomic_add(cnt_ptr, 1, sem="acq_rel", scope="gpu")
    if arrived == N_PROG - 1:
        # Last to arrive: all logits are visible (acquire; its result is used, so the compiler keeps it).
        offs = tl.arange(0, E_PAD)
        valid = offs < E
        kk = tl.arange(0, K_PAD)
        for t in range(0, T):
            row = tl.load(logits_ptr + t * E + offs, mask=valid, other=-float("inf"), cache_modifier=".cg")
            vals, ids = _route_row(row, offs, valid, bias_ptr, scaling, K, K_PAD, E_PAD, SCORING, RENORM, HAS_BIAS,
                                   N_GROUP, TOPK_GROUP)
            tl.store(tw_ptr + t * K + kk, vals, mask=kk < K)
            tl.store(ids_ptr + t * K + kk, ids, mask=kk < K)
        tl.store(cnt_ptr, 0)


@triton.jit
def _rounded_sum(h_ptr, r_ptr, offs_t, offs_h, s_ht, s_rt, mask, act_ty):
    """fp32 of (h + residual) rounded to the activation dtype, as `add_rmsnorm` stores the new residual."""
    hv = tl.load(h_ptr + offs_t[:, None] * s_ht + offs_h[None, :], mask=mask, other=0.0).to(tl.float32)
    rv = tl.load(r_ptr + offs_t[:, None] * s_rt + offs_h[None, :], mask=mask, other=0.0).to(tl.float32)
    return (hv + rv).to(act_ty).to(tl.float32)


def router_config(T: int, E: int, H: int, block_e: int = 1, num_warps: int = 1) -> dict:
    """BLOCK_E experts per program (E/BLOCK_E programs), BLOCK_H so the [T, BLOCK_E, BLOCK_H] product stays near 8K
    elements. One expert per program on one warp: the best of benchmarks/sweep_router.py on the H200 (2026-12-01
    12:03, Qwen3-30B-A3B T=1: 4.25 µs; 2 experts / 4 warps, the first guess, 5.36 µs) — one warp keeps the last
    arriver's reductions inside a warp."""
    t_pad = next_pow2(T)
    block_h = max(16, min(next_pow2(H), 8192 // (t_pad * block_e)))
    return dict(BLOCK_E=block_e, BLOCK_H=block_h, num_warps=num_warps)


def router(x: torch.Tensor, weight: torch.Tensor, k: int, scoring: str = "softmax", renormalize: bool = True, *,
           correction_bias: torch.Tensor | None = None, n_group: int = 1, topk_group: int = 1, scaling: float = 1.0,
           config: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Router logits and top-k routing in one launch; contract as `moelab.ops.moe.router_reference`.

    x [T, H] (T ≤ ROUTER_MAX_T), weight [E, H]. Returns (topk_weights [T, k] fp32, topk_ids [T, k] int32).
    """
    check_router_args(x, weight)
    return _launch(x, weight, k, scoring, renormalize, correction_bias, n_group, topk_group, scaling, config, None)


def norm_router(h: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float, weight: torch.Tensor,
                k: int, scoring: str = "softmax", renormalize: bool = True, *, offset: bool = False,
                correction_bias: torch.Tensor | None = None, n_group: int = 1, topk_group: int = 1,
                scaling: float = 1.0, config: dict | None = None):
    """`add_rmsnorm(h, residual, norm_weight, eps, offset)` and `router` of its output, in ONE launch: every router
    program normalises the T rows itself (they are 4 KB each at hidden 2048, from L2) and writes its share of the
    columns of x and of the new residual. Returns (x [T, H], new_residual [T, H], topk_weights, topk_ids).

    Removes the norm's kernel from the decode step's chain (batch 1: 1.43 µs advance per norm, trace-decode-…T171907);
    its price is the norm's reduction in each router program before the logits. The values are `add_rmsnorm`'s (the
    same casting helper) up to the order of the Σh² reduction (one rounding of rstd). An A/B until measured: the
    engine uses it under $MOELAB_NORM_ROUTER=1."""
    check_router_args(h, weight)
    if residual is None or residual.shape != h.shape or residual.dtype != h.dtype or residual.device != h.device:
        raise ValueError(f"norm_router: residual must be {tuple(h.shape)} {h.dtype} on {h.device}, like h; got "
                         f"{None if residual is None else (tuple(residual.shape), residual.dtype, residual.device)}")
    if residual.stride(1) != 1:
        raise ValueError("norm_router: residual must be contiguous in its last dimension")
    H = h.shape[1]
    if norm_weight.shape != (H,) or norm_weight.dtype != h.dtype or norm_weight.device != h.device:
        raise ValueError(f"norm_router: norm_weight must be ({H},) {h.dtype} on {h.device} (the activation dtype: the "
                         f"normed x feeds a {weight.dtype} router); got {tuple(norm_weight.shape)} {norm_weight.dtype}")
    norm = (residual, norm_weight.contiguous(), float(eps), bool(offset))
    return _launch(h, weight, k, scoring, renormalize, correction_bias, n_group, topk_group, scaling, config, norm)


def _launch(x, weight, k, scoring, renormalize, correction_bias, n_group, topk_group, scaling, config, norm):
    T, H = x.shape
    E = weight.shape[0]
    _check_route_args(torch.empty(T, E, device="meta"), k, scoring, correction_bias, n_group, topk_group)
    if T > ROUTER_MAX_T:
        raise ValueError(f"router: the fused router kernel is for decode sizes (T ≤ {ROUTER_MAX_T}), got T={T}; "
                         "use a GEMM and `route` for prefill")
    w_out = torch.empty(T, k, dtype=torch.float32, device=x.device)
    ids = torch.empty(T, k, dtype=torch.int32, device=x.device)
    if norm is not None:
        x_out, r_out = torch.empty(T, H, dtype=x.dtype, device=x.device), torch.empty(T, H, dtype=x.dtype, device=x.device)
    if T == 0:
        return (w_out, ids) if norm is None else (x_out, r_out, w_out, ids)
    e_pad = next_pow2(E)
    if n_group > 1 and e_pad != E:
        raise ValueError(f"grouped routing needs a power-of-two expert count, got E={E}")
    pick = {"BLOCK_E": "block_e", "num_warps": "num_warps"}
    cfg = router_config(T, E, H, **{pick[k_]: v for k_, v in (config or {}).items() if k_ in pick})
    cfg.update(config or {})
    num_warps = cfg.pop("num_warps")
    n_prog = cdiv(E, cfg["BLOCK_E"])
    logits = torch.empty(T, E, dtype=torch.float32, device=x.device)
    # PDL: the router weight streams while the kernel before it runs (kernels.pdl_supported). With NORM everything
    # else — h, the residual and the norm weight (a copy the launcher may just have made) — is read after gdc_wait.
    pdl = pdl_supported(x.device)
    launch = {"launch_pdl": True} if pdl else {}
    if norm is None:
        res, nw, xo, ro, s_rt, s_ot, share, eps, offset = x, x, x, x, 0, 0, 0, 0.0, False
    else:
        res, nw, eps, offset = norm
        xo, ro, s_rt, s_ot, share = x_out, r_out, res.stride(0), H, cdiv(H, n_prog)
    _router_kernel[(n_prog,)](
        x, weight, correction_bias if correction_bias is not None else logits, logits, w_out, ids,
        counters(x.device, 1, "router"), res, nw, xo, ro, T, E, H, x.stride(0), weight.stride(0), float(scaling),
        s_rt, s_ot, share, eps,
        T_PAD=next_pow2(T), N_PROG=n_prog, K=k, K_PAD=next_pow2(k), E_PAD=e_pad,
        SCORING=_SCORING_CODE[scoring], RENORM=bool(renormalize), HAS_BIAS=correction_bias is not None,
        N_GROUP=n_group, TOPK_GROUP=topk_group, USE_PDL=pdl,
        TRIGGER=chain_pdl(x.device, T),  # the pair kernel after it is PDL-launched (kernels.chain_pdl)
        NORM=norm is not None, OFFSET=offset, SHARE_PAD=max(1, next_pow2(share)), num_warps=num_warps, **launch, **cfg,
    )
    return (w_out, ids) if norm is None else (x_out, r_out, w_out, ids)


def check_router_args(x: torch.Tensor, weight: torch.Tensor) -> None:
    if x.dim() != 2 or weight.dim() != 2 or weight.shape[1] != x.shape[1]:
        raise ValueError(f"router: x must be [T, H] and weight [E, H] with the same H; got {tuple(x.shape)} and "
                         f"{tuple(weight.shape)}")
    if weight.dtype != x.dtype or weight.device != x.device:
        raise ValueError(f"router: weight is {weight.dtype} on {weight.device}, x {x.dtype} on {x.device}")
    if x.stride(1) != 1 or weight.stride(1) != 1:
        raise ValueError("router: x and weight must be contiguous in their last dimension")
