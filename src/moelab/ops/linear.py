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
from moelab.kernels.linear import linear as _linear_kernel


def linear_reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`(x.float() @ weight.float()ᵀ + bias.float()).to(x.dtype)`. Shapes: x [..., K], weight [N, K], bias [N];
    returns [..., N] in x's dtype."""
    y = x.float() @ weight.float().t()
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)


def linear_conv_reference(x: torch.Tensor, weight: torch.Tensor, state: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A Gated DeltaNet layer's input projection and its causal conv of one decode token: `linear_reference`, then
    `gdn_conv_reference` over the first C = w.shape[0] output columns (state [T, C, K-1] updated in place), the rest
    as projected. x [T, K], weight [N, K] -> [T, N]."""
    from moelab.ops.gdn import gdn_conv_reference

    y = linear_reference(x, weight)
    C = w.shape[0]
    return torch.cat((gdn_conv_reference(y[:, :C], state, w), y[:, C:]), dim=-1)


def _linear_conv_kernel(x, weight, state, w, *, release_early=False):
    """moelab's: the decode kernel with the conv in its epilogue, PDL-launched on Hopper (as `dense`, `release_early`
    too)."""
    return _linear_kernel(x, weight, use_pdl=pdl_supported(x.device), release_early=releases_early(x, release_early),
                          conv=(state, w))


ops.register(
    "linear_conv",
    linear_conv_reference,
    _linear_conv_kernel,
    doc="the Gated DeltaNet input projection with its causal conv (one decode token per row) in one launch",
)

ops.register(
    "linear",
    linear_reference,
    _linear_kernel,
    doc="y = x @ Wᵀ (+ b), fp32 accumulation, one rounding; moelab's kernel is for decode sizes (T ≤ 64).",
)

# The engine's dense projections use moelab's kernel up to this many tokens and cuBLAS beyond. moelab's tensor-core
# kernel up to 64 rows instead lost 1 % at batch 32 (18.2 → 18.4 ms per token; H200, session 8, ab-chain-…T215300).
DENSE_MAX_T = 16
# Up to this many rows, a projection whose caller says the next kernel reads nothing of this step before its PDL wait
# (`release_early=True`: the engine's o projection and the Gated DeltaNet's input and output projections) releases it
# as it starts (`moelab.kernels.linear`). H100, batch 1, the same tokens in every A/B (session 34, stages FK and FL):
# every projection early, Qwen3-30B-A3B 2.82 → 2.86 ms a token and Qwen3.5-35B-A3B 2.71 → 2.63 (→ 2.61 with the
# recurrence's state before its wait); then link by link, Qwen3-30B-A3B 2.85: o alone 2.83, qkv alone 2.90 (the
# attention split resident early loses), and Qwen3.5 2.72: the input projection alone 2.68 with the state early;
# batch 8 every projection 9.73 → 9.79 (h100/ab-chain-…T1404*-T1416*). Above one row, this rule at 8 rows (session 35,
# H100, three rounds, the same tokens): Qwen3.5 batch 2 3.594 → 3.581 (−0.4 %, h100/ab-chain-…T163115), batch 8 8.350
# both (…T163530); Qwen3-30B-A3B batch 8 10.09 → 10.20 (+1.1 %, …T163717), and at 2 rows its batch 2 4.164 → 4.181
# (+0.4 %, session 36, …T193339). So one row. (qkv releases too where the attention split's placement allows it:
# `ops.attention.qkv_release_stages`, session 37.)
# $MOELAB_EARLY_RELEASE_MAX_T overrides it (0: never).
EARLY_RELEASE_MAX_T = 1


def releases_early(x: torch.Tensor, release_early: bool) -> bool:
    """Whether moelab's `dense` of x, asked to `release_early`, releases the next kernel as it starts (by rows)."""
    return bool(release_early) and x.shape[0] <= env_int("MOELAB_EARLY_RELEASE_MAX_T", EARLY_RELEASE_MAX_T)


def dense(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
          release_early: bool = False) -> torch.Tensor:
    """A dense projection as moelab's engine runs it: moelab's kernel for x [T ≤ DENSE_MAX_T, K] (launched with
    programmatic dependent launch on Hopper, so its first weight tile — in the step's chain its whole slice — streams
    while the kernels before it run), a cuBLAS GEMM for prefill sizes, where tensor cores and the weight's reuse
    across tokens win. `release_early`: the next kernel reads nothing this step writes before its PDL wait, so it may
    be released as this one starts (up to EARLY_RELEASE_MAX_T rows)."""
    if x.dim() == 2 and x.shape[0] <= DENSE_MAX_T:
        return _linear_kernel(x, weight, bias, use_pdl=pdl_supported(x.device),
                              release_early=releases_early(x, release_early))
    return F.linear(x, weight, bias)


def _eager_dense(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
                 release_early: bool = False) -> torch.Tensor:
    return F.linear(x, weight, bias)  # (release_early: a launch hint of moelab's kernel, nothing to do here)


def dense_for(impl: str):
    """The dense projection of `impl`: moelab's `dense`, or for "eager" plain `F.linear` (cuBLAS in the activation
    dtype, as transformers runs it: the "before" of every comparison, not the fp32 reference)."""
    return dense if impl == "moelab" else _eager_dense
