"""Bad: right answer, computed in place in the caller's input."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = x * torch.sigmoid(x)
        x.mul_(0.5)
        return y
