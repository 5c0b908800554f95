"""Bad: returns a copy of the input (no alias to catch it) on a residual problem."""
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, h: int):
        super().__init__()

    def forward(self, x):
        return x.clone()
