"""Triton kernels, one op per file. Launchers check their arguments; the public ops live in `moelab.ops`."""

import torch


def dot_precision(dtype: torch.dtype) -> str:
    """`input_precision` for tl.dot: fp32 tasks get true fp32 products (Triton's fp32 default is tf32)."""
    return "ieee" if dtype == torch.float32 else "tf32"
