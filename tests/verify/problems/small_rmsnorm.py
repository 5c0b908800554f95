"""RMSNorm over the last dim with a weight, small (test-only)."""
import torch
import torch.nn as nn

T, H = 6, 48


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def get_inputs():
    return [torch.randn(T, H)]


def get_inputs_alt():
    return [torch.randn(5, H)]


def get_init_inputs():
    return [H]
