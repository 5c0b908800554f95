"""Honest: MoE SwiGLU without the expert loop — gather each token's k experts' weights, then bmm."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, num_experts: int, hidden: int, intermediate: int, top_k: int):
        super().__init__()
        self.top_k = top_k
        self.gate_up_proj = nn.Parameter(torch.empty(num_experts, 2 * intermediate, hidden))
        self.down_proj = nn.Parameter(torch.empty(num_experts, hidden, intermediate))

    def forward(self, x, router_logits):
        probs = torch.softmax(router_logits.float(), dim=-1)
        w, ids = torch.topk(probs, self.top_k, dim=-1)  # [T, k]
        w = (w / w.sum(-1, keepdim=True)).to(x.dtype)
        t, k = ids.shape
        xs = x[:, None, :].expand(t, k, x.shape[1]).reshape(t * k, 1, -1)  # [T·k, 1, H]
        h = torch.bmm(xs, self.gate_up_proj[ids.reshape(-1)].transpose(1, 2))  # [T·k, 1, 2I]
        gate, up = h.chunk(2, dim=-1)
        y = torch.bmm(F.silu(gate) * up, self.down_proj[ids.reshape(-1)].transpose(1, 2))  # [T·k, 1, H]
        return (y.reshape(t, k, -1) * w[..., None]).sum(dim=1)
