"""Linear (decode GEMV) op: the plain-torch reference and its registration.

`y = x @ weightᵀ + bias` as `torch.nn.Linear` computes it, with the product accumulated in fp32 and rounded
once to the activation dtype (what cuBLAS does for bf16/fp16 GEMMs with an fp32 compute type). moelab's
kernel (`moelab.kernels.linear`) covers decode sizes, 1 ≤ T ≤ 64 tokens.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from moelab import ops
from moelab.kernels import env_int, pdl_supported
from moelab.kernels.linear import LINEAR_MAX_T
from moelab.kernels.linear import linear as _linear_kernel


def linear_reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`(x.float() @ weight.float()ᵀ + bias.float()).to(x.dtype)`. Shapes: x [..., K], weight [N, K], bias [N];
    returns [..., N] in x's dtype."""
    y = x.float() @ weight.float().t()
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)


ops.register(
    "linear",
    linear_reference,
    _linear_kernel,
    doc="y = x @ Wᵀ (+ b), fp32 accumulation, one rounding; moelab's kernel is for decode sizes (T ≤ 64).",
)

# The engine's dense projections use moelab's kernel up to this many tokens and cuBLAS beyond. Every record so far ran
# the GEMV up to 16 and cuBLAS above (batch 32); whether the tensor-core kernel beats cuBLAS at 17-64 tokens is
# unmeasured, so the shipped value keeps that. A/B: $MOELAB_DENSE_MAX_T (read at each call; capped at LINEAR_MAX_T).
DENSE_MAX_T = 16


def dense_max_t() -> int:
    return min(env_int("MOELAB_DENSE_MAX_T", DENSE_MAX_T), LINEAR_MAX_T)


def dense(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """A dense projection as moelab's engine runs it: moelab's kernel for x [T ≤ dense_max_t(), K] (launched with
    programmatic dependent launch on Hopper, so its first weight tile — at T ≤ 2 its whole slice — streams while the
    kernels before it run), a cuBLAS GEMM for prefill sizes, where tensor cores and the weight's reuse across tokens
    win."""
    if x.dim() == 2 and x.shape[0] <= dense_max_t():
        return _linear_kernel(x, weight, bias, use_pdl=pdl_supported(x.device))
    return F.linear(x, weight, bias)


def dense_for(impl: str):
    """The dense projection of `impl`: moelab's `dense`, or for "eager" plain `F.linear` (cuBLAS in the activation
    dtype, as transformers runs it: the "before" of every comparison, not the fp32 reference)."""
    return dense if impl == "moelab" else F.linear
