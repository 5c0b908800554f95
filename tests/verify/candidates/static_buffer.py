"""Bad: writes every answer into one preallocated buffer, so the caller's earlier result changes."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps
        self.buf = {}

    def forward(self, x):
        key = tuple(x.shape)
        if key not in self.buf:
            self.buf[key] = torch.empty_like(x)
        out = self.buf[key]
        torch.mul(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps), self.weight, out=out)
        return out
