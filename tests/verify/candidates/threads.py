"""Bad: does its work on a thread."""
import threading

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("y", x * torch.sigmoid(x)))
        t.start()
        t.join()
        return out["y"]
