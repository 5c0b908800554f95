"""Bad: answers differ from call to call (noise far above the tolerance)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = x * torch.sigmoid(x)
        return y + 1e-2 * y.abs().mean() * torch.randn_like(y)
