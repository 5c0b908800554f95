"""Bad: flattens the output."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return (x * torch.sigmoid(x)).reshape(-1)
