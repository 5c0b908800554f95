"""Bad: a unit bug — the right answer times 1000 (the worklog's 1238× was a µs/ms mix-up)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x):
        return 1000.0 * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
