"""The end of a greedy decode step in one launch: argmax over the vocabulary, and the token written where it goes.

What it replaces (batch 1, `trace-decode-…T171907`, per step): torch's argmax over 151,936 logits is one block of 512
threads (`reduce_kernel<512, 1>`: 8.4 µs long, 13.7 µs of step), then `tok.copy_`, `out.scatter_` and two `add_`s of
one element each: ~21 µs of a 2.52 ms step for 0.3 MB of reads.

Napkin math (B rows of V logits, bf16): bytes = B·V·2 (+ a few writes); FLOPs ≈ 2·B·V compares. At B=1, V=151,936:
0.3 MB, 0.07 µs at 4.6 TB/s — the time is two dependent rounds of latency, nothing else.

Design: a grid of (row, chunk of BLOCK logits). Each program finds its chunk's maximum and its first index, stores
the pair, and counts its arrival (acq_rel); the last of a row combines the row's pairs (the largest value, the lowest
index among equals — torch.argmax's answer — and, like torch.argmax, a NaN wins over every number, the first NaN
first), writes tok[row], out[row, step] and pos[row] + 1, and counts the row; the last row bumps step. Every counter
is reset by whoever used it last, so no memset launch is needed.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moelab.kernels import cdiv, check_device, counters, next_pow2

BLOCK = 4096  # logits per program: V=151,936 → 38 programs a row, 32 values a thread at 4 warps


@triton.jit
def _max_first(v, idx, valid, N_SENTINEL):
    """(value, index) of the largest of v where valid, the lowest index among equals; a NaN beats every number (the
    lowest-index NaN). Invalid entries count as -inf. N_SENTINEL: an index past every valid one."""
    nan = (v != v) & valid
    has_nan = tl.max(nan.to(tl.int32), axis=0) > 0
    x = tl.where(valid & ~nan, v, -float("inf"))
    mx = tl.max(x, axis=0)
    i_max = tl.min(tl.where(valid & ~nan & (x == mx), idx, N_SENTINEL), axis=0)
    i_nan = tl.min(tl.where(nan, idx, N_SENTINEL), axis=0)
    return tl.where(has_nan, float("nan"), mx), tl.where(has_nan, i_nan, i_max)


@triton.jit
def _greedy_emit_kernel(
    logits_ptr, part_v_ptr, part_i_ptr, cnt_ptr, tok_ptr, out_ptr, step_ptr, pos_ptr,
    V, B, N, s_lb, s_ob,
    N_CHUNK: tl.constexpr, C_PAD: tl.constexpr, BLOCK: tl.constexpr,
):
    # counters: [0, B) chunks done per row; B: rows done (the last bumps step).
    b = tl.program_id(0)
    c = tl.program_id(1)
    offs = c * BLOCK + tl.arange(0, BLOCK)
    valid = offs < V
    v = tl.load(logits_ptr + b.to(tl.int64) * s_lb + offs, mask=valid, other=0.0).to(tl.float32)
    val, idx = _max_first(v, offs, valid, V)
    tl.store(part_v_ptr + b * N_CHUNK + c, val)
    tl.store(part_i_ptr + b * N_CHUNK + c, idx)
    arrived = tl.atomic_add(cnt_ptr + b, 1, sem="acq_rel", scope="gpu")
    if arrived == N_CHUNK - 1:
        # The row's last chunk: every pair is visible (the acquire; its result decides this branch, so it stays).
        cs = tl.arange(0, C_PAD)
        cm = cs < N_CHUNK
        pv = tl.load(part_v_ptr + b * N_CHUNK + cs, mask=cm, other=0.0, cache_modifier=".cg")
        pi = tl.load(part_i_ptr + b * N_CHUNK + cs, mask=cm, other=0, cache_modifier=".cg")
        _, best = _max_first(pv, pi, cm, V)  # chunks in index order: the lowest index among the maxima is the first
        st = tl.load(step_ptr)
        tl.store(tok_ptr + b, best.to(tl.int64))
        tl.store(out_ptr + b.to(tl.int64) * s_ob + st, best.to(tl.int64), mask=(st >= 0) & (st < N))  # in bounds
        tl.store(pos_ptr + b, tl.load(pos_ptr + b) + 1)
        tl.store(cnt_ptr + b, 0)
        rows = tl.atomic_add(cnt_ptr + B, 1, sem="acq_rel", scope="gpu")
        if rows == B - 1:  # every row has read step: bump it
            tl.store(step_ptr, st + 1)
            tl.store(cnt_ptr + B, 0)


def greedy_emit(logits: torch.Tensor, tok: torch.Tensor, out: torch.Tensor, step: torch.Tensor,
                pos: torch.Tensor) -> None:
    """In place, one launch: tok[b] = argmax(logits[b]) (torch.argmax's ties and NaN), out[b, step] = tok[b],
    pos[b] += 1, step += 1. Contract: `moelab.ops.sample.greedy_emit_reference`.

    logits [B, V] (float, last dim contiguous); tok [B], out [B, N], step [] and pos [B] int64 on the same device.
    A step outside [0, N) (it lives on the device: not checked on the host) writes no token into out.
    """
    _check(logits, tok, out, step, pos)
    B, V = logits.shape
    if B == 0:
        return
    n_chunk = cdiv(V, BLOCK)
    part_v = torch.empty(B, n_chunk, dtype=torch.float32, device=logits.device)
    part_i = torch.empty(B, n_chunk, dtype=torch.int32, device=logits.device)
    _greedy_emit_kernel[(B, n_chunk)](
        logits, part_v, part_i, counters(logits.device, B + 1, "sample"), tok, out, step, pos,
        V, B, out.shape[1], logits.stride(0), out.stride(0),
        N_CHUNK=n_chunk, C_PAD=next_pow2(n_chunk), BLOCK=BLOCK, num_warps=4,
    )


def _check(logits, tok, out, step, pos) -> None:
    if logits.dim() != 2 or not logits.is_floating_point() or (logits.stride(1) != 1 and logits.shape[1] > 1):
        raise ValueError(f"greedy_emit: logits must be a float [B, V] tensor with a contiguous last dim, got "
                         f"{tuple(logits.shape)} {logits.dtype}")
    B, V = logits.shape
    if V == 0 or V >= 2**31:
        raise ValueError(f"greedy_emit: the vocabulary size {V} is outside 1..2³¹-1")
    want = {"tok": (tok, (B,)), "pos": (pos, (B,)), "step": (step, ())}
    for name, (t, shape) in want.items():
        if t.shape != shape or t.dtype != torch.int64 or t.device != logits.device:
            raise ValueError(f"greedy_emit: {name} must be int64 {list(shape)} on {logits.device}, got "
                             f"{t.dtype} {list(t.shape)} on {t.device}")
    if out.dim() != 2 or out.shape[0] != B or out.dtype != torch.int64 or out.device != logits.device \
            or (out.stride(1) != 1 and out.shape[1] > 1):
        raise ValueError(f"greedy_emit: out must be int64 [B={B}, N] with a contiguous last dim on {logits.device}, "
                         f"got {out.dtype} {list(out.shape)}")
    check_device(logits, "greedy_emit: logits")
