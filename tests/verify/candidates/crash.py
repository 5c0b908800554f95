"""Bad: raises inside forward."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        raise RuntimeError("illegal memory access (simulated)")
