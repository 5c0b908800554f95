"""The MoE SwiGLU layer the MoE problems share (not a problem itself: the leading underscore hides it).

Weights in the Hugging Face transformers-5 layout: `gate_up_proj` [E, 2I, H] with the gate rows first,
`down_proj` [E, H, I]. Routing: softmax over the router logits (at least fp32), top-k, renormalised
(Qwen3's norm_topk_prob). The forward is the standard per-expert loop, whose data-dependent `if` and
indexing make torch.compile break the graph — the second worklog's point.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class MoESwiGLU(nn.Module):
    def __init__(self, num_experts: int, hidden: int, intermediate: int, top_k: int):
        super().__init__()
        self.top_k = top_k
        self.gate_up_proj = nn.Parameter(torch.randn(num_experts, 2 * intermediate, hidden) * hidden**-0.5)
        self.down_proj = nn.Parameter(torch.randn(num_experts, hidden, intermediate) * intermediate**-0.5)

    def forward(self, x: torch.Tensor, router_logits: torch.Tensor) -> torch.Tensor:
        # x [T, H], router_logits [T, E] -> [T, H]
        acc = torch.promote_types(router_logits.dtype, torch.float32)
        probs = torch.softmax(router_logits.to(acc), dim=-1)
        weights, ids = torch.topk(probs, self.top_k, dim=-1)  # [T, k]
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)
        out = torch.zeros_like(x)
        for e in range(self.gate_up_proj.shape[0]):
            tok = ids == e  # [T, k]
            if tok.any():
                rows, slots = tok.nonzero(as_tuple=True)
                gate, up = (x[rows] @ self.gate_up_proj[e].t()).chunk(2, dim=-1)
                y = (F.silu(gate) * up) @ self.down_proj[e].t()
                out.index_add_(0, rows, y * weights[rows, slots, None])
        return out


def router_logits(tokens: int, experts: int) -> torch.Tensor:
    """Logits on a permuted grid 8/(E−1) apart: top-k is the same in fp32, bf16 and float64 (no near-ties),
    so every precision routes alike and the check measures the experts' arithmetic, not tie-breaking."""
    grid = torch.linspace(-4.0, 4.0, experts)
    return grid[torch.argsort(torch.rand(tokens, experts), dim=-1)]


def moe_bytes(inputs, init_inputs, dtype) -> float:
    """Floor bytes: the experts actually hit (3·H·I weights each), plus x, logits and the output."""
    x, logits = inputs[0], inputs[1]
    e, h, i, k = init_inputs
    hit = torch.topk(logits.float(), k, dim=-1).indices.unique().numel()
    size = torch.empty((), dtype=dtype).element_size()
    return hit * 3 * h * i * size + 2 * x.numel() * size + logits.numel() * logits.element_size()


def moe_flops(inputs, init_inputs, dtype) -> float:
    e, h, i, k = init_inputs
    return 2.0 * inputs[0].shape[0] * k * 3 * h * i
