"""Honest: x + 1e-4·tanh(x W^T), computed."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, h: int):
        super().__init__()
        self.linear = nn.Linear(h, h, bias=False)

    def forward(self, x):
        return x + 1e-4 * torch.tanh(x @ self.linear.weight.t())
