"""1 + 1e-4·tanh(x W^T): the answer is 1 to four digits, whatever the input (test-only)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, k: int, n: int):
        super().__init__()
        self.linear = nn.Linear(k, n, bias=False)

    def forward(self, x):
        return 1.0 + 1e-4 * torch.tanh(self.linear(x))


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return [32, 16]
