"""Pull a later op's weight into L2 from inside a latency-bound kernel (Hopper `cp.async.bulk.prefetch.L2`).

Why: in a decode step HBM is idle while the short kernels run (attention over a 1k cache, the combine, the norms,
the router: about half of the step at batch 1, benchmarks/trace_decode.py). A weight that the next kernel streams
can be requested during that time, so the next kernel reads L2 instead of HBM. The prefetch is a hint with no
register result: a program issues it and moves on; it writes nothing, so it needs no ordering with anything.

Napkin math (Qwen3-30B-A3B, o_proj): 16.8 MB over 4.6 TB/s is 3.6 µs of HBM time, less than the attention split +
combine it overlaps (≈ 7.6 µs in the chained step at 1k context); 16.8 MB is a third of the H200's 60 MB L2.

Each program takes its share of the byte range in PF pieces of `chunk` bytes (a multiple of 16, as the
instruction requires): one instruction per tensor element, so with PF = 128 and 4 warps of 32 each thread issues
one. (A different warp size replicates or packs elements: still correct, only more or fewer instructions.)
Inline PTX: never under the Triton interpreter, and sm_90+ only — the launchers pass PREFETCH=False otherwise.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from moelab.kernels import pdl_supported

PF = 128  # prefetch instructions per program (a tensor of PF byte ranges)


@triton.jit
def prefetch_l2(pf_ptr, n_bytes, chunk, me, PF: tl.constexpr):
    """Program `me` prefetches pieces me·PF .. me·PF + PF − 1 of [pf_ptr, pf_ptr + n_bytes), `chunk` bytes each."""
    piece = me * PF + tl.arange(0, PF)
    start = piece.to(tl.int64) * chunk
    ok = start < n_bytes
    addr = pf_ptr.to(tl.pointer_type(tl.int8)) + tl.where(ok, start, 0)
    size = tl.where(ok, tl.minimum(n_bytes - start, chunk), 16).to(tl.int32)  # outside the range: 16 B at the start
    tl.inline_asm_elementwise("{ cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }", "=r,l,r",
                              [addr, size], dtype=tl.int32, is_pure=False, pack=1)


def prefetch_args(t: torch.Tensor | None, programs: int) -> tuple[torch.Tensor | None, int, int]:
    """(tensor, bytes, chunk) for `prefetch_l2` spread over `programs` programs, or (None, 0, 16) when there is
    nothing to prefetch or this device cannot (no CUDA, the interpreter, pre-Hopper: the same test as PDL's), or
    MOELAB_PREFETCH=0 switches it off. The tensor must be contiguous (its bytes are one range)."""
    if t is None or t.numel() == 0 or not pdl_supported(t.device) or os.environ.get("MOELAB_PREFETCH", "1") == "0":
        return None, 0, 16
    if not t.is_contiguous():
        raise ValueError(f"prefetch: the tensor to prefetch must be contiguous (shape {tuple(t.shape)}, "
                         f"strides {t.stride()})")
    n = t.numel() * t.element_size()
    chunk = -(-triton.cdiv(n, programs * PF) // 16) * 16
    return t, n, max(chunk, 16)
