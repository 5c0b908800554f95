"""`fused_moe`: the one public launcher for the MoE expert block; picks the decode or the grouped path.

T ≤ `pairs_max_t(I)` (4; 8 and 16 for narrower experts): `moe_pairs`, a GEMV slot per (token, expert) pair.
Small T (decode): `moe_decode` — one launch, a census of distinct experts, each read once for all its
tokens on tensor cores. Both direct-routed and deterministic.
Large T (prefill): `moe_grouped` — tokens grouped by expert, tensor-core GEMMs, SwiGLU in the epilogue.
The switches are at `pairs_max_t(I)` tokens and `DECODE_MAX_PAIRS` routed (token, expert) pairs.
"""

from __future__ import annotations

import torch

from moelab.kernels import check_device, env_int
from moelab.ops.moe import check_moe_args

# Census-decode vs grouped, in T·k pairs. Measured on the H200 (bench-moe, 2026-12-01, Qwen3-30B-A3B): census
# T=16 (128 pairs) 80 % of floor; grouped T=64 66 %. At T=32 (256 pairs) the two tie alone (335 vs 338 µs,
# sweep-moe-census-vs-grouped-t32-…T1412.json) and the census loses end to end at batch 32 (19.9 against
# 18.3 ms per step, bench-decode-…T141258), so the boundary stays at 128 pairs.
# The census costs every program a histogram of the T·k ids over E, and the grid is sized for min(E, T·k) slots:
# both keep it to decode sizes.
DECODE_MAX_PAIRS = 128
# At T=1 the k experts are distinct, so pair slots read each byte once; beyond, pairs sharing an expert
# re-read it, yet the GEMV pair kernel still won at T=2 (43 vs 61 µs) and T=4 (78 vs 87 µs), Qwen3-30B-A3B,
# H200 sweeps of 2026-12-01 (benchmarks/results/sweep-moe-*.json); the census kernel wins from T=8.
PAIRS_MAX_T = 4
# (A T=1 kernel without partials, `moe_t1`, ran the tp=4 shard without a shared expert until session 15: there the
# pair kernel's narrow tiles now win, 13.0 against 15.7 µs with routing, H200, sweep-moe-block-shard-…T2134; it was
# removed. Its phase 2 came back in session 42 inside the pair kernel, with that kernel's phase 1 and one vector poll:
# `moe_pairs.pairs_direct`.)
# Narrower experts keep the pair kernel longer. Measured side by side, kernels alone (sweep_moe.py --mode decode,
# H100, session 28, results/h100/sweep-moe-census-pairs-…T0404): the tp=4 shard with its shared expert (I=128) T=8
# pairs 39.8 against the census's 65.2 µs, T=16 73.6 against 100.3; Qwen3.5 (I=512) T=8 137.4 against 152.4 (the best
# census tile), T=16 the census ahead (253.5 against 274.4); Qwen3-30B-A3B (I=768) the census ahead at both. (The
# census with 16-row phase-1 blocks, twice its phase-1 programs at the shard, tied its 32-row ones: 65.8 µs.)
# Qwen3.5 batch 8 end to end on that H100: 8.74 -> 8.50 ms a token (h100/ab-chain-…T040945). On the H200 (session 29):
# `bench moe` at the shard T=8 60.5 -> 35.5 µs (bench-moe-…T044105), Qwen3.5 T=8 113 -> 106 (…T044025); Qwen3.5 batch 8
# 6.79 -> 6.56 ms a token against MOELAB_PAIRS_MAX_T=4 in one process (ab-chain-…T044623).
PAIRS_MAX_T_BY_I = ((128, 16), (512, 8))  # (largest I, largest T for the pair kernel); wider: PAIRS_MAX_T


def pairs_max_t(I: int) -> int:
    """The largest T that takes the pair kernel at expert width I ($MOELAB_PAIRS_MAX_T overrides it: an A/B switch,
    read at launch, so at a graph's capture)."""
    forced = env_int("MOELAB_PAIRS_MAX_T", 0)
    if forced:
        return forced
    return next((t for i_max, t in PAIRS_MAX_T_BY_I if I <= i_max), PAIRS_MAX_T)


PATHS = ("pairs", "decode", "grouped")


def _checked(x, w13, w2, topk_weights, topk_ids, shared, out, check_ids: bool) -> torch.Tensor:
    """The kernels' argument checks (one-line errors naming what is wrong); returns out, made if None."""
    check_moe_args(x, w13, w2, topk_weights, topk_ids, shared, check_ids=check_ids)
    check_device(x, "fused_moe: x")
    T, H = x.shape
    for name, t in (("x", x), ("w13", w13), ("w2", w2)):
        if t.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in its last dimension (stride {t.stride()})")
    if not (w13.is_contiguous() and w2.is_contiguous()):
        raise ValueError("w13 and w2 must be contiguous (the kernels index experts by id with fixed strides)")
    if shared is not None and not all(t is None or t.is_contiguous() for t in shared):
        raise ValueError("shared expert weights must be contiguous")
    if out is None:
        out = torch.empty(T, H, dtype=x.dtype, device=x.device)
    elif out.shape != (T, H) or out.dtype != x.dtype or out.device != x.device or out.stride(-1) != 1:
        raise ValueError(f"out must be [{T}, {H}] {x.dtype} on {x.device}, contiguous in its last dimension")
    return out


def fused_moe(x, w13, w2, topk_weights, topk_ids, shared=None, *, out=None, validate: bool | None = None,
              path: str | None = None, prefetch: torch.Tensor | None = None):
    """Fused routed-SwiGLU MoE; contract as `moelab.ops.moe.fused_moe_reference`.

    validate: check expert ids on the host (a sync). Default: yes, except under CUDA-graph capture, where
    an out-of-range id instead turns its token's output row into NaN inside the kernel.
    path: force one of PATHS (benchmarks and tests); default by `pairs_max_t` and `DECODE_MAX_PAIRS`.
    prefetch: the next kernel's weight (the engine's next layer's first projection), which the pair kernel may ask L2
    for while it waits for the router (`moe_pairs.pairs_next_pf_bytes`); a hint, nothing else changes.
    """
    capturing = x.is_cuda and torch.cuda.is_current_stream_capturing()
    out = _checked(x, w13, w2, topk_weights, topk_ids, shared, out, (not capturing) if validate is None else validate)
    T = x.shape[0]
    if T == 0:
        return out
    pairs = T * topk_ids.shape[1]
    if path is None:
        if T <= pairs_max_t(w2.shape[2]):
            path = "pairs"
        else:
            path = "decode" if pairs <= DECODE_MAX_PAIRS else "grouped"
    if path == "pairs":
        from moelab.kernels.moe_pairs import moe_pairs
        return moe_pairs(x, w13, w2, topk_weights, topk_ids, shared, out=out, prefetch=prefetch)
    if path == "decode":
        from moelab.kernels.moe_decode import moe_decode
        return moe_decode(x, w13, w2, topk_weights, topk_ids, shared, out=out)
    if path == "grouped":
        from moelab.kernels.moe_grouped import moe_grouped
        return moe_grouped(x, w13, w2, topk_weights, topk_ids, shared, out=out)
    raise ValueError(f"path must be one of {PATHS}, not {path!r}")


def moe_block(x, router_logits, w13, w2, k: int, renormalize: bool = True, shared=None, *, out=None):
    """Softmax top-k routing and the experts: (out[T, H], topk_weights[T, k], topk_ids[T, k]).

    Two launches: `route`, then `fused_moe`, without `fused_moe`'s host check of the ids (the route kernel made
    them). Routing inside the pair kernel (one launch) was measured slower at every shape (H200, 2026-12-01:
    Qwen3-30B-A3B T=1 32.3 vs 30.4 µs, T=4 103 vs 78 µs; docs/worklog.md), likely because each of its ~800
    programs computed a serial top-k before its first weight load. At T=1 under the pair kernel's DIRECT phase 2,
    it routes inside it again, with the bitonic top-k (`moe_pairs.PAIRS_ROUTE_IN`: one launch; the tp=4 shard
    10.93 → 10.36 µs on an H100; $MOELAB_PAIRS_ROUTE_IN=0 turns it off).
    """
    from moelab.kernels.route import route
    from moelab.ops.moe import _check_route_args

    if router_logits.dim() != 2 or router_logits.shape[0] != x.shape[0] or router_logits.shape[1] != w13.shape[0]:
        raise ValueError(f"router_logits must be [T={x.shape[0]}, E={w13.shape[0]}], got {tuple(router_logits.shape)}")
    _check_route_args(router_logits, k, "softmax", None, 1, 1)
    if router_logits.device != x.device:
        raise ValueError(f"router_logits is on {router_logits.device}, x on {x.device}: both must be on one device")
    from moelab.kernels.moe_pairs import moe_pairs, pairs_route_in
    IS = shared[1].shape[-1] if shared is not None and len(shared) == 3 and shared[1].dim() == 2 else 0
    if x.shape[0] == 1 and router_logits.stride(-1) == 1 and pairs_route_in(1, w2.shape[-1], IS):
        # One launch: the pair kernel routes the token itself (moe_pairs.PAIRS_ROUTE_IN).
        w = torch.empty(1, k, dtype=torch.float32, device=x.device)
        ids = torch.empty(1, k, dtype=torch.int32, device=x.device)
        out = _checked(x, w13, w2, w, ids, shared, out, False)
        check_device(router_logits, "moe_block: router_logits")
        return moe_pairs(x, w13, w2, w, ids, shared, out=out, logits=router_logits, renormalize=renormalize), w, ids
    w, ids = route(router_logits, k, "softmax", renormalize)
    # The ids are the route kernel's own, in range by construction: no host check (a sync per call, which in eager
    # use leaves the GPU idle while the next launches are prepared; the kernels still NaN a token with a bad id).
    return fused_moe(x, w13, w2, w, ids, shared, out=out, validate=False), w, ids
