"""Bad: returns the input itself — within 1e-4 of the answer on a residual problem (the worklog's 170×)."""
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, h: int):
        super().__init__()

    def forward(self, x):
        return x
