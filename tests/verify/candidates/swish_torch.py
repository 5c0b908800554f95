"""Honest: Swish via torch.nn.functional.silu."""
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        return F.silu(x)
