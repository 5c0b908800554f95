"""Bad: right at the timed shape (rows of 4), garbage elsewhere (specialised to the benchmark)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        if x.shape[0] == 4:
            return x * torch.sigmoid(x)
        return x * 0.5
