"""Decode GEMV: y[T, N] = x[T, K] @ weight[N, K]ᵀ (+ bias[N]) for 1 ≤ T ≤ 64, fp32 accumulation (Triton).

Napkin math per call (element size e bytes):
  bytes = N·K·e (weight) + T·K·e (x) + T·N·e (y)      FLOPs = 2·T·N·K
  intensity ≈ 2·T / e FLOP/byte: T=1 bf16 is 1 FLOP/byte, T=16 is 16 — all far below the H200's ridge
  (~200 FLOP/byte), so the kernel is pure weight streaming and its floor is weight bytes / read bandwidth.
  Qwen3-30B-A3B decode at 4,639 GB/s (the measured read bandwidth of the profile that motivated this):
    o_proj   W[2048, 4096]   16.8 MB → 3.6 µs     qkv_proj W[5120, 2048] 21.0 MB → 4.5 µs
    router   W[128, 2048]    0.5 MB  → 0.11 µs (launch latency is the real floor there)
    lm_head  W[151936, 2048] 622 MB  → 134 µs
  cuBLAS took 11.4 / 9.35 / 5.7 µs for the first three in the decode profile that motivated this kernel
  (H200, bf16, batch 1, CUDA-graph replayed; o_proj was two launches: cuBLAS split-K).

Design (one launch; every weight byte is read exactly once, by the one program that owns its tile):
  * grid (row blocks of BLOCK_N output rows) × (SPLIT_K ranges of K). Each program streams its rows of the
    weight in [BLOCK_N, BLOCK_K] chunks: contiguous rows, 16-byte vector loads, evict_first (read once);
  * manual double-buffering: the next chunk's load is issued BEFORE the current chunk is reduced, so two
    chunks per program are in flight (Triton pipelines loads that feed tl.dot, not loads that feed a
    reduction; without this each program would wait one full memory latency per chunk);
  * T tokens, no tl.dot (the interpreter has none for bf16, and T is small): the chunk is converted to fp32
    once; for each token t, chunk × x[t] is summed over each thread's own 16-byte vector (in registers) into
    acc[t, n, vector column]. The loop has no cross-lane traffic; acc is reduced over K once, after it.
    x is tiny and re-read from L1/L2 by every program (one x vector serves all BLOCK_N rows of a thread);
  * SPLIT_K > 1 (few row blocks and a long K): each program stores an fp32 partial [T, BLOCK_N], then bumps
    its row block's counter (acq_rel); the LAST program to arrive sums the SPLIT_K partials in split order
    (fixed: bitwise deterministic whoever arrives last), adds the bias, writes y and resets the counter to
    zero, so the next call needs no memset launch. Nobody waits on anybody: no forward-progress risk;
  * USE_PDL (Hopper programmatic dependent launch, off by default): the first weight chunk is requested
    before `gdc_wait` (the weight is never written by the preceding kernel), x only after it; dependents
    are released after the main loop (or as each program starts: `release_early`). Every store and every
    counter access comes after `gdc_wait`;
  * WHOLE_K (each split's K range is one chunk; with use_pdl at T ≤ WHOLE_K_MAX_T `linear_config` picks it when a
    program's slice fits 32 KB): no loop and no second buffer, so the whole slice is requested before `gdc_wait` and
    streams while the kernels before it run (`kernels.chain_pdl`). o_proj T=1: 4 rows × 4096, 96 registers, one wave.
The tensor-core form (`_linear_dot_kernel`, from `dot_min_t()` tokens; above GEMV_MAX_T the only one):
  * the GEMV's loop costs ~2 FP32 instructions per weight element per token, ~475 per thread per 32-byte chunk row
    pair at T=8 in the sm_90 SASS: at 4.6 TB/s that asks ~6.8e13 thread-instructions/s of SMs that issue ~3.3e13.
    So from T≈4-8 the GEMV is bound by instruction issue, not bytes;
  * the same tiles on tensor cores: acc[BLOCK_N, T_PAD] += W[rows, chunk] · x[:, chunk]ᵀ, tokens padded with zeros
    to T_PAD ≥ 16 (the MMA's N). The MMA work is 2·T_PAD·N·K FLOPs, at T_PAD=16 16 FLOP per weight byte: ~75
    TFLOP/s at the read bandwidth, a tenth of the bf16 rate. Triton pipelines the loads that feed the dot
    (num_stages chunks in flight through shared memory); the same split-K epilogue as the GEMV.
Nothing assumes a warp of 32 threads: the layouts are Triton's, sized from num_warps (linear_config counts 32
lanes when it sizes BLOCK_K, a performance choice only: any warp size computes the same result).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from moelab.kernels import (WHOLE_K_MAX_T, cdiv, chain_max_t, check_device, counters, dot_precision, env_int,
                            interpreting, next_pow2)
from moelab.kernels.attention import sm_count

LINEAR_MAX_T = 64  # decode sizes; a larger T belongs to a GEMM (cuBLAS)
GEMV_MAX_T = 16  # the GEMV holds [T, BLOCK_N, vectors] accumulators in registers: beyond, only the tensor-core kernel
# From this T on, `linear` runs the tensor-core kernel. The GEMV's sm_90 loop at T=8 (ptxas + nvdisasm, Triton 3.9,
# 2026-12-01) is ~475 instructions per thread per 32 bytes of weight: at 4.6 TB/s that is ~2× the SMs' issue rate,
# so the GEMV cannot stream at the floor there (batch 8's trace, trace-decode-…T131950: 19 µs per projection on
# average, lm_head included, against ~4 µs floors). Measured (H200, session 8, bench-linear-…T213552, graph-replayed,
# µs GEMV → tensor cores): T=4 qkv 11.7 → 11.4, o_proj 8.7 → 8.8, lm_head 258 → 151; T=8 qkv 17.0 → 11.7, o_proj
# 15.0 → 9.0, lm_head 409 → 153; T=1 the GEMV wins (9.4 vs 11.5 qkv). The batch-8 step (ab-chain-…T213813): 9.05 →
# 8.23 ms per token with the tensor-core kernel from T=4 or T=8 alike. T=2..3 is unmeasured: the GEMV stays there.
# MOELAB_LINEAR_DOT_MIN_T overrides it (A/B, tests).
DOT_MIN_T = 4
# `linear(release_early=True)` (with use_pdl): each program releases the kernel after it as it starts, not once its
# products are summed (the chain's rule since session 6). The next kernel is then resident, its pre-wait loads in
# flight, while the linear runs; released at the sum it is launched only as the linear ends (batch 1: the attention
# split's duration 8.58 µs against its 8.35 µs advance, trace-decode-…T143150; for the split itself the early
# release lost, for the norm and the recurrence it won: `moelab.ops.linear.EARLY_RELEASE_MAX_T`). It widens what that
# kernel may read before its wait from "what the kernels before the previous one wrote" to "what no kernel of this
# step writes", so only a caller who knows the next kernel asks for it (the engine, `moelab.ops.linear.dense`).
# Released right after the wait instead (which keeps the narrower rule), the release is a scheduling barrier to
# ptxas, which converts the whole weight slice to fp32 ahead of it: o_proj's GEMV 94 → 130 registers, qkv's 96 → 168
# (Triton 3.6, sm_90), 3 programs an SM instead of 5.
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@triton.jit
def _accumulate(acc, w_chunk, x_ptr, s_xt, kk, kmask, offs_t, T: tl.constexpr, BLOCK_N: tl.constexpr,
                KV: tl.constexpr, VEC: tl.constexpr):
    """acc[t, n, j] += Σ over vector j's VEC columns of w_chunk[n, :] · x[t, kk] — in-thread, no cross-lane sum."""
    w = w_chunk.to(tl.float32)  # converted once, used by every token
    for t in tl.static_range(T):
        xt = tl.load(x_ptr + t * s_xt + kk, mask=kmask, other=0.0).to(tl.float32)  # L1/L2: tiny, reused
        r = tl.sum(tl.reshape(w * xt[None, :], (BLOCK_N, KV, VEC)), axis=2)  # in-thread: one vector each
        acc = tl.where((offs_t == t)[:, None, None], acc + r[None, :, :], acc)  # t is per-register: folded
    return acc


@triton.jit
def _program_tile(N, K, K_CHUNKS, T_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """This program's rows (row block program_id(0)) and K range (split program_id(1)), for both kernels."""
    pid_n = tl.program_id(0)
    split = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k_begin = split * (K_CHUNKS * BLOCK_K)
    k_end = tl.minimum(K, k_begin + K_CHUNKS * BLOCK_K)
    return pid_n, split, offs_n, offs_n < N, tl.arange(0, BLOCK_K), tl.arange(0, T_PAD), k_begin, k_end


@triton.jit
def _linear_kernel(
    # pointers
    x_ptr, w_ptr, b_ptr, out_ptr,  # x[T, K], weight[N, K], bias[N] (unused unless HAS_BIAS), out[T, N]
    part_ptr, cnt_ptr,  # SPLIT_K > 1 only: fp32 partials [SPLIT_K, T, N]; int32 counters [row blocks], zero
    # sizes
    N, K, K_CHUNKS,  # K_CHUNKS: BLOCK_K chunks per split
    # strides (elements; the last dims are contiguous)
    s_xt, s_wn, s_ot,
    # meta-parameters
    T: tl.constexpr, T_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, VEC: tl.constexpr,
    SPLIT_K: tl.constexpr, HAS_BIAS: tl.constexpr, USE_PDL: tl.constexpr,
    WHOLE_K: tl.constexpr,  # each split's K range is one BLOCK_K chunk: all of it is requested before gdc_wait
    # CONV (`linear(conv=...)`): the conv state [T, C, CK-1], its weight [C, CK], C and strides (`_write_rows`)
    cs_ptr=None, cw_ptr=None, C=0, s_cb=0, s_cc=0, s_cw=0,
    CONV: tl.constexpr = False, CK: tl.constexpr = 2,
    EARLY: tl.constexpr = False,  # USE_PDL: dependents released as the program starts (`release_early`), not at the sum
):
    KV: tl.constexpr = BLOCK_K // VEC  # 16-byte vectors per chunk row
    if USE_PDL and EARLY:
        tl.extra.cuda.gdc_launch_dependents()
    pid_n, split, offs_n, nmask, offs_k, offs_t, k_begin, k_end = _program_tile(N, K, K_CHUNKS, T_PAD, BLOCK_N, BLOCK_K)
    # int64 rows: N·K passes 2³¹ for a large vocabulary × hidden.
    w_ptrs = w_ptr + offs_n.to(tl.int64)[:, None] * s_wn + (k_begin + offs_k)[None, :]
    w_cur = tl.load(w_ptrs, mask=nmask[:, None] & ((k_begin + offs_k) < k_end)[None, :], other=0.0,
                    eviction_policy="evict_first")
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # x and out belong to the previous kernel: touched only from here on

    # acc[t, n, j]: one fp32 partial per 16-byte vector column j of the chunk; each thread owns its own j, so the
    # loop has no cross-lane reduction (that happens once, after the loop).
    acc = tl.zeros((T_PAD, BLOCK_N, KV), dtype=tl.float32)
    if WHOLE_K:
        # The split's whole K range is this one chunk, requested before the wait: no second buffer, no loop.
        kk = k_begin + offs_k
        acc = _accumulate(acc, w_cur, x_ptr, s_xt, kk, kk < k_end, offs_t, T, BLOCK_N, KV, VEC)
    else:
        for k0 in range(k_begin, k_end, BLOCK_K):
            kk = k0 + offs_k
            kmask = kk < k_end
            # The next chunk's bytes go in flight before this chunk is reduced (all-masked past the split's end).
            w_ptrs += BLOCK_K
            w_next = tl.load(w_ptrs, mask=nmask[:, None] & ((kk + BLOCK_K) < k_end)[None, :], other=0.0,
                             eviction_policy="evict_first")
            acc = _accumulate(acc, w_cur, x_ptr, s_xt, kk, kmask, offs_t, T, BLOCK_N, KV, VEC)
            w_cur = w_next
    y = tl.sum(acc, axis=2)  # [T_PAD, BLOCK_N]
    if USE_PDL and not EARLY:
        tl.extra.cuda.gdc_launch_dependents()

    _store_rows(y, offs_t, offs_n, nmask, b_ptr, out_ptr, part_ptr, cnt_ptr, pid_n, split, N, s_ot,
                T, SPLIT_K, HAS_BIAS, cs_ptr, cw_ptr, C, s_cb, s_cc, s_cw, CONV, CK)


@triton.jit
def _write_rows(y, offs_t, offs_n, nmask, omask, b_ptr, out_ptr, s_ot, cs_ptr, cw_ptr, C, s_cb, s_cc, s_cw,
                HAS_BIAS: tl.constexpr, CONV: tl.constexpr, CK: tl.constexpr):
    """y [T_PAD, BLOCK_N] fp32, the whole sum → out in its dtype, the bias added first. CONV (`linear(conv=...)`): the
    output columns below C then pass through the Gated DeltaNet's causal conv + SiLU of one decode token, row t being
    sequence t: window [state[t, n, :], y[t, n]] in out's dtype (w's), Σ window · w[n, :] in fp32 rounded to it, SiLU
    in fp32 rounded to it (`moelab.ops.gdn.gdn_conv_reference`'s casts); state[t, n, :] ← the window's last CK − 1.
    Every (t, n) has one writer (this program), so the state updates in place with no race."""
    if HAS_BIAS:
        y += tl.load(b_ptr + offs_n, mask=nmask, other=0.0).to(tl.float32)[None, :]
    y = y.to(out_ptr.dtype.element_ty)
    if CONV:
        # Tap by tap on [T_PAD, BLOCK_N] tiles (a [T_PAD, BLOCK_N, CK] window took the tensor-core kernel from 144 to
        # 233 registers, Triton 3.6, sm_90): Σ_j window[j]·w[n, j] over the CK − 1 state taps, then x's. A replicated
        # element's threads all read each tap before any writes it (the barriers).
        cmask = omask & (offs_n < C)[None, :]  # the conv's channels
        st = cs_ptr + offs_t.to(tl.int64)[:, None] * s_cb + offs_n[None, :] * s_cc
        wrow = cw_ptr + offs_n * s_cw
        wmask = offs_n < C
        acc = tl.zeros(y.shape, dtype=tl.float32)
        prev = tl.load(st, mask=cmask, other=0.0)  # window[0]
        for j in tl.static_range(CK - 1):
            acc += prev.to(tl.float32) * tl.load(wrow + j, mask=wmask, other=0.0).to(tl.float32)[None, :]
            if j < CK - 2:
                prev = tl.load(st + (j + 1), mask=cmask, other=0.0)  # window[j + 1], before window[j]'s slot is written
                tl.debug_barrier()  # every thread's read of tap j + 1 precedes the writes of tap j
                tl.store(st + j, prev, mask=cmask)  # state[j] ← window[j + 1]
        tl.store(st + (CK - 2), y, mask=cmask)  # state[CK − 2] ← x
        acc += y.to(tl.float32) * tl.load(wrow + (CK - 1), mask=wmask, other=0.0).to(tl.float32)[None, :]
        act = acc.to(out_ptr.dtype.element_ty).to(tl.float32)
        conv = (act / (1.0 + tl.exp(-act))).to(out_ptr.dtype.element_ty)
        y = tl.where(cmask, conv, y)
    tl.store(out_ptr + offs_t[:, None] * s_ot + offs_n[None, :], y, mask=omask)


@triton.jit
def _store_rows(y, offs_t, offs_n, nmask, b_ptr, out_ptr, part_ptr, cnt_ptr, pid_n, split, N, s_ot,
                T: tl.constexpr, SPLIT_K: tl.constexpr, HAS_BIAS: tl.constexpr,
                cs_ptr=None, cw_ptr=None, C=0, s_cb=0, s_cc=0, s_cw=0,
                CONV: tl.constexpr = False, CK: tl.constexpr = 2):
    """The epilogue of both kernels: y [T_PAD, BLOCK_N] (fp32, this program's K range) → out, through the split-K
    partials and the last arriver's ordered sum when SPLIT_K > 1; whoever writes out adds the bias once and, with
    CONV, applies the conv (`_write_rows`)."""
    omask = (offs_t < T)[:, None] & nmask[None, :]
    if SPLIT_K > 1:
        tl.store(part_ptr + (split * T + offs_t[:, None]) * N + offs_n[None, :], y, mask=omask)
        tl.debug_barrier()  # every thread's partial precedes the release below
        arrived = tl.atomic_add(cnt_ptr + pid_n, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLIT_K - 1:
            # The last of the row block. Its acquire orders the other programs' partials before these loads (the
            # result decides this branch, so Triton keeps the atomic); .cg reads them from L2, not a stale L1.
            y = tl.zeros_like(y)
            for s in tl.static_range(SPLIT_K):  # split order, whoever came last: bitwise deterministic
                y += tl.load(part_ptr + (s * T + offs_t[:, None]) * N + offs_n[None, :], mask=omask, other=0.0,
                             cache_modifier=".cg")
            tl.store(cnt_ptr + pid_n, 0)  # all SPLIT_K programs of this block have arrived: ready for the next call
            _write_rows(y, offs_t, offs_n, nmask, omask, b_ptr, out_ptr, s_ot, cs_ptr, cw_ptr, C, s_cb, s_cc, s_cw,
                        HAS_BIAS, CONV, CK)
    else:
        _write_rows(y, offs_t, offs_n, nmask, omask, b_ptr, out_ptr, s_ot, cs_ptr, cw_ptr, C, s_cb, s_cc, s_cw,
                    HAS_BIAS, CONV, CK)


@triton.jit
def _linear_dot_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, part_ptr, cnt_ptr,  # as _linear_kernel
    N, K, K_CHUNKS,
    s_xt, s_wn, s_ot,
    T: tl.constexpr, T_PAD: tl.constexpr,  # T_PAD ≥ 16: the tensor-core tile's N
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr, HAS_BIAS: tl.constexpr, USE_PDL: tl.constexpr, PREC: tl.constexpr,
    cs_ptr=None, cw_ptr=None, C=0, s_cb=0, s_cc=0, s_cw=0,  # CONV: as _linear_kernel
    CONV: tl.constexpr = False, CK: tl.constexpr = 2,
    EARLY: tl.constexpr = False,  # as _linear_kernel
):
    """The tensor-core form: acc[BLOCK_N, T_PAD] += W[rows, chunk] · x[:, chunk]ᵀ (tl.dot, fp32 accumulation), tokens
    padded to T_PAD with zeros. Triton pipelines the loads that feed the dot (num_stages chunks in flight, through
    shared memory), so this loop is loads and MMAs; the GEMV's loop spends ~2 FP32 instructions per weight element
    per token, which from T≈8 outruns the SMs' issue rate before the memory system saturates (module docstring)."""
    if USE_PDL and EARLY:
        tl.extra.cuda.gdc_launch_dependents()
    pid_n, split, offs_n, nmask, offs_k, offs_t, k_begin, k_end = _program_tile(N, K, K_CHUNKS, T_PAD, BLOCK_N, BLOCK_K)
    tmask = offs_t < T
    w_rows = w_ptr + offs_n.to(tl.int64)[:, None] * s_wn
    # The first chunk is peeled off the loop and requested before the PDL wait (the weight is no kernel's output), so
    # it streams while the kernel before this one runs, as the GEMV's first chunk does; the rest is the pipelined loop.
    kk = k_begin + offs_k
    kmask = kk < k_end
    w = tl.load(w_rows + kk[None, :], mask=nmask[:, None] & kmask[None, :], other=0.0, eviction_policy="evict_first")
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # x and out belong to the previous kernel: touched only from here on
    xt = tl.load(x_ptr + offs_t[None, :] * s_xt + kk[:, None], mask=tmask[None, :] & kmask[:, None], other=0.0)
    acc = tl.dot(w, xt, tl.zeros((BLOCK_N, T_PAD), dtype=tl.float32), input_precision=PREC)
    for k0 in range(k_begin + BLOCK_K, k_end, BLOCK_K):
        kk = k0 + offs_k
        kmask = kk < k_end
        w = tl.load(w_rows + kk[None, :], mask=nmask[:, None] & kmask[None, :], other=0.0,
                    eviction_policy="evict_first")  # [BLOCK_N, BLOCK_K], read once
        xt = tl.load(x_ptr + offs_t[None, :] * s_xt + kk[:, None], mask=tmask[None, :] & kmask[:, None],
                     other=0.0)  # [BLOCK_K, T_PAD]: tiny, from L2
        acc = tl.dot(w, xt, acc, input_precision=PREC)
    if USE_PDL and not EARLY:
        tl.extra.cuda.gdc_launch_dependents()
    _store_rows(tl.trans(acc), offs_t, offs_n, nmask, b_ptr, out_ptr, part_ptr, cnt_ptr, pid_n, split, N, s_ot,
                T, SPLIT_K, HAS_BIAS, cs_ptr, cw_ptr, C, s_cb, s_cc, s_cw, CONV, CK)


@functools.cache
def _major(device: torch.device) -> int:
    return torch.cuda.get_device_capability(device)[0]


def linear_config(T: int, N: int, K: int, *, elem_bytes: int = 2, sms: int = 132, whole_k: bool = False,
                  dot: bool = False) -> dict:
    """Launch parameters for y[T, N] = x[T, K] @ W[N, K]ᵀ: DOT, BLOCK_N, BLOCK_K, SPLIT_K, num_warps (num_stages too
    with DOT). dot: the tensor-core kernel (`dot_config`); otherwise the GEMV, as follows.

    The GEMV's tiles were swept at T=1 on the H200 (`benchmarks/bench_linear.py --sweep`, session 5); the reasoning
    behind them, from the sm_90 compile (ptxas registers via cuobjdump, Triton 3.9, 2026-12-01), not from timings:
      * BLOCK_K = 32 lanes × 16-byte vector × num_warps (1024 bf16/fp16, 512 fp32): Triton then spreads the
        warps along K and keeps all BLOCK_N rows of a thread's K slice in that thread, so one x vector serves
        BLOCK_N rows and the K reduction crosses lanes and warps once per program, after the loop;
      * BLOCK_N = 4 rows for T ≤ 2 (an 8 KB bf16 chunk: four 16-byte loads per thread, 56 registers at T=1,
        71 at T=2), 2 rows above (4 KB; 64-127 registers at T=4-16, where 4 rows would need 118-255);
        with two chunks in flight per program and ~4 programs per SM, about 32-64 KB in flight per SM.
        At these choices the sm_90 loop is loads and FMAs only: no shuffle, barrier or shared memory, no spill;
      * SPLIT_K doubles while the grid stays ≤ 4 programs per SM and every split keeps ≥ 2 chunks (so the
        double buffer has something to overlap). At Qwen3-30B-A3B's shapes it stays 1: o_proj T=1 is
        512 programs, qkv 1280; the router is 32 programs of 2 chunks, which the double buffer already puts
        in flight at once (splitting would add the partials' round trip; the sweep checks this);
      * num_warps 4 (fewer when the tile is smaller than one vector per thread).
    whole_k (a PDL launch, T ≤ WHOLE_K_MAX_T): one chunk of the whole K per program, as many rows as fill 32 KB
    (qkv 8 × 2048, o_proj 4 × 4096; measured in the chained step, docs/worklog.md session 6), when K allows.
    """
    if dot:
        return dot_config(T, N, K, elem_bytes=elem_bytes, sms=sms, whole_k=whole_k)
    vec = 16 // elem_bytes
    num_warps = 4
    block_k = min(32 * vec * num_warps, max(vec, next_pow2(K)))
    block_n = min(4 if T <= 2 else 2, next_pow2(max(N, 1)))
    num_warps = max(1, min(num_warps, block_n * block_k // (32 * vec)))
    if whole_k and T <= WHOLE_K_MAX_T and block_n * next_pow2(K) * elem_bytes <= 32 * 1024:
        # A PDL launch whose programs each request their whole slice before the wait (≤ 64 data registers per
        # thread at 4 warps of 32; o_proj: 96 registers in all, 5 programs per SM, so its 512 fit in one wave);
        # the weight streams while the kernels before it run (kernels.chain_pdl).
        # As many rows as fill the 32 KB: qkv (K=2048) 8 rows, 640 programs of 80 registers, one wave; batch 1 took
        # 2.427 against 2.462 ms per token with 4 rows (ab-chain-…T171127).
        block_n = max(block_n, min(16, 32 * 1024 // (next_pow2(K) * elem_bytes)))
        return dict(DOT=False, BLOCK_N=block_n, BLOCK_K=next_pow2(K), SPLIT_K=1, num_warps=num_warps)
    n_blk, chunks = cdiv(N, block_n), cdiv(K, block_k)
    split = 1
    while split < 16 and 2 * n_blk * split <= 4 * sms and chunks >= 4 * split:
        split *= 2
    return dict(DOT=False, BLOCK_N=block_n, BLOCK_K=block_k, SPLIT_K=split, num_warps=num_warps)


# The tensor-core kernel's whole-slice form in the PDL chain (`dot_config(whole_k=True)`). Batch 8 end to end (H200,
# session 14, ab-chain-…T181029, 3 rounds): 7.71 → 7.63 ms per token against the pipelined loop; 16 KB chunks (5
# programs per SM instead of 3) 7.71. $MOELAB_DOT_WHOLE_K=0 gives the loop back (the A/B switch).
DOT_WHOLE_K_BYTES = 32 * 1024


def dot_config(T: int, N: int, K: int, *, elem_bytes: int = 2, sms: int = 132, whole_k: bool = False) -> dict:
    """Launch parameters of the tensor-core kernel, from the napkin math and one sweep (H200, session 8,
    `bench_linear.py --sweep dot` at T=8, bench-linear-…T220944): tiles of 64 weight rows (one warpgroup's MMA
    height) × 64 columns, 4 stages: 40 KB of shared memory at T ≤ 16 (Triton 3.6, sm_90), so 5 programs per SM and
    three 8 KB chunks of each in flight (128 columns took 80 KB: 2 programs per SM). SPLIT_K doubles (to 8 at most,
    for the partials' round trip) while the grid is under 2 programs per SM and each split keeps ≥ 4 chunks.
    Qwen3-30B-A3B at T=8: qkv 80 row blocks × 4 splits (the sweep's best, 9.7 µs; 8 splits, the rule with 4
    programs per SM until then, 12.0), o_proj 32 × 8 (best, 9.1), lm_head 2374 × 1 (best, 151); the router 2 × 8.

    whole_k (a PDL launch, up to `chain_max_t()` rows: in the step's chain, where the kernel before it releases it
    early): each split's K range is ONE chunk of DOT_WHOLE_K_BYTES (64 rows × 256 at bf16), so the kernel's peeled
    first load is the program's whole weight slice, requested before `gdc_wait`: the weight streams while the kernels
    before it run, as the GEMV's whole-K form does at T ≤ 2 (batch 1: qkv advances the step by 2.5 µs against a 4.5
    µs floor, trace-decode-…T215406), where the pipelined loop requests one 8 KB chunk before the wait. At 144
    registers (Triton 3.6, sm_90) 3 programs fit an SM, so qkv's 80 × 8 programs are 1.6 waves and o_proj's 32 × 16
    1.3: the first wave's slices (~12.7 MB of qkv's 21) are in flight before the wait. Only up to 5 programs per SM
    and 16 splits; lm_head keeps the loop. (At 16 KB chunks, 96 registers and 5 per SM, one wave: no gain.)"""
    block_n = min(64, max(16, next_pow2(N)))
    if whole_k and T <= chain_max_t() and env_int("MOELAB_DOT_WHOLE_K", 1):
        wk = max(16, min(next_pow2(K), DOT_WHOLE_K_BYTES // (block_n * elem_bytes)))
        split = cdiv(K, wk)
        if split <= 16 and cdiv(N, block_n) * split <= 5 * sms:
            # num_stages=1: the loop after the peeled chunk never runs, and with more stages Triton still allocates
            # its ring (200 KB of shared memory at 4). 144 registers at 4 warps (sm_90, Triton 3.6).
            return dict(DOT=True, BLOCK_N=block_n, BLOCK_K=wk, SPLIT_K=split, num_warps=4, num_stages=1)
    block_k = min(64, max(16, next_pow2(K)))
    n_blk, chunks = cdiv(N, block_n), cdiv(K, block_k)
    split = 1
    while split < 8 and n_blk * split < 2 * sms and chunks >= 8 * split:
        split *= 2
    return dict(DOT=True, BLOCK_N=block_n, BLOCK_K=block_k, SPLIT_K=split, num_warps=4, num_stages=4)


def dot_min_t() -> int:
    """The smallest T that `linear` runs on tensor cores: DOT_MIN_T, or $MOELAB_LINEAR_DOT_MIN_T (read at every launch,
    so `benchmarks/ab_chain.py` can A/B it in the engine's captured graph); never above GEMV_MAX_T + 1."""
    return min(env_int("MOELAB_LINEAR_DOT_MIN_T", DOT_MIN_T), GEMV_MAX_T + 1)


def _pow2(v) -> bool:
    return isinstance(v, int) and v >= 1 and v & (v - 1) == 0


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    out: torch.Tensor | None = None,
    config: dict | None = None,
    use_pdl: bool = False,
    release_early: bool = False,
    conv: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """y[T, N] = x[T, K] @ weight[N, K]ᵀ (+ bias[N]) with fp32 accumulation, y in x's dtype. One launch.

    For decode sizes only: 1 ≤ T ≤ LINEAR_MAX_T (64); T = 0 (or N = 0) returns an empty output without a launch.
    Below `dot_min_t()` tokens (≤ GEMV_MAX_T) it runs the GEMV, from there the tensor-core kernel (`config`'s DOT
    forces either; the GEMV only up to GEMV_MAX_T).
    x, weight, bias and out share one dtype (float16, bfloat16 or float32) and one device; x, weight and out may
    have any row stride but a contiguous last dim; bias is contiguous. `out` [T, N] may be given (not overlapping x).
    `config` overrides `linear_config`'s keys (DOT, BLOCK_N, BLOCK_K, SPLIT_K, num_warps; num_stages with DOT).
    `use_pdl` launches with programmatic dependent launch (Hopper+; refused under the Triton interpreter, which cannot
    run it); it also picks the whole-slice tiling (`linear_config(whole_k=True)`: the GEMV at T ≤ 2, the tensor-core
    form up to `chain_max_t()` rows). `release_early` (with use_pdl) releases the next PDL-launched kernel as each
    program starts, not after its sum: only where that kernel reads before its wait nothing this step writes.
    A split-K launch (SPLIT_K > 1) uses per-device counters: inside a CUDA graph capture it needs one earlier
    eager split-K call on that device, and two split-K calls must not run concurrently on different streams.
    `conv` = (state [T, C, CK-1], w [C, CK]), both x's dtype with contiguous last dims, C ≤ N, CK ≥ 2: y's first C
    columns leave as the Gated DeltaNet's causal conv + SiLU of one decode token per row (row t is sequence t), and
    the state advances in place: the input projection and `gdn_conv` in one launch
    (`moelab.ops.linear.linear_conv_reference`).
    Raises ValueError naming the argument that is wrong; there is no torch fallback.
    """
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise ValueError(f"linear: x must be a 2-D tensor [T, K], got {getattr(x, 'shape', type(x))}")
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
        raise ValueError(f"linear: weight must be a 2-D tensor [N, K], got {getattr(weight, 'shape', type(weight))}")
    T, K = x.shape
    N = weight.shape[0]
    if x.dtype not in _DTYPES:
        raise ValueError(f"linear: x has dtype {x.dtype}; expected float16, bfloat16 or float32")
    check_device(x, "linear: x")
    if weight.shape[1] != K:
        raise ValueError(f"linear: weight is {tuple(weight.shape)} but x is {tuple(x.shape)}: K differs")
    if weight.dtype != x.dtype:
        raise ValueError(f"linear: weight has dtype {weight.dtype}, x {x.dtype}; they must match")
    if weight.device != x.device:
        raise ValueError(f"linear: weight is on {weight.device}, x on {x.device}")
    if T > LINEAR_MAX_T:
        raise ValueError(f"linear: T={T} tokens is more than LINEAR_MAX_T={LINEAR_MAX_T} (decode sizes); "
                         f"use a GEMM (torch.nn.functional.linear) for larger T")
    if K == 0:
        raise ValueError("linear: K (x.shape[1]) is 0: nothing to reduce")
    if x.stride(1) != 1 and K > 1:
        raise ValueError(f"linear: x's last dim must be contiguous (stride {x.stride(1)})")
    if weight.stride(1) != 1 and K > 1:
        raise ValueError(f"linear: weight's last dim must be contiguous (stride {weight.stride(1)})")
    if bias is not None:
        if bias.shape != (N,) or bias.dtype != x.dtype or bias.device != x.device:
            raise ValueError(f"linear: bias is {tuple(bias.shape)} {bias.dtype} on {bias.device}; "
                             f"expected ({N},) {x.dtype} on {x.device}")
        if bias.stride(0) != 1 and N > 1:
            raise ValueError(f"linear: bias must be contiguous (stride {bias.stride(0)})")
    if conv is not None:
        if not (isinstance(conv, tuple) and len(conv) == 2):
            raise ValueError("linear: conv must be (state [T, C, K-1], w [C, K])")
        c_state, c_w = conv
        if c_w.dim() != 2 or c_w.shape[1] < 2 or c_w.shape[0] > N:
            raise ValueError(f"linear: conv's w must be [C, K] with C ≤ N={N} and K ≥ 2, got {tuple(c_w.shape)}")
        if tuple(c_state.shape) != (T, c_w.shape[0], c_w.shape[1] - 1):
            raise ValueError(f"linear: conv's state must be [T={T}, C={c_w.shape[0]}, K-1={c_w.shape[1] - 1}], got "
                             f"{tuple(c_state.shape)}")
        for name, t in (("state", c_state), ("w", c_w)):
            if t.dtype != x.dtype or t.device != x.device:
                raise ValueError(f"linear: conv's {name} is {t.dtype} on {t.device}; expected x's {x.dtype} on "
                                 f"{x.device}")
            if t.stride(-1) != 1:
                raise ValueError(f"linear: conv's {name} must be contiguous in its last dim")
    if use_pdl and interpreting():
        raise ValueError("linear: use_pdl=True is inline PTX (griddepcontrol): the Triton interpreter cannot run it")
    if use_pdl and _major(x.device) < 9:
        raise ValueError(f"linear: use_pdl=True needs a Hopper or newer GPU (compute capability 9+), not "
                         f"{torch.cuda.get_device_name(x.device)}")
    if out is None:
        out = torch.empty(T, N, dtype=x.dtype, device=x.device)
    else:
        if out.shape != (T, N) or out.dtype != x.dtype or out.device != x.device:
            raise ValueError(f"linear: out is {tuple(out.shape)} {out.dtype} on {out.device}; "
                             f"expected ({T}, {N}) {x.dtype} on {x.device}")
        if out.stride(1) != 1 and N > 1:
            raise ValueError(f"linear: out's last dim must be contiguous (stride {out.stride(1)})")
        if out.numel() and x.numel() and out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr():
            raise ValueError("linear: out shares storage with x (programs still read x while others write out)")
    if T == 0 or N == 0:
        return out

    elem = x.element_size()
    config = config or {}
    dot = config.get("DOT", T >= dot_min_t())
    if not isinstance(dot, bool):
        raise ValueError(f"linear: config DOT must be True or False, not {dot!r}")
    if not dot and T > GEMV_MAX_T:
        raise ValueError(f"linear: the GEMV (DOT=False) holds at most GEMV_MAX_T={GEMV_MAX_T} tokens, not {T}")
    cfg = linear_config(T, N, K, elem_bytes=elem, sms=sm_count(x.device), whole_k=bool(use_pdl), dot=dot)
    unknown = set(config) - set(cfg)
    if unknown:
        raise ValueError(f"linear: unknown config keys {sorted(unknown)}; known: {sorted(cfg)}")
    cfg.update(config)
    vec = 16 // elem
    block_n, block_k, split, num_warps = cfg["BLOCK_N"], cfg["BLOCK_K"], cfg["SPLIT_K"], cfg["num_warps"]
    low = 16 if dot else vec  # a tensor-core tile is at least 16 on each side
    if not (_pow2(block_n) and block_n >= (16 if dot else 1) and _pow2(block_k) and block_k >= low
            and _pow2(num_warps) and num_warps <= 8 and isinstance(split, int) and split >= 1
            and (not dot or (isinstance(cfg["num_stages"], int) and cfg["num_stages"] >= 1))):
        stages = ", num_stages ≥ 1" if dot else ""
        raise ValueError(f"linear: bad config {cfg}: BLOCK_N (≥ {16 if dot else 1}), BLOCK_K (≥ {low}) and "
                         f"num_warps (≤ 8) must be powers of two, SPLIT_K ≥ 1{stages}")
    n_blk, chunks = cdiv(N, block_n), cdiv(K, block_k)
    k_chunks = cdiv(chunks, min(split, chunks))
    split = cdiv(chunks, k_chunks)  # no empty split
    if split > 1:
        part = torch.empty(split, T, N, dtype=torch.float32, device=x.device)
        cnt = counters(x.device, n_blk, "linear")
    else:
        part, cnt = out, out  # unused when SPLIT_K == 1: any valid pointer will do
    launch = {"launch_pdl": True} if use_pdl else {}
    early = bool(use_pdl and release_early)
    args = (x, weight, bias if bias is not None else x, out, part, cnt, N, K, k_chunks,
            x.stride(0), weight.stride(0), out.stride(0))
    conv_kw = {}
    if conv is not None:
        c_state, c_w = conv
        conv_kw = dict(cs_ptr=c_state, cw_ptr=c_w, C=c_w.shape[0], s_cb=c_state.stride(0), s_cc=c_state.stride(1),
                      s_cw=c_w.stride(0), CONV=True, CK=c_w.shape[1])
    if dot:
        _linear_dot_kernel[(n_blk, split)](
            *args, T=T, T_PAD=max(16, next_pow2(T)), BLOCK_N=block_n, BLOCK_K=block_k, SPLIT_K=split,
            HAS_BIAS=bias is not None, USE_PDL=bool(use_pdl), PREC=dot_precision(x.dtype, "linear (DOT)"),
            EARLY=early, num_warps=num_warps, num_stages=cfg["num_stages"], **conv_kw, **launch,
        )
        return out
    _linear_kernel[(n_blk, split)](
        *args, T=T, T_PAD=next_pow2(T), BLOCK_N=block_n, BLOCK_K=block_k, VEC=vec, SPLIT_K=split,
        HAS_BIAS=bias is not None, USE_PDL=bool(use_pdl), WHOLE_K=k_chunks == 1, EARLY=early,
        num_warps=num_warps, **conv_kw,
        **launch,
    )
    return out
