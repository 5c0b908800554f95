"""y = x @ W^T + b, small (test-only): the fp32 matmul that a TF32 or fp16 shortcut gets loosely right."""
import torch
import torch.nn as nn

B, K, N = 8, 64, 32


class Model(nn.Module):
    def __init__(self, k: int, n: int):
        super().__init__()
        self.linear = nn.Linear(k, n)

    def forward(self, x):
        return self.linear(x)


def get_inputs():
    return [torch.randn(B, K)]


def get_inputs_alt():
    return [torch.randn(3, K)]


def get_init_inputs():
    return [K, N]
