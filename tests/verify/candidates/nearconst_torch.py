"""Honest: 1 + 1e-4·tanh(x W^T) computed for real."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, k: int, n: int):
        super().__init__()
        self.linear = nn.Linear(k, n, bias=False)

    def forward(self, x):
        return torch.tanh(x @ self.linear.weight.t()).mul(1e-4).add(1.0)
