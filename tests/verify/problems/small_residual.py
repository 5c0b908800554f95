"""x + 1e-4·tanh(x W^T): KernelBench L2 #51's trouble — the residual dominates, so returning x looks right."""
import torch
import torch.nn as nn

B, H = 8, 32


class Model(nn.Module):
    def __init__(self, h: int):
        super().__init__()
        self.linear = nn.Linear(h, h, bias=False)

    def forward(self, x):
        return x + 1e-4 * torch.tanh(self.linear(x))


def get_inputs():
    return [torch.randn(B, H)]


def get_init_inputs():
    return [H]
