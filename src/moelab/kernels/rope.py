"""Per-head q/k RMSNorm fused with rotary embedding, q and k in one launch (Triton).

Each program takes one token and a block of heads (of q or of k): it loads the heads' rows, normalises each head
over head_dim, multiplies by the norm weight, rotates the first `rotary_dim` dims (NeoX "rotate_half": dim i pairs
with i ± rotary_dim/2) and stores. cos/sin are computed in-kernel: `freqs = float(position) · inv_freq` in fp32,
exactly HF's product, with `inv_freq` from a small cached fp32 table built by torch the way HF builds it; cos and
sin of that fp32 angle come from `tl.cos`/`tl.sin`, which lower to libdevice's `__nv_cosf`/`__nv_sinf` (full range
reduction, not `cos.approx`: checked in the sm_90 PTX from Triton 3.9), so angles of 10⁵ rad at long context stay
accurate. (A precomputed cos/sin cache would be bit-exact with HF too, but costs max_positions × rotary_dim
memory and a host-known maximum position; the in-kernel form needs neither.)

Every rounding HF does in the activation dtype is repeated here in the same order (normalised value, weight product,
cos/sin, q·cos, rotate_half(q)·sin, their sum), so the kernel differs from the reference only where rsqrt or cos/sin
differ in their last fp32 bit.

Napkin math (T tokens, Hq + Hk heads of D, activation b bytes): bytes = 2·T·(Hq+Hk)·D·b (read + write) + 2·D·w;
FLOPs ≈ 12·T·(Hq+Hk)·D plus T·rotary_dim cos/sin per program. Qwen3-30B-A3B at T=1: 36 heads × 128 × 2 B × 2 = 18 KB
— pure latency; the win is one launch instead of HF's ~20 small ops.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moelab.kernels import cdiv, check_device, next_pow2

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_INV_FREQ: dict[tuple[float, int, torch.device], torch.Tensor] = {}


@triton.jit
def _rope_consts(w_rows, inv_freq_ptr, pos, D, HALF, ty_ptr, BLOCK_D: tl.constexpr):
    """What `_norm_rope_rows` needs besides the rows themselves, none of it written by any kernel: the norm weight
    of each row (w_rows[r], and at the rotate_half partner columns) and cos/sin at position `pos` (HF's fp32 angle
    `pos · inv_freq`, cast to ty_ptr's element type). A kernel launched with PDL computes them before its
    `gdc_wait`, off the chain that starts when the rows arrive."""
    out_ty = ty_ptr.dtype.element_ty
    cols = tl.arange(0, BLOCK_D)
    rot = 2 * HALF
    partner = tl.where(cols < HALF, cols + HALF, tl.where(cols < rot, cols - HALF, cols))
    wm = (cols < D)[None, :]
    w = tl.load(w_rows[:, None] + cols[None, :], mask=wm, other=0.0).to(tl.float32)
    wp = tl.load(w_rows[:, None] + partner[None, :], mask=wm, other=0.0).to(tl.float32)
    j = tl.where(cols < HALF, cols, cols - HALF)
    ang = pos * tl.load(inv_freq_ptr + j, mask=cols < rot, other=0.0)  # HF's fp32 product, same rounding
    c = tl.cos(ang).to(out_ty).to(tl.float32)[None, :]
    s = tl.sin(ang).to(out_ty).to(tl.float32)[None, :]
    return w, wp, c, s


@triton.jit
def _norm_rope_rows(
    row_ptrs, rmask, w, wp, c, s, D, HALF, eps, s_d, ty_ptr,
    NORM: tl.constexpr, OFFSET: tl.constexpr, BLOCK_D: tl.constexpr,
):
    """Rows starting at row_ptrs[r] (one head each, elements s_d apart; the rows may come from different tensors of
    one dtype): RMSNorm over D with weights w/wp (if NORM), then RoPE on the first 2·HALF dims with c/s
    (`_rope_consts`). Returns [R, BLOCK_D] fp32 holding values already rounded to ty_ptr's element type (the output
    dtype); columns ≥ D and rows outside rmask are garbage. Shared by the q/k prologue kernel below and the decode
    attention kernel that fuses it (`kernels.attention`), which puts its q heads and its k head in one tile: one
    layout for every per-column vector."""
    act_ty = row_ptrs.dtype.element_ty
    out_ty = ty_ptr.dtype.element_ty
    cols = tl.arange(0, BLOCK_D)
    rot = 2 * HALF
    # rotate_half partner of dim i (i < rotary_dim): i + half in the first half, i - half in the second.
    partner = tl.where(cols < HALF, cols + HALF, tl.where(cols < rot, cols - HALF, cols))
    m = rmask[:, None] & (cols[None, :] < D)
    base = row_ptrs[:, None]
    x = tl.load(base + cols[None, :] * s_d, mask=m, other=0.0).to(tl.float32)
    xp = tl.load(base + partner[None, :] * s_d, mask=m, other=0.0).to(tl.float32)

    if NORM:
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / D + eps)[:, None]
        if OFFSET:  # Qwen3-Next: (n · (1 + w)) in fp32, one rounding
            y = (x * rstd * (1.0 + w)).to(out_ty).to(tl.float32)
            yp = (xp * rstd * (1.0 + wp)).to(out_ty).to(tl.float32)
        else:  # Qwen3: round n to the activation dtype, then the weight product, rounded again
            y = ((x * rstd).to(act_ty).to(tl.float32) * w).to(out_ty).to(tl.float32)
            yp = ((xp * rstd).to(act_ty).to(tl.float32) * wp).to(out_ty).to(tl.float32)
    else:  # RoPE only: x is already in the activation dtype
        y = x
        yp = xp

    sign = tl.where(cols < HALF, -1.0, 1.0)[None, :]
    a = (y * c).to(out_ty).to(tl.float32)
    b = (sign * yp * s).to(out_ty).to(tl.float32)
    return tl.where(cols[None, :] < rot, a + b, y)


@triton.jit
def _norm_rope_heads(
    x_ptr, w_ptr, o_ptr, pos_ptr, inv_freq_ptr,
    t, h0, n_heads, D, HALF, eps,
    s_t, s_h, s_d, o_t, o_h, o_d, spt,
    NORM: tl.constexpr, OFFSET: tl.constexpr, BLOCK_HEADS: tl.constexpr, BLOCK_D: tl.constexpr,
):
    """Heads h0 .. h0+BLOCK_HEADS-1 of token t: RMSNorm over D (if NORM), then RoPE on the first 2·HALF dims."""
    heads = h0 + tl.arange(0, BLOCK_HEADS)
    cols = tl.arange(0, BLOCK_D)
    hmask = heads < n_heads
    pos = tl.load(pos_ptr + t * spt).to(tl.float32)
    w, wp, c, s = _rope_consts(w_ptr + heads * 0, inv_freq_ptr, pos, D, HALF, o_ptr, BLOCK_D)
    res = _norm_rope_rows(x_ptr + t * s_t + heads * s_h, hmask, w, wp, c, s, D, HALF, eps, s_d, o_ptr,
                          NORM, OFFSET, BLOCK_D)
    m = hmask[:, None] & (cols[None, :] < D)
    tl.store(o_ptr + t * o_t + heads[:, None] * o_h + cols[None, :] * o_d, res.to(o_ptr.dtype.element_ty), mask=m)


@triton.jit
def _qk_norm_rope_kernel(
    # pointers
    q_ptr, k_ptr, qw_ptr, kw_ptr, pos_ptr, inv_freq_ptr, qo_ptr, ko_ptr,
    v_ptr, vc_ptr,  # CACHE only: v [T, Hk, D] in, v_cache [T, Hk, S_MAX, D] out (ko_ptr is then k_cache)
    # sizes
    HQ, HK, D, HALF, eps, S_MAX,
    # strides: q, k, q_out, k_out as (token, head, dim); positions (token); CACHE: k_out's position stride,
    # v (token, head, dim) and v_cache (sequence, head, position, dim)
    sqt, sqh, sqd, skt, skh, skd, sot, soh, sod, spt, sut, suh, sud, sus,
    svt, svh, svd, sct, sch, scs, scd,
    # meta-parameters
    Q_BLOCKS: tl.constexpr,  # head blocks of q; program ids >= Q_BLOCKS do k
    NORM: tl.constexpr,  # False: RoPE only (families without q/k norm)
    OFFSET: tl.constexpr,
    BLOCK_HEADS: tl.constexpr,
    BLOCK_D: tl.constexpr,
    CACHE: tl.constexpr,  # decode: k goes straight to row positions[t] of k_cache, v to v_cache (no append launch)
):
    t = tl.program_id(0).to(tl.int64)
    hb = tl.program_id(1)
    # Two call sites rather than one with variables merged across a runtime `if`: each side keeps its own
    # argument specialisations (Hk = 1 or a unit stride is a compile-time constant on one side only).
    if hb < Q_BLOCKS:
        _norm_rope_heads(q_ptr, qw_ptr, qo_ptr, pos_ptr, inv_freq_ptr, t, hb * BLOCK_HEADS, HQ, D, HALF, eps,
                         sqt, sqh, sqd, sot, soh, sod, spt, NORM, OFFSET, BLOCK_HEADS, BLOCK_D)
    else:
        h0 = (hb - Q_BLOCKS) * BLOCK_HEADS
        if CACHE:
            # Sequence t's new token goes to row positions[t]; a row outside [0, S_MAX) writes nothing (the engine
            # sizes the cache so that cannot happen; checking on the host would need a sync).
            pos = tl.load(pos_ptr + t * spt).to(tl.int64)
            ok = (pos >= 0) & (pos < S_MAX)
            row = tl.where(ok, pos, 0)
            n_heads = tl.where(ok, HK, 0)
            _norm_rope_heads(k_ptr, kw_ptr, ko_ptr + row * sus, pos_ptr, inv_freq_ptr, t, h0, n_heads, D,
                             HALF, eps, skt, skh, skd, sut, suh, sud, spt, NORM, OFFSET, BLOCK_HEADS, BLOCK_D)
            heads = h0 + tl.arange(0, BLOCK_HEADS)
            cols = tl.arange(0, BLOCK_D)
            m = (heads[:, None] < n_heads) & (cols[None, :] < D)
            vv = tl.load(v_ptr + t * svt + heads[:, None] * svh + cols[None, :] * svd, mask=m)
            tl.store(vc_ptr + t * sct + heads[:, None] * sch + row * scs + cols[None, :] * scd, vv, mask=m)
        else:
            _norm_rope_heads(k_ptr, kw_ptr, ko_ptr, pos_ptr, inv_freq_ptr, t, h0, HK, D,
                             HALF, eps, skt, skh, skd, sut, suh, sud, spt, NORM, OFFSET, BLOCK_HEADS, BLOCK_D)


def _inv_freq(rope_theta: float, rotary_dim: int, device: torch.device) -> torch.Tensor:
    """HF's inv_freq (must equal `moelab.ops.rope.rope_inv_freq`), built once per (theta, dim, device).

    Built on the CPU as HF does at model construction, then moved: the first call should come before any CUDA
    graph capture (warm-up does that).
    """
    key = (float(rope_theta), rotary_dim, device)
    t = _INV_FREQ.get(key)
    if t is None:
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError("qk_norm_rope: first call for this rope_theta/rotary_dim is inside a CUDA graph "
                               "capture; call it once before capturing (its inv_freq table is built then)")
        cpu = 1.0 / (rope_theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.int64).float() / rotary_dim))
        t = _INV_FREQ[key] = cpu.to(device)
    return t


def norm_rope_args(op: str, q: torch.Tensor, q_weight, k_weight, rotary_dim, offset: bool):
    """The q/k norm + RoPE arguments of `op` (this file's kernels, and `kernels.attention.decode_attention_kv`),
    checked: (q_weight, k_weight, rotary_dim, out_dtype, norm). Without weights (RoPE only) both weights come back
    as q, an unused pointer; out_dtype is what HF's norm yields (q's dtype, or promoted by the weight's)."""
    d = q.shape[-1]
    rotary_dim = d if rotary_dim is None else int(rotary_dim)
    if rotary_dim < 0 or rotary_dim > d or rotary_dim % 2:
        raise ValueError(f"{op}: rotary_dim {rotary_dim} must be even and in 0..{d}")
    norm = q_weight is not None or k_weight is not None
    if not norm:
        return q, q, rotary_dim, q.dtype, False
    if q_weight is None or k_weight is None:
        raise ValueError(f"{op}: give both q_weight and k_weight, or neither (RoPE only)")
    for name, w in (("q_weight", q_weight), ("k_weight", k_weight)):
        if tuple(w.shape) != (d,):
            raise ValueError(f"{op}: {name} has shape {tuple(w.shape)}; expected ({d},)")
        if w.device != q.device:
            raise ValueError(f"{op}: {name} is on {w.device}, q on {q.device}")
    if q_weight.dtype != k_weight.dtype or q_weight.dtype not in _DTYPES:
        raise TypeError(f"{op}: q_weight/k_weight dtypes {q_weight.dtype}/{k_weight.dtype} must be one float dtype")
    out_dtype = q.dtype if offset else torch.promote_types(q.dtype, q_weight.dtype)
    return q_weight.contiguous(), k_weight.contiguous(), rotary_dim, out_dtype, True


def _check(name: str, t: torch.Tensor, shape: tuple[int, ...] | None, device: torch.device) -> None:
    if shape is not None and tuple(t.shape) != shape:
        raise ValueError(f"qk_norm_rope: {name} has shape {tuple(t.shape)}; expected {shape}")
    if t.device != device:
        raise ValueError(f"qk_norm_rope: {name} is on {t.device}, q on {device}")


def qk_norm_rope(
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: torch.Tensor | None,
    k_weight: torch.Tensor | None,
    positions: torch.Tensor,
    *,
    eps: float,
    rope_theta: float,
    rotary_dim: int | None = None,
    offset: bool = False,
    q_out: torch.Tensor | None = None,
    k_out: torch.Tensor | None = None,
    cache: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """RMSNorm each q and k head over head_dim, then apply NeoX RoPE to its first `rotary_dim` dims. One launch.

    out = rope(rmsnorm(x, w, eps, offset), positions, theta) with HF Qwen3 numerics (`moelab.ops.rope`).
    Shapes: q [T, Hq, D], k [T, Hk, D] (any strides), q_weight/k_weight [D], positions [T] integer.
    `rotary_dim` (default D) must be even and ≤ D. `q_out`/`k_out` may be given, or be q/k for in-place.
    With q_weight = k_weight = None there is no norm: RoPE only (see `rope`).
    Returns (q_out, k_out). Raises ValueError/TypeError naming the bad argument.
    """
    if q.dim() != 3 or k.dim() != 3:
        raise ValueError(f"qk_norm_rope: q and k must be [T, H, D]; got {tuple(q.shape)} and {tuple(k.shape)}")
    t, hq, d = q.shape
    hk = k.shape[1]
    if k.shape[0] != t or k.shape[2] != d:
        raise ValueError(f"qk_norm_rope: k has shape {tuple(k.shape)}; expected [{t}, Hk, {d}]")
    if q.dtype not in _DTYPES or k.dtype != q.dtype:
        raise TypeError(f"qk_norm_rope: q/k dtypes {q.dtype}/{k.dtype}; expected one of float16/bfloat16/float32")
    if d == 0 or d > 1024:
        raise ValueError(f"qk_norm_rope: head_dim {d} is outside 1..1024")
    dev = q.device
    check_device(q, "qk_norm_rope: q")
    _check("k", k, None, dev)
    _check("positions", positions, (t,), dev)
    if positions.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"qk_norm_rope: positions has dtype {positions.dtype}; expected int32 or int64")
    q_weight, k_weight, rotary_dim, out_dtype, norm = norm_rope_args("qk_norm_rope", q, q_weight, k_weight, rotary_dim,
                                                                     offset)
    for name, o, ref in (("q_out", q_out, q), ("k_out", k_out, k)):
        if o is not None and (o.shape != ref.shape or o.dtype != out_dtype or o.device != dev):
            raise ValueError(f"qk_norm_rope: {name} must be {tuple(ref.shape)} {out_dtype} on {dev}")
    q_out = torch.empty(q.shape, dtype=out_dtype, device=dev) if q_out is None else q_out
    if cache is None:
        k_out = torch.empty(k.shape, dtype=out_dtype, device=dev) if k_out is None else k_out
    else:
        if k_out is not None:
            raise ValueError("qk_norm_rope: give k_out or a cache, not both")
        k_cache, v_cache, v = cache
        check_kv_args("qk_norm_rope_kv", k_cache, v_cache, k, v, positions)
        if k_cache.dtype != out_dtype:
            raise ValueError(f"qk_norm_rope: the cache is {k_cache.dtype} but normalised k is {out_dtype}")
    if t == 0:
        return q_out, k_out
    inv_freq = _inv_freq(rope_theta, max(rotary_dim, 2), dev)

    # Heads per program: about 2K elements per program (16 heads of 128), enough to hide one load's latency,
    # and at T=1 still 3 programs for Qwen3's 32 + 4 heads. Not yet swept on a GPU.
    block_d = next_pow2(d)
    block_heads = max(1, min(next_pow2(max(hq, hk)), 2048 // block_d))
    q_blocks = cdiv(hq, block_heads)
    grid = (t, q_blocks + cdiv(hk, block_heads))
    if cache is None:
        ko, vv, vc, s_max = k_out, q, q, 0  # v, v_cache unused
        k_strides = (k_out.stride(0), k_out.stride(1), k_out.stride(2), 0)
        v_strides = (0,) * 7
    else:
        k_cache, v_cache, v = cache
        ko, vv, vc, s_max = k_cache, v, v_cache, k_cache.shape[2]
        # k_cache [B, Hk, S, D] as k_out (token = sequence, head, dim) plus the position stride
        k_strides = (k_cache.stride(0), k_cache.stride(1), k_cache.stride(3), k_cache.stride(2))
        v_strides = (*v.stride(), v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), v_cache.stride(3))
    _qk_norm_rope_kernel[grid](
        q, k, q_weight, k_weight, positions, inv_freq, q_out, ko, vv, vc,
        hq, hk, d, rotary_dim // 2, float(eps), s_max,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        q_out.stride(0), q_out.stride(1), q_out.stride(2), positions.stride(0),
        *k_strides, *v_strides,
        Q_BLOCKS=q_blocks, NORM=norm, OFFSET=bool(offset), BLOCK_HEADS=block_heads, BLOCK_D=block_d,
        CACHE=cache is not None, num_warps=4,
    )
    return q_out, (k_out if cache is None else None)


def check_kv_args(op: str, k_cache, v_cache, k, v, positions) -> None:
    """Clear errors, named after `op`, for a decode KV append that cannot be done (shared by `qk_norm_rope_kv`,
    `decode_attention_kv` and their references)."""
    if k_cache.dim() != 4 or v_cache.shape != k_cache.shape:
        raise ValueError(f"{op}: k_cache and v_cache must be one shape [B, Hk, S_max, D], got "
                         f"{tuple(k_cache.shape)} and {tuple(v_cache.shape)}")
    B, Hk, _, D = k_cache.shape
    for name, t in (("k", k), ("v", v)):
        if tuple(t.shape) != (B, Hk, D):
            raise ValueError(f"{op}: {name} must be [{B}, {Hk}, {D}] (one token per sequence), got {tuple(t.shape)}")
        if t.dtype != k_cache.dtype or t.device != k_cache.device:
            raise ValueError(f"{op}: {name} is {t.dtype} on {t.device}, the cache {k_cache.dtype} on {k_cache.device}")
    if v_cache.dtype != k_cache.dtype or v_cache.device != k_cache.device:
        raise ValueError(f"{op}: k_cache and v_cache must share dtype and device")
    if positions.shape != (B,) or positions.dtype not in (torch.int32, torch.int64) or positions.device != k_cache.device:
        raise ValueError(f"{op}: positions must be [{B}] int32/int64 on {k_cache.device}, got "
                         f"{tuple(positions.shape)} {positions.dtype} on {positions.device}")


def qk_norm_rope_kv(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_weight: torch.Tensor | None,
    k_weight: torch.Tensor | None,
    positions: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    *,
    eps: float,
    rope_theta: float,
    rotary_dim: int | None = None,
    offset: bool = False,
) -> torch.Tensor:
    """Decode: `qk_norm_rope` of q [B, Hq, D] and k [B, Hk, D], with k (normalised and rotated) and v [B, Hk, D]
    written straight to row positions[b] of k_cache/v_cache [B, Hk, S_max, D] — the KV append without its own
    launch. Returns q_out. Contract: `moelab.ops.rope.qk_norm_rope_kv_reference`. No weights: RoPE only.
    It replaced a separate append kernel (`kv_write`): −1.5 µs per layer in the chained step, as predicted (H200,
    2026-12-01: 2.78 → 2.71 ms per token, docs/worklog.md)."""
    return qk_norm_rope(q, k, q_weight, k_weight, positions, eps=eps, rope_theta=rope_theta, rotary_dim=rotary_dim,
                        offset=offset, cache=(k_cache, v_cache, v))[0]


def rope(
    q: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor,
    *,
    rope_theta: float,
    rotary_dim: int | None = None,
    q_out: torch.Tensor | None = None,
    k_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """NeoX RoPE of q [T, Hq, D] and k [T, Hk, D] at positions [T], no norm (Qwen2-MoE, Mixtral, OLMoE). One launch."""
    return qk_norm_rope(q, k, None, None, positions, eps=0.0, rope_theta=rope_theta, rotary_dim=rotary_dim,
                        q_out=q_out, k_out=k_out)
