"""Per-head q/k RMSNorm fused with rotary position embedding: the plain-torch reference.

Numerics follow Hugging Face Qwen3 (and Qwen3-Next for `offset=True` and partial rotary):
  1. q_norm / k_norm: RMSNorm over head_dim (`ops.norm.rmsnorm_reference`, HF's casting rules);
  2. `inv_freq = 1 / theta ** (arange(0, rotary_dim, 2) / rotary_dim)` in fp32 (computed on the CPU, as HF does
     at model construction), `freqs = positions.float() * inv_freq` in fp32, `cos`/`sin` of `cat(freqs, freqs)`
     in fp32, cast to the activation dtype;
  3. `x_rot * cos + rotate_half(x_rot) * sin` in the activation dtype ("NeoX" convention: the first half of the
     rotary dims pairs with the second half), on the first `rotary_dim` dims; the rest pass through unchanged.
"""

from __future__ import annotations

import torch

from moelab import ops
from moelab.kernels.rope import check_kv_args
from moelab.kernels.rope import qk_norm_rope as _qk_norm_rope_kernel
from moelab.kernels.rope import qk_norm_rope_kv as _qk_norm_rope_kv_kernel
from moelab.kernels.rope import rope as _rope_kernel
from moelab.ops.norm import rmsnorm_reference


def rope_inv_freq(rope_theta: float, rotary_dim: int, device: torch.device | str | None = None) -> torch.Tensor:
    """HF's default-rope inverse frequencies [rotary_dim // 2], fp32, computed on `device` as HF does
    (no host-to-device copy, so the reference can be captured in a CUDA graph)."""
    ar = torch.arange(0, rotary_dim, 2, dtype=torch.int64, device=device).float()
    return 1.0 / (rope_theta ** (ar / rotary_dim))


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope_reference(
    x: torch.Tensor, positions: torch.Tensor, rope_theta: float, rotary_dim: int
) -> torch.Tensor:
    """Rotary embedding of `x` [T, H, D] at `positions` [T] on its first `rotary_dim` dims (HF numerics)."""
    inv_freq = rope_inv_freq(rope_theta, rotary_dim, x.device)
    freqs = positions.to(x.device)[:, None].float() * inv_freq[None, :]  # [T, rotary_dim/2]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos().to(x.dtype)[:, None, :]  # [T, 1, rotary_dim]
    sin = emb.sin().to(x.dtype)[:, None, :]
    x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]
    return torch.cat(((x_rot * cos) + (_rotate_half(x_rot) * sin), x_pass), dim=-1)


def rope_reference(
    q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, *, rope_theta: float, rotary_dim: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE of q [T, Hq, D] and k [T, Hk, D] without a norm (`rotary_dim` defaults to D). Returns (q_out, k_out)."""
    rotary_dim = q.shape[-1] if rotary_dim is None else rotary_dim
    return (apply_rope_reference(q, positions, rope_theta, rotary_dim),
            apply_rope_reference(k, positions, rope_theta, rotary_dim))


def qk_norm_rope_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    positions: torch.Tensor,
    *,
    eps: float,
    rope_theta: float,
    rotary_dim: int | None = None,
    offset: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q_norm/k_norm then RoPE, as one decode step's attention prologue does it.

    Shapes: q [T, Hq, D], k [T, Hk, D], q_weight/k_weight [D], positions [T] (integer).
    `rotary_dim` defaults to D (full rotary); Qwen3-Next uses D/4 (partial_rotary_factor 0.25).
    Returns (q_out [T, Hq, D], k_out [T, Hk, D]).
    """
    d = q.shape[-1]
    rotary_dim = d if rotary_dim is None else rotary_dim
    qn = rmsnorm_reference(q, q_weight, eps, offset)
    kn = rmsnorm_reference(k, k_weight, eps, offset)
    return (
        apply_rope_reference(qn, positions, rope_theta, rotary_dim),
        apply_rope_reference(kn, positions, rope_theta, rotary_dim),
    )


ops.register(
    "qk_norm_rope",
    qk_norm_rope_reference,
    _qk_norm_rope_kernel,
    doc="Per-head q/k RMSNorm fused with NeoX-style RoPE (full or partial rotary), HF Qwen3 numerics.",
)
def qk_norm_rope_kv_reference(
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
    """A decode step's attention prologue: q/k norm (none when the weights are None) and RoPE, then the new k and v
    appended to the static cache at `positions`. q, k, v: [B, H·, D], one token
    per sequence. Returns q_out; the caches are written in place (`k_cache[b, :, positions[b]] = k_out[b]`, and v)."""
    check_kv_args("qk_norm_rope_kv", k_cache, v_cache, k, v, positions)
    if q_weight is None and k_weight is None:
        q_out, k_out = rope_reference(q, k, positions, rope_theta=rope_theta, rotary_dim=rotary_dim)
    else:
        q_out, k_out = qk_norm_rope_reference(q, k, q_weight, k_weight, positions, eps=eps, rope_theta=rope_theta,
                                              rotary_dim=rotary_dim, offset=offset)
    rows = torch.arange(k_cache.shape[0], device=k_cache.device)
    k_cache[rows, :, positions] = k_out
    v_cache[rows, :, positions] = v
    return q_out


ops.register(
    "qk_norm_rope_kv",
    qk_norm_rope_kv_reference,
    _qk_norm_rope_kv_kernel,
    doc="Decode: per-head q/k RMSNorm (optional) + RoPE with the new k and v appended to the KV cache, one launch.",
)
ops.register(
    "rope",
    rope_reference,
    _rope_kernel,
    doc="NeoX-style RoPE of q and k without a norm (full or partial rotary), HF numerics.",
)
