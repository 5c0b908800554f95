"""Honest: RMSNorm rewritten in plain torch."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x):
        ms = (x * x).mean(dim=-1, keepdim=True)
        return self.weight * (x / torch.sqrt(ms + self.eps))
