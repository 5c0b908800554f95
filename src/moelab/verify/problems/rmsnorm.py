"""RMSNorm with a weight over the last dim, T=4096 rows of hidden 2048 (Qwen3's norm shape)."""

import torch
import torch.nn as nn

T, H, T_ALT = 4096, 2048, 37
EPS = 1e-6


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


def get_inputs():
    return [torch.randn(T, H)]


def get_inputs_alt():
    return [torch.randn(T_ALT, H)]


def get_init_inputs():
    return [H, EPS]
