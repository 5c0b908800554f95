"""Honest: the linear layer as an explicit fp32 matmul."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, k: int, n: int):
        super().__init__()
        self.linear = nn.Linear(k, n)

    def forward(self, x):
        return torch.addmm(self.linear.bias, x, self.linear.weight.t())
