"""The AST scan alone (no process): what it flags and, as important, what honest code it leaves alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from moelab.verify.static import scan

C = Path(__file__).parent / "candidates"


def codes(src: str, precision: str = "fp32") -> set[str]:
    return {f.code for f in scan(src, precision)[0]}


@pytest.mark.parametrize("name", ["rmsnorm_torch", "gemm_torch", "swish_triton", "swish_torch", "moe_gather_bmm",
                                  "nearconst_torch"])
def test_honest_sources_are_clean(name):
    assert codes((C / f"{name}.py").read_text()) == set()


def test_triton_ieee_dot_is_fine_and_tf32_dot_is_not():
    body = """
import triton
import triton.language as tl
@triton.jit
def _k(a, b):
    x = tl.dot(a, b, input_precision="ieee")
    y = tl.dot(a, b, allow_tf32=False)
    z = tl.dot(a, b{})
"""
    assert codes(body.format(', input_precision="ieee"')) == set()
    assert codes(body.format("")) == {"static_tf32_dot"}
    assert codes(body.format(""), "bf16") == set()  # TF32 is no downgrade of a bf16 task


def test_casts_depend_on_the_task_precision():
    src = "import torch\ndef f(x):\n    return x.to(torch.bfloat16)\n"
    assert codes(src, "fp32") == {"static_cast"}
    assert codes(src, "fp16") == {"static_cast"}
    assert codes(src, "bf16") == set()
    assert codes("import triton.language as tl\ndef f(x):\n    return x.to(tl.float16)\n") == {"static_cast"}


def test_torch_compute_is_flagged_only_where_a_kernel_is_claimed():
    torch_only = "import torch\ndef f(x, w):\n    return torch.softmax(x @ w, -1)\n"
    assert codes(torch_only) == set()
    claimed = "import triton\n@triton.jit\ndef _k(p):\n    pass\n" + torch_only
    assert codes(claimed) == {"static_torch_call"}
    # allocation, reshape and routing helpers in torch stay allowed around a kernel
    helpers = ("import torch, triton\n@triton.jit\ndef _k(p):\n    pass\n"
               "def f(x, logits):\n    y = torch.empty_like(x)\n    ids = torch.topk(logits, 2).indices\n"
               "    return y.view(-1), ids.argsort()\n")
    assert codes(helpers) == set()


@pytest.mark.parametrize("src,code", [
    ("import moelab.timing\n", "static_patch"),
    ("from moelab.verify import verify\n", "static_patch"),
    ("import torch\ntorch.cuda.synchronize = lambda: None\n", "static_patch"),
    ("import torch\nsetattr(torch.cuda.Event, 'elapsed_time', None)\n", "static_patch"),
    ("import sys\nf = sys._getframe(1)\n", "static_patch"),
    ("import torch\ns = torch.cuda.Stream()\n", "static_stream"),
    ("from concurrent.futures import ThreadPoolExecutor\n", "static_stream"),
    ("try:\n    import triton\nexcept ImportError:\n    pass\n", None),  # an import guard is no fallback
    ("def f(k, x):\n    try:\n        return k(x)\n    except Exception:\n        return x\n", "static_fallback"),
    ("import torch\nwith torch.autocast('cuda'):\n    pass\n", "static_cast"),
])
def test_tricks(src, code):
    assert codes(src) == ({code} if code else set())


def test_syntax_error_is_a_compile_error():
    assert codes("def f(:\n") == {"compile_error"}
