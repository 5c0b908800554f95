"""Bad (GPU): launches the work on a side stream the timer's events do not see."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.s = torch.cuda.Stream() if torch.cuda.is_available() else None

    def forward(self, x):
        y = torch.empty_like(x)
        with torch.cuda.stream(self.s):
            for _ in range(50):
                torch.mul(x, torch.sigmoid(x), out=y)
        return y
