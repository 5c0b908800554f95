"""Linear, ×2, LeakyReLU(0.1) on [1024, 8192] → 8192 (KernelBench level 2 #12's operations)."""

import torch
import torch.nn as nn

B, IN, OUT, B_ALT = 1024, 8192, 8192, 37
MULTIPLIER, SLOPE = 2.0, 0.1


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, multiplier: float, negative_slope: float):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.leaky_relu = nn.LeakyReLU(negative_slope)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.leaky_relu(self.gemm(x) * self.multiplier)


def FLOPS(inputs, init_inputs, dtype):  # noqa: N802 - the metadata name
    return 2.0 * inputs[0].shape[0] * init_inputs[0] * init_inputs[1]


def get_inputs():
    return [torch.randn(B, IN)]


def get_inputs_alt():
    return [torch.randn(B_ALT, IN)]


def get_init_inputs():
    return [IN, OUT, MULTIPLIER, SLOPE]
