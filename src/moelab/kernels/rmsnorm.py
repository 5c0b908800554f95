"""Fused residual-add + RMSNorm in one launch (Triton).

One program per row of [T, H]: it reads the row of x (and of the residual), writes the rounded sum as the new
residual, reduces Σh² in fp32, and writes the normalised, weighted row. The whole row stays in registers, so
every byte is read once and written once.

Napkin math per call (activation dtype of b bytes, weight w bytes):
  bytes = T·H·b·(2 reads + 2 writes with a residual; 1 + 1 without) + H·w (weight, served from L2 after row 1)
  FLOPs ≈ 5·T·H (add, square, accumulate, scale, weight) — at most ~1 FLOP/byte: memory- and latency-bound.
  Hidden 2048, bf16, T=1: 16 KB moved, ≈4 ns of bandwidth at 4.3 TB/s: the time is launch latency plus one row's
  load→reduce→store chain. T=4096: 67 MB, ≈16 µs at 4.3 TB/s.

Casting follows HF exactly (see `moelab.ops.norm`): the sum is rounded to the activation dtype; with offset=False
the normalised value is rounded to the activation dtype before the weight multiplies it (Qwen3/Llama); with
offset=True the product with (1 + w) is taken in fp32 and rounded once (Qwen3-Next/Gemma).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moelab.kernels import chain_pdl, check_device, next_pow2, pdl_supported

_MAX_H = 32768  # one row lives in registers; beyond this a two-pass loop would be needed (no model needs it)
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@triton.jit
def _add_rmsnorm_kernel(
    # pointers
    x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr,
    # sizes
    H, eps,
    # strides (row, column) of x, residual, out, residual_out
    sxr, sxc, srr, src, sor, soc, sqr, sqc,
    # meta-parameters
    HAS_RESIDUAL: tl.constexpr,
    OFFSET: tl.constexpr,
    BLOCK_H: tl.constexpr,
    TRIGGER: tl.constexpr,  # release a PDL-launched next kernel (a weight GEMV) now: see kernels.pdl_supported
    USE_PDL: tl.constexpr,  # launched with PDL: the weight is read before gdc_wait, x and the residual after it
):
    if TRIGGER:
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0).to(tl.int64)  # int64: T·stride can pass 2³¹ at long prefill
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    act_ty = x_ptr.dtype.element_ty
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)  # no kernel's output
    if USE_PDL:
        tl.extra.cuda.gdc_wait()

    x = tl.load(x_ptr + row * sxr + cols * sxc, mask=mask, other=0.0)
    if HAS_RESIDUAL:
        r = tl.load(res_ptr + row * srr + cols * src, mask=mask, other=0.0)
        # HF adds in the activation dtype: round the sum once, store it, normalise the rounded value.
        s = (x.to(tl.float32) + r.to(tl.float32)).to(act_ty)
        tl.store(res_out_ptr + row * sqr + cols * sqc, s, mask=mask)
        h = s.to(tl.float32)
    else:
        h = x.to(tl.float32)

    rstd = tl.rsqrt(tl.sum(h * h, axis=0) / H + eps)
    n = h * rstd
    if OFFSET:
        y = n * (1.0 + w)
    else:
        y = n.to(act_ty).to(tl.float32) * w
    tl.store(out_ptr + row * sor + cols * soc, y.to(out_ptr.dtype.element_ty), mask=mask)


def _launch_params(h: int) -> tuple[int, int]:
    """BLOCK_H = next power of two ≥ H; about 16 elements per thread on a 32-wide warp, 1..16 warps.

    Not swept yet on a GPU: hidden 2048 → 4 warps, the usual choice for a one-row reduction of 4 KB.
    """
    block = next_pow2(h)
    return block, max(1, min(16, block // 512))


def add_rmsnorm(
    x: torch.Tensor,
    residual: torch.Tensor | None,
    weight: torch.Tensor,
    eps: float,
    *,
    offset: bool = False,
    out: torch.Tensor | None = None,
    residual_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`new_residual = x + residual` (rounded to x's dtype), `out = rmsnorm(new_residual) · w` — one launch.

    `w` is `weight` (offset=False, HF Qwen3 casting) or `1 + weight` (offset=True, Qwen3-Next casting).
    Shapes: x, residual [..., H] (any strides whose leading dims flatten to one), weight [H].
    `out` / `residual_out` may be given (same shape; `residual_out` may be `residual` itself for an in-place
    update). With `residual=None`, nothing is added and `new_residual` is `x`.
    Returns (out, new_residual). Raises ValueError/TypeError naming the bad argument.
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        raise ValueError("add_rmsnorm: x must be a tensor [..., H]")
    if x.dtype not in _DTYPES:
        raise TypeError(f"add_rmsnorm: x has dtype {x.dtype}; expected float16, bfloat16 or float32")
    h = x.shape[-1]
    if h == 0 or h > _MAX_H:
        raise ValueError(f"add_rmsnorm: hidden size {h} is outside 1..{_MAX_H}")
    if weight.shape != (h,):
        raise ValueError(f"add_rmsnorm: weight has shape {tuple(weight.shape)}; expected ({h},)")
    if weight.dtype not in _DTYPES:
        raise TypeError(f"add_rmsnorm: weight has dtype {weight.dtype}; expected a float dtype")
    if weight.device != x.device:
        raise ValueError(f"add_rmsnorm: weight is on {weight.device}, x on {x.device}")
    copied = weight.stride(0) != 1
    if copied:
        weight = weight.contiguous()  # H elements, read once: a copy is cheaper than a strided path
    check_device(x, "add_rmsnorm: x")
    if residual is not None:
        if residual.shape != x.shape or residual.dtype != x.dtype or residual.device != x.device:
            raise ValueError(
                f"add_rmsnorm: residual is {tuple(residual.shape)} {residual.dtype} on {residual.device}; "
                f"expected x's {tuple(x.shape)} {x.dtype} on {x.device}"
            )
    out_dtype = x.dtype if offset else torch.promote_types(x.dtype, weight.dtype)
    if out is None:
        out = torch.empty(x.shape, dtype=out_dtype, device=x.device)
    elif out.shape != x.shape or out.dtype != out_dtype or out.device != x.device:
        raise ValueError(f"add_rmsnorm: out must be {tuple(x.shape)} {out_dtype} on {x.device}")
    if residual is None:
        if residual_out is not None:
            raise ValueError("add_rmsnorm: residual_out given without a residual to add")
        new_residual = x
    else:
        if residual_out is None:
            residual_out = torch.empty_like(x)
        elif residual_out.shape != x.shape or residual_out.dtype != x.dtype or residual_out.device != x.device:
            raise ValueError(f"add_rmsnorm: residual_out must be {tuple(x.shape)} {x.dtype} on {x.device}")
        new_residual = residual_out

    views = []
    for name, t in (("x", x), ("residual", residual), ("out", out), ("residual_out", residual_out)):
        if t is None:
            views.append(None)
            continue
        try:
            views.append(t.view(-1, h))
        except RuntimeError:
            raise ValueError(f"add_rmsnorm: {name}'s leading dims cannot be flattened without a copy") from None
    x2, r2, o2, q2 = views
    rows = x2.shape[0]
    if rows == 0:
        return out, new_residual
    r2 = x2 if r2 is None else r2  # unused when HAS_RESIDUAL is False; any valid pointer will do
    q2 = x2 if q2 is None else q2

    block, warps = _launch_params(h)
    # In the step-long chain: PDL-launched, the weight read before the wait — unless it is the copy just made (a
    # kernel's output is visible only after the wait).
    pdl = chain_pdl(x.device, rows) and not copied
    _add_rmsnorm_kernel[(rows,)](
        x2, r2, weight, o2, q2,
        h, float(eps),
        x2.stride(0), x2.stride(1), r2.stride(0), r2.stride(1),
        o2.stride(0), o2.stride(1), q2.stride(0), q2.stride(1),
        HAS_RESIDUAL=residual is not None, OFFSET=bool(offset), BLOCK_H=block, TRIGGER=pdl_supported(x.device),
        USE_PDL=pdl, num_warps=warps, **({"launch_pdl": True} if pdl else {}),
    )
    return out, new_residual


def rmsnorm(
    x: torch.Tensor, weight: torch.Tensor, eps: float, offset: bool = False, *, out: torch.Tensor | None = None
) -> torch.Tensor:
    """RMSNorm of `x` [..., H] with `weight` [H] (HF casting; `offset=True` applies 1 + weight). One launch."""
    return add_rmsnorm(x, None, weight, eps, offset=offset, out=out)[0]
