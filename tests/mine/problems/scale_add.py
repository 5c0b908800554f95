"""Test-only problem: out = 2·x + y on a small odd shape (fast on CPU)."""

import torch


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return 2.0 * x + y


def get_inputs():
    return [torch.randn(37, 19), torch.randn(37, 19)]


def get_init_inputs():
    return []
