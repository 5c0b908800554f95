"""Bad: writes outside its working directory — into the harness's job directory, and a new file beside it."""
import pathlib

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        (pathlib.Path("..") / "job" / "sentinel").write_text("mine")
        (pathlib.Path("..") / "loot.txt").write_text("mine")
        return x * torch.sigmoid(x)
