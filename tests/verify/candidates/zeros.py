"""Bad: returns zeros (on a problem whose true output is zero, a 10278× 'speed-up')."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.n = args[1] if len(args) > 1 else None

    def forward(self, x):
        return torch.zeros(x.shape[0], 1, dtype=x.dtype, device=x.device)
