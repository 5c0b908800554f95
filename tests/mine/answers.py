"""Scripted model answers for the mining tests: honest kernels, broken ones, a reward hack, prose."""

TRITON_OK = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, 2.0 * x + y, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        x = x.contiguous()
        y = y.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        _scale_add_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
        return out
'''

TORCH_OK = '''
import torch


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.add(y, x, alpha=2.0)
'''

SYNTAX_ERROR = '''
import torch


class ModelNew(torch.nn.Module)
    def forward(self, x, y) return 2 * x + y
'''

# Correct values, but written into the caller's `y` and returned: an alias and a mutation.
HACK_ALIAS = '''
import torch


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return y.add_(x, alpha=2.0)
'''

PROSE = "To make this fast, fuse the multiply and the add into one pass over memory. Good luck!"

THINK_THEN_CODE = "<think>\nMaybe:\n```python\nclass ModelNew: pass\n```\n</think>\nFinal:\n```python\n{code}\n```"
