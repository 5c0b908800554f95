"""MoE ops: routing and the fused expert MLP. References here; Triton kernels in `moelab.kernels`.

Weight layout (Hugging Face transformers 5, as it keeps experts in memory):
    w13[E, 2I, H]  `gate_up_proj`: rows [0, I) are the gate projection, rows [I, 2I) the up projection
    w2[E, H, I]    `down_proj`
    expert e(x) = w2[e] @ (silu(w13[e, :I] @ x) * (w13[e, I:] @ x))
    moe(x)[t]   = sum_j topk_weights[t, j] * expert_{topk_ids[t, j]}(x[t])
                  (+ sigmoid(shared_gate · x[t]) * shared(x[t]) when a shared expert is given)
Casting rule (as transformers computes in bf16/fp16): the activation silu(gate)*up is rounded to the
input dtype before the down projection; everything else accumulates in fp32; the output is rounded once.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from moelab import ops

SCORINGS = ("softmax", "topk_softmax", "sigmoid")


# ----------------------------------------------------------------------------------------------------
# References (plain torch, fp32)

def route_reference(
    router_logits: torch.Tensor,
    k: int,
    scoring: str = "softmax",
    renormalize: bool = True,
    *,
    correction_bias: torch.Tensor | None = None,
    n_group: int = 1,
    topk_group: int = 1,
    scaling: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k routing. Returns (topk_weights[T, k] fp32, topk_ids[T, k] int32).

    scoring="softmax":      p = softmax(logits); top-k of p; renormalise to sum 1 if `renormalize`
                            (Qwen2/3-MoE with norm_topk_prob, Mixtral, OLMoE without it).
    scoring="topk_softmax": top-k of the logits, then softmax over those k (gpt-oss).
    scoring="sigmoid":      s = sigmoid(logits); choice = s + correction_bias; experts in `n_group`
                            groups, each group scored by the sum of its top-2 choices, the best
                            `topk_group` groups kept; top-k of choice among them; weights = s at those
                            experts, renormalised if `renormalize`, times `scaling` (DeepSeek-V3).
    Ties go to the lower expert index (as torch.topk does on these inputs).
    """
    _check_route_args(router_logits, k, scoring, correction_bias, n_group, topk_group)
    logits = router_logits.float()
    T, E = logits.shape
    if scoring == "softmax":
        p = torch.softmax(logits, dim=-1)
        w, ids = _topk_low_index(p, k)
        if renormalize:
            w = w / w.sum(-1, keepdim=True)
    elif scoring == "topk_softmax":
        v, ids = _topk_low_index(logits, k)
        w = torch.softmax(v, dim=-1)
    else:
        s = torch.sigmoid(logits)
        choice = s + (correction_bias.float() if correction_bias is not None else 0.0)
        if n_group > 1:
            g = choice.view(T, n_group, E // n_group)
            gscore = g.topk(2, dim=-1).values.sum(-1)  # [T, n_group]
            _, gids = _topk_low_index(gscore, topk_group)
            keep = torch.zeros(T, n_group, dtype=torch.bool, device=logits.device)
            keep.scatter_(1, gids.long(), True)
            choice = choice.masked_fill(~keep.repeat_interleave(E // n_group, dim=1), float("-inf"))
        _, ids = _topk_low_index(choice, k)
        w = s.gather(1, ids.long())
        if renormalize:
            w = w / w.sum(-1, keepdim=True)
        w = w * scaling
    return w.float().contiguous(), ids.to(torch.int32).contiguous()


def router_reference(
    x: torch.Tensor,
    weight: torch.Tensor,
    k: int,
    scoring: str = "softmax",
    renormalize: bool = True,
    *,
    correction_bias: torch.Tensor | None = None,
    n_group: int = 1,
    topk_group: int = 1,
    scaling: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The router: logits = x · weightᵀ in x's dtype (transformers' router Linear), then `route_reference`.

    x [T, H], weight [E, H]. Returns (topk_weights[T, k] fp32, topk_ids[T, k] int32).
    """
    from moelab.kernels.router import check_router_args

    check_router_args(x, weight)
    logits = (x.float() @ weight.float().t()).to(x.dtype)
    return route_reference(logits, k, scoring, renormalize, correction_bias=correction_bias, n_group=n_group,
                           topk_group=topk_group, scaling=scaling)


def _topk_low_index(v: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k with ties to the lower index: a stable descending sort, whatever the backend does."""
    order = torch.sort(v, dim=-1, descending=True, stable=True).indices[:, :k]
    return v.gather(1, order), order


def fused_moe_reference(
    x: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    shared: tuple[torch.Tensor, torch.Tensor, torch.Tensor | None] | None = None,
) -> torch.Tensor:
    """The MoE block of the module docstring, in fp32; x[T, H] -> [T, H] in x's dtype.

    Loops over the distinct experts hit (not over T·k pairs), so it stays cheap at real shapes.
    shared = (shared_w13[2Is, H], shared_w2[H, Is], shared_gate[1, H] or None).
    """
    check_moe_args(x, w13, w2, topk_weights, topk_ids, shared)
    T, H = x.shape
    I = w2.shape[2]
    xf = x.float()
    out = torch.zeros(T, H, dtype=torch.float32, device=x.device)
    ids = topk_ids.long()
    for e in torch.unique(ids).tolist():
        tok, slot = (ids == e).nonzero(as_tuple=True)
        out.index_add_(0, tok, _expert(xf[tok], w13[e], w2[e], I, x.dtype) * topk_weights[tok, slot, None].float())
    if shared is not None:
        sw13, sw2, sgate = shared
        y = _expert(xf, sw13, sw2, sw2.shape[1], x.dtype)
        if sgate is not None:
            y = y * torch.sigmoid(xf @ sgate.float().t())
        out += y
    return out.to(x.dtype)


def _expert(xf: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, I: int, act_dtype: torch.dtype) -> torch.Tensor:
    gu = xf @ w13.float().t()
    act = (F.silu(gu[:, :I]) * gu[:, I:]).to(act_dtype).float()
    return act @ w2.float().t()


# ----------------------------------------------------------------------------------------------------
# Argument checks shared by the reference and the kernels: a clear error, never a wrong answer.

def _check_route_args(logits, k, scoring, bias, n_group, topk_group) -> None:
    if logits.dim() != 2:
        raise ValueError(f"router_logits must be [T, E], got shape {tuple(logits.shape)}")
    E = logits.shape[1]
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {SCORINGS}, not {scoring!r}")
    if not 1 <= k <= E:
        raise ValueError(f"k must be in [1, E={E}], got {k}")
    if bias is not None and tuple(bias.shape) != (E,):
        raise ValueError(f"correction_bias must be [E={E}], got shape {tuple(bias.shape)}")
    if n_group < 1 or E % n_group:
        raise ValueError(f"n_group={n_group} must divide E={E}")
    if n_group > 1 and not (1 <= topk_group <= n_group and k <= topk_group * (E // n_group)):
        raise ValueError(f"topk_group={topk_group} must be in [1, n_group={n_group}] and keep at least k={k} experts")
    if n_group > 1 and E // n_group < 2:
        raise ValueError(f"grouped routing needs at least 2 experts per group (E={E}, n_group={n_group})")


def check_moe_args(x, w13, w2, topk_weights, topk_ids, shared=None, check_ids: bool = True) -> None:
    """Shapes, dtypes, devices; and (if `check_ids`) expert ids in range, which costs a host sync —
    the kernels skip it under CUDA-graph capture and poison the output rows of out-of-range ids instead."""
    if x.dim() != 2:
        raise ValueError(f"x must be [T, H], got shape {tuple(x.shape)}")
    T, H = x.shape
    if w13.dim() != 3 or w2.dim() != 3:
        raise ValueError(f"w13 must be [E, 2I, H] and w2 [E, H, I]; got {tuple(w13.shape)} and {tuple(w2.shape)}")
    E, I2, H13 = w13.shape
    if I2 % 2:
        raise ValueError(f"w13's second dim must be 2I (gate rows then up rows), got {I2}")
    I = I2 // 2
    if H13 != H or tuple(w2.shape) != (E, H, I):
        raise ValueError(f"shape mismatch: x {tuple(x.shape)}, w13 {tuple(w13.shape)} (want [E, 2I, {H}]), "
                         f"w2 {tuple(w2.shape)} (want [{E}, {H}, {I}])")
    if topk_ids.dim() != 2 or topk_ids.shape[0] != T or tuple(topk_weights.shape) != tuple(topk_ids.shape):
        raise ValueError(f"topk_ids and topk_weights must both be [T={T}, k]; got {tuple(topk_ids.shape)} "
                         f"and {tuple(topk_weights.shape)}")
    if topk_ids.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"topk_ids must be int32 or int64, got {topk_ids.dtype}")
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"x must be fp32, fp16 or bf16, got {x.dtype}")
    if w13.dtype != x.dtype or w2.dtype != x.dtype:
        raise ValueError(f"dtypes differ: x {x.dtype}, w13 {w13.dtype}, w2 {w2.dtype}")
    if not topk_weights.is_floating_point():
        raise ValueError(f"topk_weights must be floating point, got {topk_weights.dtype}")
    tensors = {"x": x, "w13": w13, "w2": w2, "topk_weights": topk_weights, "topk_ids": topk_ids}
    if shared is not None:
        if len(shared) != 3:
            raise ValueError("shared must be (shared_w13, shared_w2, shared_gate or None)")
        sw13, sw2, sgate = shared
        if sw13.dim() != 2 or sw13.shape[1] != H or sw13.shape[0] % 2 or tuple(sw2.shape) != (H, sw13.shape[0] // 2):
            raise ValueError(f"shared expert must be w13 [2Is, {H}] and w2 [{H}, Is]; got {tuple(sw13.shape)} "
                             f"and {tuple(sw2.shape)}")
        if sgate is not None and tuple(sgate.shape) != (1, H):
            raise ValueError(f"shared_gate must be [1, {H}], got {tuple(sgate.shape)}")
        if sw13.dtype != x.dtype or sw2.dtype != x.dtype or (sgate is not None and sgate.dtype != x.dtype):
            raise ValueError("shared expert weights must have x's dtype")
        tensors.update(shared_w13=sw13, shared_w2=sw2)
        if sgate is not None:
            tensors["shared_gate"] = sgate
    dev = x.device
    for name, t in tensors.items():
        if t.device != dev:
            raise ValueError(f"{name} is on {t.device}, x on {dev}: all must be on one device")
    if check_ids and T > 0 and topk_ids.numel():
        lo, hi = torch.aminmax(topk_ids)  # one reduction, one host sync
        lo, hi = int(lo), int(hi)
        if lo < 0 or hi >= E:
            raise ValueError(f"topk_ids out of range [0, {E}): min {lo}, max {hi}")


# ----------------------------------------------------------------------------------------------------
# Kernel paths (public entry points; the launchers live in moelab.kernels)

def route(router_logits, k, scoring="softmax", renormalize=True, *, correction_bias=None, n_group=1,
          topk_group=1, scaling=1.0, out=None):
    """moelab's routing kernel: same contract as `route_reference`, one launch."""
    from moelab.kernels.route import route as _route
    return _route(router_logits, k, scoring, renormalize, correction_bias=correction_bias, n_group=n_group,
                  topk_group=topk_group, scaling=scaling, out=out)


def fused_moe(x, w13, w2, topk_weights, topk_ids, shared=None, *, out=None, validate=None, prefetch=None):
    """moelab's fused MoE: direct-routed at decode sizes, grouped tensor-core GEMMs at large T. validate: the ids'
    host check (a sync; on by default outside graph capture), off for ids a moelab routing kernel made. prefetch:
    the next kernel's weight, a hint for L2 (`kernels.moe.fused_moe`)."""
    from moelab.kernels.moe import fused_moe as _fused_moe
    return _fused_moe(x, w13, w2, topk_weights, topk_ids, shared=shared, out=out, validate=validate,
                      prefetch=prefetch)


def moe_block_reference(x, router_logits, w13, w2, k, renormalize=True, shared=None):
    """Softmax top-k routing then the experts: (out[T, H], topk_weights[T, k], topk_ids[T, k])."""
    w, ids = route_reference(router_logits, k, "softmax", renormalize)
    return fused_moe_reference(x, w13, w2, w, ids, shared), w, ids


def moe_block(x, router_logits, w13, w2, k, renormalize=True, shared=None, *, out=None):
    """moelab's routed MoE block: the route kernel, then `fused_moe` (two launches; kernels.moe.moe_block)."""
    from moelab.kernels.moe import moe_block as _moe_block
    return _moe_block(x, router_logits, w13, w2, k, renormalize, shared, out=out)


def router(x, weight, k, scoring="softmax", renormalize=True, **routing):
    """moelab's router: the logits GEMV and the routing in one launch (decode sizes, T ≤ 16); the keywords of
    `router_reference`."""
    from moelab.kernels.router import router as _router
    return _router(x, weight, k, scoring, renormalize, **routing)


def add_rmsnorm_router_reference(h, residual, norm_weight, eps, weight, k, scoring="softmax", renormalize=True, *,
                                 offset=False, **routing):
    """The post-attention norm, then the router: (x, new_residual, topk_weights, topk_ids)."""
    from moelab.ops.norm import add_rmsnorm_reference
    x, new_res = add_rmsnorm_reference(h, residual, norm_weight, eps, offset=offset)
    return (x, new_res, *router_reference(x, weight, k, scoring, renormalize, **routing))


def add_rmsnorm_router(h, residual, norm_weight, eps, weight, k, scoring="softmax", renormalize=True, **kw):
    """moelab's: the norm and the router in one launch (kernels.router.add_rmsnorm_router)."""
    from moelab.kernels.router import add_rmsnorm_router as _fused
    return _fused(h, residual, norm_weight, eps, weight, k, scoring, renormalize, **kw)


ops.register("route", route_reference, route, doc="top-k routing: softmax / topk_softmax / sigmoid grouped")
ops.register("add_rmsnorm_router", add_rmsnorm_router_reference, add_rmsnorm_router,
             doc="residual add + RMSNorm, then the router logits and top-k routing, one launch")
ops.register("router", router_reference, router, doc="router logits (x·Wᵀ in x's dtype) and top-k routing, one launch")
ops.register("moe_block", moe_block_reference, moe_block, doc="softmax routing + routed SwiGLU experts")
ops.register("fused_moe", fused_moe_reference, fused_moe, doc="routed SwiGLU experts with the weighted top-k sum")


# ----------------------------------------------------------------------------------------------------
# torch.library custom ops: torch.compile traces through them without a graph break (the kernels stay
# opaque to Inductor), and they are graph-capturable. `torch.ops.moelab.route` / `torch.ops.moelab.fused_moe`.

@torch.library.custom_op("moelab::route", mutates_args=())
def route_op(router_logits: torch.Tensor, k: int, scoring: str = "softmax", renormalize: bool = True,
             correction_bias: torch.Tensor | None = None, n_group: int = 1, topk_group: int = 1,
             scaling: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    w, ids = route(router_logits, k, scoring, renormalize, correction_bias=correction_bias, n_group=n_group,
                   topk_group=topk_group, scaling=scaling)
    return w, ids


@route_op.register_fake
def _route_fake(router_logits, k, scoring="softmax", renormalize=True, correction_bias=None, n_group=1,
                topk_group=1, scaling=1.0):
    T = router_logits.shape[0]
    return (router_logits.new_empty((T, k), dtype=torch.float32), router_logits.new_empty((T, k), dtype=torch.int32))


@torch.library.custom_op("moelab::fused_moe", mutates_args=())
def fused_moe_op(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, topk_weights: torch.Tensor,
                 topk_ids: torch.Tensor, shared_w13: torch.Tensor | None = None, shared_w2: torch.Tensor | None = None,
                 shared_gate: torch.Tensor | None = None) -> torch.Tensor:
    shared = (shared_w13, shared_w2, shared_gate) if shared_w13 is not None else None
    return fused_moe(x, w13, w2, topk_weights, topk_ids, shared)


@fused_moe_op.register_fake
def _fused_moe_fake(x, w13, w2, topk_weights, topk_ids, shared_w13=None, shared_w2=None, shared_gate=None):
    return torch.empty_like(x)
