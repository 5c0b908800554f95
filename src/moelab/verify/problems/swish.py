"""Swish x·sigmoid(x) on [4096, 8192] (KernelBench level 1 #25's operation, moelab's shape)."""

import torch
import torch.nn as nn

B, D, B_ALT, D_ALT = 4096, 8192, 37, 1000


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


def get_inputs():
    return [torch.randn(B, D)]


def get_inputs_alt():
    return [torch.randn(B_ALT, D_ALT)]


def get_init_inputs():
    return []
