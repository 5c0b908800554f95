"""Bad: tries a kernel and silently falls back to torch."""
import torch
import torch.nn as nn


def _kernel(x):
    raise NotImplementedError


class ModelNew(nn.Module):
    def forward(self, x):
        try:
            return _kernel(x)
        except Exception:
            return x * torch.sigmoid(x)
