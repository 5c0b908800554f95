"""Bad: switches TF32 on for an fp32 task."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, k: int, n: int):
        super().__init__()
        self.linear = nn.Linear(k, n)

    def forward(self, x):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.set_float32_matmul_precision("high")
        return self.linear(x)
