"""Bad: returns a transposed view (right values, column-major strides)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = (x * torch.sigmoid(x)).t().contiguous()
        return y.t()
