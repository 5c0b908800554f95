"""The worker inherits the environment: Triton candidates run under the interpreter on CPU."""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
