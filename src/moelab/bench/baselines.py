"""What users run today for an MoE block, written once here and imported by every benchmark.

* `hf_expert_loop`: the Hugging Face transformers 5 way — a Python loop over the experts hit, each
  gathering its tokens (data-dependent shapes: host syncs, graph breaks under torch.compile).
* `gather_bmm`: the first worklog's "fallback" — index_select the k experts' weights for every token
  (copying them), then batched matmuls; no host sync, so it can be graph-captured and compiled.
Both follow the model's casting (bf16 products, activation rounded to bf16).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def hf_expert_loop(x, w13, w2, topk_weights, topk_ids):
    """x[T,H], w13[E,2I,H], w2[E,H,I] → [T,H], as transformers' Qwen3-MoE experts module computes it."""
    E = w13.shape[0]
    out = torch.zeros_like(x)
    mask = F.one_hot(topk_ids.long(), num_classes=E).permute(2, 1, 0)  # [E, k, T]
    hit = (mask.sum(dim=(-1, -2)) > 0).nonzero()
    for e in hit:
        e = int(e[0])
        slot, tok = torch.where(mask[e])
        h = x[tok]
        gate, up = F.linear(h, w13[e]).chunk(2, dim=-1)
        h = F.linear(F.silu(gate) * up, w2[e])
        h = h * topk_weights[tok, slot, None].to(h.dtype)
        out.index_add_(0, tok, h.to(out.dtype))
    return out


def gather_bmm(x, w13, w2, topk_weights, topk_ids):
    """index_select of the routed experts' weights, then bmm (the first worklog's part-3 path)."""
    T, H = x.shape
    k = topk_ids.shape[1]
    flat = topk_ids.reshape(-1).long()
    w13g = w13.index_select(0, flat)  # [T·k, 2I, H] — the copy the direct-routed kernel avoids
    xr = x.repeat_interleave(k, dim=0).unsqueeze(-1)  # [T·k, H, 1]
    gu = torch.bmm(w13g, xr).squeeze(-1)
    gate, up = gu.chunk(2, dim=-1)
    act = (F.silu(gate) * up).unsqueeze(-1)
    y = torch.bmm(w2.index_select(0, flat), act).squeeze(-1)  # [T·k, H]
    y = y.view(T, k, H) * topk_weights.to(y.dtype).unsqueeze(-1)
    return y.sum(1)


def gather_bmm_bytes(T: int, k: int, E: int, H: int, I: int, elt: int = 2) -> int:
    """Scratch bytes gather_bmm allocates (the copied weights): beyond memory it cannot run."""
    return T * k * 3 * H * I * elt
