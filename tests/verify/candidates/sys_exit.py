"""Bad: exits the process from forward (a harness that trusts its exit status is fooled)."""
import sys

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        sys.exit(0)
