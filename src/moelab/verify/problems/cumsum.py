"""Inclusive prefix sum along dim 1 of [1024, 8192] (KernelBench level 1 #89's operation)."""

import torch
import torch.nn as nn

B, D, B_ALT, D_ALT = 1024, 8192, 37, 1000
# A sum of n terms carries ~√n roundings: the fp32 reference reaches 1e-5 at n = 8192, so fp32 gets
# 5e-5 (still 10× below an fp16 scan's error); see tests/verify/test_tolerance.py.
TOLERANCE = {"fp32": 5e-5, "fp16": 1.5e-3, "bf16": 1e-2}  # bf16: an fp8 scan errs 1.4e-2


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(B, D)]


def get_inputs_alt():
    return [torch.randn(B_ALT, D_ALT)]


def get_init_inputs():
    return [1]
