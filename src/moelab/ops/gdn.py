"""Gated DeltaNet decode ops (the linear-attention layers of Qwen3-Next and Qwen3.5): plain-torch references and
their registration. One decode token per sequence, or a prompt's tokens in order; the states live in the caller's
cache and are updated in place.

The references follow transformers' torch paths for these models: the causal depthwise conv's decode update, the
recurrent gated delta rule, and the gated RMSNorm (`Qwen3NextRMSNormGated`: normalise in fp32, round to the
activation dtype, multiply by the weight in the promoted dtype, times SiLU of the gate in fp32, round once more).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from moelab import ops
from moelab.kernels.gdn import gdn_conv as _conv_kernel
from moelab.kernels.gdn import gdn_norm_gate as _norm_gate_kernel
from moelab.kernels.gdn import gdn_recurrence as _recurrence_kernel


def gdn_conv_reference(x: torch.Tensor, state: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Causal depthwise conv, one decode token: x [B, C], state [B, C, K-1] (updated in place), w [C, K] -> [B, C];
    or T tokens in order, x [B, T, C] -> [B, T, C]. As transformers' `causal_conv1d_update` token by token: the
    window in w's dtype, the conv summed in fp32 and rounded to w's dtype, SiLU in fp32 rounded to w's dtype, then to
    x's dtype."""
    if x.dim() == 3:
        return torch.stack([gdn_conv_reference(x[:, t], state, w) for t in range(x.shape[1])], dim=1)
    window = torch.cat((state, x[:, :, None]), dim=-1).to(w.dtype)  # [B, C, K]
    state.copy_(window[:, :, 1:])
    conv = (window.float() * w.float()).sum(-1).to(w.dtype)
    return F.silu(conv.float()).to(w.dtype).to(x.dtype)


def l2norm(x: torch.Tensor) -> torch.Tensor:
    """transformers' (and FLA's) l2norm of the last dim: x · rsqrt(Σx² + 1e-6)."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def gdn_recurrence_reference(q, k, v, b, a, a_log, dt_bias, state):
    """The gated delta rule for one token, as transformers' `torch_recurrent_gated_delta_rule` with the q/k l2norm in
    it. q, k [B, Hk, Dk] (key head h serves value heads h·Hv/Hk ...); v [B, Hv, Dv]; b, a [B, Hv]; a_log, dt_bias [Hv];
    state [B, Hv, Dk, Dv] fp32 (updated in place), all in fp32 but β = sigmoid(b) rounded to b's dtype first:
        g = −exp(A_log)·softplus(a + dt_bias),  q̂ = l2norm(q)/√Dk,  k̂ = l2norm(k)
        S ← S·e^g;  S ← S + k̂ ⊗ β(v − k̂ᵀS);  o = q̂ᵀS                 -> o [B, Hv, Dv] in v's dtype.
    T tokens in order (a prefill): q, k [B, T, Hk, Dk], v [B, T, Hv, Dv], b, a [B, T, Hv] -> o [B, T, Hv, Dv]."""
    if v.dim() == 4:
        return torch.stack([gdn_recurrence_reference(q[:, t], k[:, t], v[:, t], b[:, t], a[:, t], a_log, dt_bias,
                                                     state) for t in range(v.shape[1])], dim=1)
    rep = v.shape[1] // q.shape[1]
    qf = l2norm(q.float()).repeat_interleave(rep, dim=1) / q.shape[-1] ** 0.5
    kf = l2norm(k.float()).repeat_interleave(rep, dim=1)
    g = -a_log.float().exp() * F.softplus(a.float() + dt_bias.float())  # [B, Hv]
    beta = b.sigmoid().float()
    state.mul_(g.exp()[:, :, None, None])
    kv = (state * kf[..., None]).sum(-2)  # [B, Hv, Dv]
    state.add_(kf[..., None] * ((v.float() - kv) * beta[..., None])[:, :, None, :])
    return (state * qf[..., None]).sum(-2).to(v.dtype)


def gdn_norm_gate_reference(o: torch.Tensor, z: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm(o) per head · SiLU(z), as transformers' `Qwen3_5MoeRMSNormGated` / Qwen3-Next's: o, z [..., Hv, Dv],
    w [Dv] -> [..., Hv·Dv]."""
    h = o.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return ((w * h.to(o.dtype)).float() * F.silu(z.float())).to(o.dtype).flatten(-2)


ops.register("gdn_conv", gdn_conv_reference, _conv_kernel,
             doc="Gated DeltaNet's causal depthwise conv + SiLU over one token or a prompt; the conv state shifts in "
             "place.")
ops.register("gdn_recurrence", gdn_recurrence_reference, _recurrence_kernel,
             doc="The gated delta rule over one token or a prompt; the fp32 recurrent state updates in place.")
ops.register("gdn_norm_gate", gdn_norm_gate_reference, _norm_gate_kernel,
             doc="Qwen3-Next's gated RMSNorm per value head: RMSNorm(o) · w · SiLU(z), flattened over the heads.")
