"""RMSNorm ops: the plain-torch references and their registration.

Two casting rules exist in the models moelab runs, and the references follow each exactly:

* Qwen3 / Llama (`offset=False`): normalise in fp32, round the normalised value to the activation dtype,
  THEN multiply by the weight in the weight's dtype:
  `weight * (h * rsqrt(mean(h²) + eps)).to(x.dtype)` with `h = x.float()`.
* Qwen3-Next / Qwen3.5 / Gemma (`offset=True`): the weight is stored as `w` and applied as `(1 + w)`,
  and the product is taken in fp32 before one rounding: `(h * rsqrt(mean(h²) + eps) * (1 + w.float())).to(x.dtype)`.

The residual add happens in the activation dtype (the sum is rounded once), as the HF decoder layers do
with `hidden_states = residual + hidden_states`.
"""

from __future__ import annotations

import torch

from moelab import ops
from moelab.kernels.rmsnorm import add_rmsnorm as _add_rmsnorm_kernel
from moelab.kernels.rmsnorm import rmsnorm as _rmsnorm_kernel


def rmsnorm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float, offset: bool = False) -> torch.Tensor:
    """RMSNorm over the last dim of `x` [..., H] with `weight` [H], in HF's casting rules (module docstring).

    Output dtype: `x.dtype` when `offset=True`; the promotion of `x.dtype` and `weight.dtype` otherwise
    (HF multiplies the bf16-rounded value by the weight in torch's usual promotion).
    """
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    if offset:
        return (h * (1.0 + weight.float())).to(x.dtype)
    return weight * h.to(x.dtype)


def add_rmsnorm_reference(
    x: torch.Tensor,
    residual: torch.Tensor | None,
    weight: torch.Tensor,
    eps: float,
    *,
    offset: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Residual add then RMSNorm: `new_residual = x + residual` (rounded to the activation dtype),
    `out = rmsnorm(new_residual, weight, eps, offset)`. Shapes: x, residual [..., H]; weight [H].

    Returns `(out, new_residual)`; with `residual=None`, `new_residual` is `x` itself.
    """
    new_residual = x if residual is None else x + residual
    return rmsnorm_reference(new_residual, weight, eps, offset), new_residual


ops.register(
    "rmsnorm",
    rmsnorm_reference,
    _rmsnorm_kernel,
    doc="RMSNorm over the last dim; offset=True applies (1 + w) with the Qwen3-Next fp32 product.",
)
ops.register(
    "add_rmsnorm",
    add_rmsnorm_reference,
    _add_rmsnorm_kernel,
    doc="Residual add (rounded to the activation dtype) fused with RMSNorm; returns (out, new_residual).",
)
