"""Qwen3.5 / Qwen3-Next attention output gate: out · sigmoid(gate), one launch, in the decode step's PDL chain.

As plain torch it is two launches (sigmoid, multiply) between the attention combine and the o projection, and neither
releases the o projection early, so the o weight (16.8 MB at Qwen3.5-35B-A3B, ~3.6 µs of bandwidth) no longer
streams under the attention kernels as it does for the other families. Here: one program per (token, head) that
releases the next kernel as it starts and waits in hardware for the attention output (`kernels.chain_pdl`).

Napkin math, Qwen3.5-35B-A3B, batch 1: 16 heads × 256 dims: 8 KB of out and 8 KB of gate read, 8 KB written:
latency-bound (a few ns of bandwidth).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moelab.kernels import chain_pdl, check_device, next_pow2


@triton.jit
def _attn_gate_kernel(x_ptr, g_ptr, o_ptr, D, s_xt, s_gt, s_gh, s_ot, D_PAD: tl.constexpr, PDL: tl.constexpr):
    """Program (token t, head h): o[t, h·D + j] = x[t, h·D + j] · sigmoid(g[t, h, j]), the sigmoid rounded to g's dtype
    and the product to o's, in transformers' order (`out * torch.sigmoid(gate)` in the activation dtype); tl.exp is
    the GPU's approximate exponential, so a 16-bit result can differ from torch's by one rounding, rarely."""
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()  # x is the attention's output, g the projection's
    offs = tl.arange(0, D_PAD)
    m = offs < D
    g = tl.load(g_ptr + t * s_gt + h * s_gh + offs, mask=m, other=0.0)
    s = (1.0 / (1.0 + tl.exp(-g.to(tl.float32)))).to(g.dtype)
    x = tl.load(x_ptr + t * s_xt + h * D + offs, mask=m, other=0.0)
    tl.store(o_ptr + t * s_ot + h * D + offs, (x.to(tl.float32) * s.to(tl.float32)).to(o_ptr.dtype.element_ty), mask=m)


def attn_gate(out: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """out [T, H·D] · sigmoid(gate [T, H, D]) -> [T, H·D] in out's dtype (gate: any strides with a contiguous last dim,
    e.g. the gate half of q_proj's [q | gate] rows). Contract as `moelab.ops.attention.attn_gate_reference`."""
    check_device(out, "attn_gate: out")
    if gate.dim() != 3 or out.dim() != 2 or out.shape != (gate.shape[0], gate.shape[1] * gate.shape[2]):
        raise ValueError(f"attn_gate: out must be [T, H·D] for gate [T, H, D]; got out {tuple(out.shape)}, gate "
                         f"{tuple(gate.shape)}")
    if out.dtype != gate.dtype or out.device != gate.device:
        raise ValueError(f"attn_gate: out and gate must share dtype and device (got {out.dtype} on {out.device}, "
                         f"{gate.dtype} on {gate.device})")
    if out.stride(-1) != 1 or gate.stride(-1) != 1:
        raise ValueError("attn_gate: out and gate must be contiguous in their last dimension")
    T, H, D = gate.shape
    res = torch.empty_like(out, memory_format=torch.contiguous_format)
    if T and H:
        pdl = chain_pdl(out.device, T)
        _attn_gate_kernel[(T, H)](out, gate, res, D, out.stride(0), gate.stride(0), gate.stride(1), res.stride(0),
                                  D_PAD=next_pow2(D), PDL=pdl, num_warps=1 if D <= 256 else 4,
                                  **({"launch_pdl": True} if pdl else {}))
    return res
