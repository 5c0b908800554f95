"""Bad: returns the constant 1 on a problem whose answer is 1 to four digits."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, k: int, n: int):
        super().__init__()
        self.n = n

    def forward(self, x):
        return torch.ones(x.shape[0], self.n, dtype=x.dtype, device=x.device)
