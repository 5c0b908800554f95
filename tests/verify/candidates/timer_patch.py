"""Bad: replaces the clock so every timed call looks instant."""
import time

import torch
import torch.nn as nn

time.perf_counter = lambda: 0.0


class ModelNew(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)
