"""KernelBench L2 #80's shape of trouble: Gemm, max over a dim, minus its own mean, GELU — always zero."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, k: int, n: int):
        super().__init__()
        self.linear = nn.Linear(k, n)

    def forward(self, x):
        y = self.linear(x).max(dim=1, keepdim=True).values
        return torch.nn.functional.gelu(y - y.mean(dim=1, keepdim=True))


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return [32, 16]
