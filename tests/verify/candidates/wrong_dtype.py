"""Bad: returns float64 for an fp32 task."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.double()
        return x * torch.sigmoid(x)
