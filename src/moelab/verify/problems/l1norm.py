"""L1 normalisation x / Σ|x| over the last dim of [2048, 8192] (KernelBench level 1 #38's operation)."""

import torch
import torch.nn as nn

B, D, B_ALT, D_ALT = 2048, 8192, 37, 1000


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.sum(torch.abs(x), dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(B, D)]


def get_inputs_alt():
    return [torch.randn(B_ALT, D_ALT)]


def get_init_inputs():
    return []
