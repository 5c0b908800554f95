import os
import sys
from pathlib import Path

import torch

# Without a GPU, candidates' Triton kernels run under the interpreter; verify's worker inherits this.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(Path(__file__).parent))  # fake_llm, answers
