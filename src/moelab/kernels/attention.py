"""Flash-decoding attention over a KV cache: split the sequence across programs, then merge (Triton).

Layout: q [B, Hq, D] or [B, Q, Hq, D] (Q new tokens, the last Q positions of each sequence, causal among
themselves); k_cache, v_cache [B, Hk, S_max, D] (HF static cache layout, any strides); seq_lens [B] int.

Kernel 1 (`_split_kernel`), grid (B·Hk, splits): one program holds every query row that shares one KV head
(G = Hq/Hk heads × Q tokens, padded to a 16-row tensor-core tile), so each K/V byte is read once. The program
walks its chunk of this sequence's keys in BLOCK_N tiles with an online softmax (base-2 exponentials) and writes
a normalised partial output and its log-sum-exp. The chunk is computed in-kernel from the sequence's own length,
so the split count picked on the host (no host sync, CUDA-graph safe) spreads each sequence over all its splits
whatever its length. Kernel 2 (`_combine_kernel`), grid (B·Q·Hq): merges the partials by their log-sum-exp and
adds the attention sink. With one split, kernel 1 finishes the rows itself and kernel 2 is skipped; with 2 to
MERGE_MAX_SPLITS splits, the last of a (sequence, KV head)'s split programs to finish merges them and kernel 2 is
skipped too.

Napkin math (bf16, GQA 32/4 × 128): bytes = B·Hk·L·D·2·2 (K and V) — 1k: 2.1 MB (0.5 µs at 4.3 TB/s), 16k: 33.6 MB
(7.8 µs), 64k: 134 MB (31 µs); the fp32 partials add B·Q·Hq·splits·(D+1)·4 bytes written and read again
(2.2 MB at B=1 with 66 splits: 6.5 % of the KV bytes at 16k, 1.6 % at 64k; 0.5 MB at 1k with 16 splits).
FLOPs = 4·B·Q·Hq·L·D: 4·G flop per K/V element pair, ≈ 8 FLOP/B at G=8 — far below the ridge: memory-bound, and
latency-bound below ~4k tokens, which is why the split count targets a full GPU rather than long chunks.
"""

from __future__ import annotations

import functools
import math

import torch
import triton
import triton.language as tl

from moelab.kernels import (cdiv, chain_pdl, check_device, counters, dot_precision, env_int, next_pow2,
                            pdl_supported)
from moelab.kernels.probe import now_ns, sm_id
from moelab.kernels.rope import _inv_freq, _norm_rope_rows, _rope_consts, check_kv_args, norm_rope_args

_LOG2E = 1.4426950408889634
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_MAX_SPLITS = 256
# Up to this many splits the split kernel's last program per (sequence, KV head) merges them (MERGE), with no combine
# launch: at B=8, 16k (4 splits) the combine's release and tail were ~3 µs of 66 (probe-timeline-…T080121). Beyond,
# one program merging many splits is a longer serial tail than the combine's programs (sessions 4 and 10 measured
# a last-arriver merge of 16-66 splits: 1k 6.3 → 7.9 µs alone; session 17 the batch-1 chain's 7 splits of 64 keys
# merged: 2.41 → 2.45 ms per token, ab-chain-…T130023).
MERGE_MAX_SPLITS = 4


@triton.jit
def _pin(x):
    """x, through an identity asm with side effects: the value must exist at this point of the program (the
    compiler keeps side-effecting asm in order, so work feeding it stays before a later `gdc_wait`). fp32 only;
    inline PTX, so never under the interpreter."""
    return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=False, pack=1)


@triton.jit
def _attend_tile(q, k, v, kpos, kv_end, qpos, row_ok, m_i, l_i, acc, qk_scale, window,
                 HAS_WINDOW: tl.constexpr, PRECISION: tl.constexpr):
    """One BLOCK_N tile of keys (k, v loaded, zero past kv_end) into the online softmax state (m_i, l_i, acc)."""
    s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale  # [BLOCK_M, BLOCK_N], log2 units
    ok = (kpos[None, :] < kv_end) & (kpos[None, :] <= qpos[:, None]) & row_ok[:, None]
    if HAS_WINDOW:
        ok = ok & (kpos[None, :] > qpos[:, None] - window)
    s = tl.where(ok, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with nothing visible yet stay at zero
    p = tl.exp2(s - m_safe[:, None])
    alpha = tl.exp2(m_i - m_safe)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    return m_new, l_i, acc


@triton.jit
def _split_kernel(
    # pointers
    q_ptr, k_ptr, v_ptr, lens_ptr, sinks_ptr, out_ptr, mid_o_ptr, mid_lse_ptr,
    kn_ptr, vn_ptr, qw_ptr, kw_ptr, inv_freq_ptr,  # NEW_KV only: the new k, v [B, Hk, D]; q/k norm weights [D]
    cnt_ptr,  # MERGE only: int32 arrival counters [B·Hk], zero between calls
    probe_ptr,  # PROBE only: int64 [programs, 4] (start ns, 0, end ns, SM)
    # sizes
    HK, D, NQ, S_MAX, NUM_SPLITS, qk_scale, window, HALF, eps,  # HALF, eps: NEW_KV only (rotary_dim / 2, norm eps)
    # strides: q/out (b, token, head, d); k/v (b, head, s, d); lens (b) — NEW_KV: the positions; mid_o (b, token,
    # head, split, d); mid_lse (b, token, head, split); NEW_KV: kn, vn (b, head, d)
    sqb, sqi, sqh, sqd, skb, skh, sks, skd, svb, svh, svs, svd, slb,
    sob, soi, soh, sod, smb, smi, smh, sms, smd, slsb, slsi, slsh, slss,
    sknb, sknh, sknd, svnb, svnh, svnd,  # (the new k's element stride must equal q's: sknd is not read)
    # meta-parameters
    G: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    HAS_WINDOW: tl.constexpr,
    HAS_SINKS: tl.constexpr,
    FINAL: tl.constexpr,  # one split: normalise and write `out` here
    PRECISION: tl.constexpr,  # tl.dot input_precision: "ieee" for fp32 inputs
    TRIGGER: tl.constexpr,  # release a PDL-launched next kernel (the combine, or with FINAL the o projection): 0 no,
    #                         1 as the program starts, 2 once its q is in registers (before the tile loop)
    NEW_KV: tl.constexpr,  # decode (NQ = 1): q, k raw from the projection; norm + RoPE + KV append fused here
    NORM: tl.constexpr,  # NEW_KV: q/k RMSNorm before RoPE (else RoPE only)
    OFFSET: tl.constexpr,  # NEW_KV: the (1 + w) norm of Qwen3-Next
    USE_PDL: tl.constexpr,  # launched with PDL: the first K/V tile is requested before gdc_wait
    PROBE: tl.constexpr = False,  # per-program timestamps (benchmarks/probe_timeline.py)
    MERGE: tl.constexpr = False,  # not FINAL: the last split of each (sequence, KV head) merges them (no combine)
    BLOCK_S: tl.constexpr = 1,  # MERGE: splits, padded to a power of two
):
    if TRIGGER == 1:
        tl.extra.cuda.gdc_launch_dependents()
    bh = tl.program_id(0)
    split = tl.program_id(1)
    if PROBE:
        probe_row = probe_ptr + (bh * NUM_SPLITS + split) * 4
        tl.store(probe_row, now_ns(split))
        tl.store(probe_row + 3, sm_id(split).to(tl.int64))
    b = (bh // HK).to(tl.int64)
    hk = (bh % HK).to(tl.int64)

    rows = tl.arange(0, BLOCK_M)
    qi = rows // G  # new-token index of the row
    head = hk * G + rows % G  # query head of the row
    row_ok = rows < G * NQ
    dcols = tl.arange(0, BLOCK_D)
    d_ok = dcols < D

    # Everything before gdc_wait reads only what kernels before the previous one wrote (the positions or lengths,
    # the cache rows of earlier steps): the previous kernel (the qkv projection) wrote q, k and v only.
    if NEW_KV:
        # The new token sits at positions[b]; its k and v are merged from registers below (and appended to the
        # cache by the program whose chunk holds it), so the cache is read only up to the row before it.
        pos = tl.load(lens_ptr + b * slb).to(tl.int32)
        has_new = (pos >= 0) & (pos < S_MAX)
        seq_len = tl.where(has_new, pos + 1, tl.minimum(tl.maximum(pos + 1, 0), S_MAX))
        cache_end = seq_len - has_new.to(tl.int32)
    else:
        seq_len = tl.minimum(tl.load(lens_ptr + b * slb).to(tl.int32), S_MAX)
        cache_end = seq_len
    qpos = seq_len - NQ + qi  # cache position of each row's token
    lo = 0
    if HAS_WINDOW:
        lo = tl.maximum(seq_len - NQ - window + 1, 0)
    # This program's chunk of [lo, seq_len): an equal share per split, rounded up to whole tiles. (The exact share
    # for long chunks, so that 16k over 33 splits fills 33 SMs, not 32, tied: 16k 13.79 both, 64k 38.21 against
    # 38.48 µs; the stream is DRAM-bound, not per-SM: probe-timeline-…T082850 against …T082857, session 16.)
    chunk = tl.cdiv(tl.cdiv(seq_len - lo, NUM_SPLITS), BLOCK_N) * BLOCK_N
    start = lo + split * chunk
    end = tl.minimum(start + chunk, seq_len)
    kv_end = tl.minimum(end, cache_end)  # cache rows this program reads: [start, kv_end)
    k_base = k_ptr + b * skb + hk * skh
    v_base = v_ptr + b * svb + hk * svh

    if NEW_KV:
        # The norm weights and cos/sin: constants of this step, computed before the wait (off the critical chain).
        posf = pos.to(tl.float32)
        is_k = rows == G  # row G of the tile (a padding row of the dot: BLOCK_M > G) carries the KV head's new k
        w_rows = tl.where(is_k, kw_ptr + rows * 0, qw_ptr + rows * 0)
        nw, nwp, cos, sin = _rope_consts(w_rows, inv_freq_ptr, posf, D, HALF, k_ptr, BLOCK_D)
        if USE_PDL:  # pin cos/sin here: without a use before the wait, LLVM sinks their math below it
            cos = _pin(cos)
            sin = _pin(sin)

    n_first = start
    if USE_PDL:
        # The first tile's bytes go in flight while the previous kernel finishes (at 1k context it is the whole
        # chunk of a split); the loop below starts after it.
        kpos0 = start + tl.arange(0, BLOCK_N)
        kv_mask0 = (kpos0 < kv_end)[:, None] & d_ok[None, :]
        k0 = tl.load(k_base + kpos0[:, None] * sks + dcols[None, :] * skd, mask=kv_mask0, other=0.0)
        v0 = tl.load(v_base + kpos0[:, None] * svs + dcols[None, :] * svd, mask=kv_mask0, other=0.0)
        n_first = start + BLOCK_N
        tl.extra.cuda.gdc_wait()  # q, k and v of this token belong to the previous kernel: read only from here on

    if NEW_KV:
        # q/k RMSNorm + RoPE of this token (the `qk_norm_rope` numerics: the same helper), then the append; q and the
        # new k in one tile, so they share one layout.
        row_ptrs = tl.where(is_k, kn_ptr + b * sknb + hk * sknh, q_ptr + b * sqb + head * sqh)
        qk = _norm_rope_rows(row_ptrs, row_ok | is_k, nw, nwp, cos, sin, D, HALF, eps, sqd, k_ptr, NORM, OFFSET,
                             BLOCK_D)
        qf = tl.where(row_ok[:, None], qk, 0.0)  # fp32 values already rounded to the cache dtype
        q = qf.to(k_ptr.dtype.element_ty)
        k_new = tl.sum(tl.where(is_k[:, None], qk, 0.0), axis=0)  # [BLOCK_D], rounded to the cache dtype
        v_new = tl.load(vn_ptr + b * svnb + hk * svnh + dcols * svnd, mask=d_ok, other=0.0)
        own = has_new & (pos >= start) & (pos < end)  # exactly one split of (b, hk) holds the new row
        wmask = tl.where(own, d_ok, False)  # (not d_ok & own: the interpreter makes a bool vector & scalar int32)
        tl.store(k_base + pos * sks + dcols * skd, k_new.to(k_ptr.dtype.element_ty), mask=wmask)
        tl.store(v_base + pos * svs + dcols * svd, v_new, mask=wmask)
    else:
        q = tl.load(
            q_ptr + b * sqb + qi[:, None] * sqi + head[:, None] * sqh + dcols[None, :] * sqd,
            mask=row_ok[:, None] & d_ok[None, :], other=0.0,
        )

    if TRIGGER == 2:
        tl.extra.cuda.gdc_launch_dependents()
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    if USE_PDL:
        m_i, l_i, acc = _attend_tile(q, k0, v0, start + tl.arange(0, BLOCK_N), kv_end, qpos, row_ok, m_i, l_i, acc,
                                     qk_scale, window, HAS_WINDOW, PRECISION)
    for n0 in range(n_first, kv_end, BLOCK_N):
        kpos = n0 + tl.arange(0, BLOCK_N)
        kv_mask = (kpos < kv_end)[:, None] & d_ok[None, :]
        k = tl.load(k_base + kpos[:, None] * sks + dcols[None, :] * skd, mask=kv_mask, other=0.0)
        v = tl.load(v_base + kpos[:, None] * svs + dcols[None, :] * svd, mask=kv_mask, other=0.0)
        m_i, l_i, acc = _attend_tile(q, k, v, kpos, kv_end, qpos, row_ok, m_i, l_i, acc, qk_scale, window,
                                     HAS_WINDOW, PRECISION)
    if NEW_KV:
        # The new key, from registers: one more online-softmax step (fp32 products of the rounded q and k).
        s_new = tl.sum(qf * k_new[None, :], axis=1) * qk_scale
        s_new = tl.where(tl.where(own, row_ok, False), s_new, float("-inf"))
        m_new = tl.maximum(m_i, s_new)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p_new = tl.exp2(s_new - m_safe)
        alpha = tl.exp2(m_i - m_safe)
        acc = acc * alpha[:, None] + p_new[:, None] * v_new.to(tl.float32)[None, :]
        l_i = l_i * alpha + p_new
        m_i = m_new

    if FINAL:
        if HAS_SINKS:
            sink = tl.load(sinks_ptr + head, mask=row_ok, other=float("-inf")).to(tl.float32) * 1.4426950408889634
            m_f = tl.maximum(m_i, sink)
            m_f = tl.where(m_f == float("-inf"), 0.0, m_f)
            acc = acc * tl.exp2(m_i - m_f)[:, None]
            l_i = l_i * tl.exp2(m_i - m_f) + tl.exp2(sink - m_f)
        o = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
        tl.store(
            out_ptr + b * sob + qi[:, None] * soi + head[:, None] * soh + dcols[None, :] * sod,
            o.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & d_ok[None, :],
        )
    else:
        o = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
        lse = tl.where(l_i > 0, m_i + tl.log2(tl.where(l_i > 0, l_i, 1.0)), float("-inf"))
        tl.store(
            mid_o_ptr + b * smb + qi[:, None] * smi + head[:, None] * smh + split * sms + dcols[None, :] * smd,
            o, mask=row_ok[:, None] & d_ok[None, :],
        )
        tl.store(mid_lse_ptr + b * slsb + qi * slsi + head * slsh + split * slss, lse, mask=row_ok)
        if MERGE:
            tl.debug_barrier()  # every thread's partials precede the release
            arrived = tl.atomic_add(cnt_ptr + bh, 1, sem="acq_rel", scope="gpu")
            if arrived == NUM_SPLITS - 1:
                _merge_splits(mid_o_ptr, mid_lse_ptr, sinks_ptr, out_ptr, b, qi, head, row_ok, dcols, d_ok,
                              NUM_SPLITS, smb, smi, smh, sms, smd, slsb, slsi, slsh, slss, sob, soi, soh, sod,
                              HAS_SINKS, BLOCK_S)
                tl.store(cnt_ptr + bh, 0)
    if PROBE:
        tl.debug_barrier()
        tl.store(probe_row + 2, now_ns(split))


@triton.jit
def _merge_splits(mid_o_ptr, mid_lse_ptr, sinks_ptr, out_ptr, b, qi, head, row_ok, dcols, d_ok, NUM_SPLITS,
                  smb, smi, smh, sms, smd, slsb, slsi, slsh, slss, sob, soi, soh, sod,
                  HAS_SINKS: tl.constexpr, BLOCK_S: tl.constexpr):
    """The combine's merge for every row of one (sequence, KV head), by the last of its split programs to finish
    (MERGE): all the partials [rows, splits, D] and log-sum-exps in one round of L2 loads (.cg: written by other
    SMs), weighted by exp2(lse - max), plus the sink. Napkin math at B=8, 16k, 4 splits: 8 heads × 4 × 128 fp32 =
    16 KB a program, against a combine launch's ~0.5 µs release and ~2.75 µs tail (probe-timeline-…T080121)."""
    splits = tl.arange(0, BLOCK_S)
    s_ok = splits < NUM_SPLITS
    rs = row_ok[:, None] & s_ok[None, :]
    lse = tl.load(mid_lse_ptr + b * slsb + qi[:, None] * slsi + head[:, None] * slsh + splits[None, :] * slss,
                  mask=rs, other=float("-inf"), cache_modifier=".cg")
    o = tl.load(mid_o_ptr + b * smb + qi[:, None, None] * smi + head[:, None, None] * smh
                + splits[None, :, None] * sms + dcols[None, None, :] * smd,
                mask=rs[:, :, None] & d_ok[None, None, :], other=0.0, cache_modifier=".cg")
    if HAS_SINKS:
        sink = tl.load(sinks_ptr + head, mask=row_ok, other=float("-inf")).to(tl.float32) * 1.4426950408889634
    m = tl.max(lse, axis=1)
    if HAS_SINKS:  # the sink is one more logit in the denominator, with no value
        m = tl.maximum(m, sink)
    m = tl.where(m == float("-inf"), 0.0, m)  # rows with nothing visible: zeros, as one split gives
    w = tl.exp2(lse - m[:, None])  # empty splits carry lse = -inf: weight 0
    denom = tl.sum(w, axis=1)
    if HAS_SINKS:
        denom += tl.exp2(sink - m)
    o = tl.sum(o * w[:, :, None], axis=1) / tl.where(denom > 0, denom, 1.0)[:, None]
    tl.store(out_ptr + b * sob + qi[:, None] * soi + head[:, None] * soh + dcols[None, :] * sod,
             o.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & d_ok[None, :])


@triton.jit
def _combine_kernel(
    # pointers
    mid_o_ptr, mid_lse_ptr, sinks_ptr, out_ptr,
    probe_ptr,  # PROBE only: int64 [programs, 4] (start ns, after the PDL wait ns, end ns, SM)
    # sizes
    HQ, NQ, D, NUM_SPLITS,
    # strides
    smb, smi, smh, sms, smd, slsb, slsi, slsh, slss, sob, soi, soh, sod,
    # meta-parameters
    HAS_SINKS: tl.constexpr,
    BLOCK_S: tl.constexpr,
    BLOCK_D: tl.constexpr,
    TRIGGER: tl.constexpr,  # release a PDL-launched next kernel (the o projection) now: kernels.pdl_supported
    USE_PDL: tl.constexpr,  # launched with PDL (the split kernel released it early): wait for its partials
    PROBE: tl.constexpr = False,  # per-program timestamps (benchmarks/probe_timeline.py)
):
    pid = tl.program_id(0)
    if PROBE:
        tl.store(probe_ptr + pid * 4, now_ns(pid))
        tl.store(probe_ptr + pid * 4 + 3, sm_id(pid).to(tl.int64))
    if TRIGGER:
        tl.extra.cuda.gdc_launch_dependents()
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # the partials are the split kernel's output
    if PROBE:
        tl.store(probe_ptr + pid * 4 + 1, now_ns(pid))
    head = pid % HQ
    qi = (pid // HQ) % NQ
    b = (pid // (HQ * NQ)).to(tl.int64)
    splits = tl.arange(0, BLOCK_S)
    dcols = tl.arange(0, BLOCK_D)
    s_ok = splits < NUM_SPLITS
    o_ptrs = mid_o_ptr + b * smb + qi * smi + head * smh + splits[:, None] * sms + dcols[None, :] * smd
    o_mask = s_ok[:, None] & (dcols < D)[None, :]
    # Every load in flight at once: one L2 round trip after the wait, not three in a row (the partials and the sink
    # were loaded after the lse reductions' barriers until session 16: benchmarks/probe_timeline.py, H200, the
    # combine's release-to-end 2.25 → 1.5 µs at B=1 16k; per call 14.18 → 13.69 µs, 64k 38.34 → 37.70, B=8 16k
    # 68.1 → 66.7; probe-timeline-…T080113 against …T080121. In the batch-1 chain 2.41 against 2.42 ms,
    # ab-chain-…T080303).
    o = tl.load(o_ptrs, mask=o_mask, other=0.0)
    if HAS_SINKS:
        sink = tl.load(sinks_ptr + head).to(tl.float32) * 1.4426950408889634
    lse = tl.load(mid_lse_ptr + b * slsb + qi * slsi + head * slsh + splits * slss, mask=s_ok, other=float("-inf"))
    m = tl.max(lse, axis=0)
    if HAS_SINKS:  # the sink is one more logit in the denominator, with no value
        m = tl.maximum(m, sink)
        w = tl.exp2(lse - m)  # empty splits carry lse = -inf: weight 0
        denom = tl.sum(w, axis=0) + tl.exp2(sink - m)
    else:
        w = tl.exp2(lse - m)
        denom = tl.sum(w, axis=0)
    o = tl.sum(o * w[:, None], axis=0) / denom
    tl.store(out_ptr + b * sob + qi * soi + head * soh + dcols * sod, o.to(out_ptr.dtype.element_ty), mask=dcols < D)
    if PROBE:
        tl.debug_barrier()
        tl.store(probe_ptr + pid * 4 + 2, now_ns(pid))


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of `device` (4 for the CPU interpreter, which has none)."""
    if device.type != "cuda":
        return 4
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device())


_SM90_SM_SHARED_BYTES = 233472  # the shared memory of one sm_90 SM, all its programs together (228 KB)


def early_release_stages(b: int, hk: int, s_hint: int, d: int, elem: int, sms: int) -> int | None:
    """The split kernel's pipeline stages when the qkv projection before it releases it as qkv starts (PDL), or None
    where qkv should not: B sequences of Hk KV heads, the cache `s_hint` long, head_dim d, `elem` bytes an element.

    Released early, the split's programs are placed on the SMs qkv's programs leave first. At 3 stages of 64-key tiles
    two fit an SM (67.6 KB of shared memory, 242 registers), so a few programs pile two to an SM while other SMs idle:
    the release alone lost 2.2 % at Qwen3-30B-A3B batch 1, context 392 (28 programs; H100, session 36, stage FT).
    The rule keeps one program an SM:
      * at 5 stages a 64-key program holds 133 KB, one an SM: with the release, 2.832 → 2.823 ms a token there (H100,
        FT), and on the H200 2.35 → 2.34, Qwen3.5-35B-A3B 2.18 → 2.16 (session 37, stage FV) — when the programs are
        no more than the SMs;
      * 128-key tiles (long contexts) hold 135 KB at 3 stages, one an SM already: the release alone gained 3.1 % at
        context 16k (2.92 → 2.83 ms; 4 stages 2.86, the split alone 13.8 → 14.2 µs), H200, FV;
      * more programs than SMs fill every SM anyway: at context 4k (264 programs) the release alone 2.62 → 2.60 ms, a
        tie, where 5 stages (two waves) lost 6 %, H200, FV.
    None where neither holds (e.g. head_dim 64: 5 stages of its tiles still fit two an SM; unmeasured).
    The committed rule against no release (H200, Qwen3-30B-A3B batch 1, session 41, ab-chain-…20261207T06*): 392 keys
    2.351 → 2.343 ms, 2k (128 programs, 5 stages) 2.496 → 2.464, 3k (192 programs at 3 stages, some SMs taking two:
    predicted a tie or a loss) 2.539 → 2.515, 16k 2.936 → 2.844; Qwen3.5-35B-A3B at 392 2.181 → 2.163.

    A program holds (stages − 0.75) K+V tile pairs of shared memory (compiled, Triton 3.6, sm_90, the engine's form:
    133 KB at 5 stages of 64 × 128 bf16 keys; 135 / 201 / 266 KB at 3 / 4 / 5 stages of 128 × 128, where the GPU
    refused 5: session 36). Where 3 stages fit two an SM, 5 stages fit one (4.25 pairs < 227 KB), so 5 never fails."""
    block_n, splits = launch_params(b, hk, s_hint, d, sms)
    pair = 2 * block_n * max(16, next_pow2(d)) * elem  # a K and a V tile

    def one_an_sm(stages: int) -> bool:
        return 2 * (stages - 0.75) * pair > _SM90_SM_SHARED_BYTES

    if one_an_sm(3) or b * hk * splits > sms:
        return 3
    return 5 if one_an_sm(5) else None


def launch_params(b: int, hk: int, s_hint: int, d: int, sms: int) -> tuple[int, int]:
    """(BLOCK_N, splits) for B sequences of Hk KV heads, about `s_hint` tokens long, head_dim d, on `sms` SMs.

    BLOCK_N: K and V tiles of 16 KB each at D=128 bf16 (32 rows at D=256). With 3 pipeline stages a program holds
    70 KB of shared memory (sm_90 compile), so 3 fit per SM.
    splits: B·Hk·splits ≤ 2 programs per SM (rounded down, so no second wave: at B=8, Hk=4 on 132 SMs, 9 splits
    would make 288 programs and a 24-program tail; 8 make 256) — but no more splits than the (hinted) sequence has
    tiles, and at most 256 (the combine reads all of them).
    Long splits (≥ 192 keys each at D ≤ 128): tiles of 128 keys and half the splits, one program per SM. The
    H200 sweeps (`bench_attention.py --sweep`, 2026-12-01, bench-attention-…T135759 and …T141843) found that
    faster at every long shape timed: B=1 16k 17.1 against 18.3 µs, 64k 41.8 against 43.0, B=8 16k 70.1 against
    71.4. At 1k, 16 splits of 64 stay the best of 12 (7.1 µs).
    """
    block_n = 64 if d <= 128 else 32
    if d <= 128 and b * hk >= 32 and s_hint <= 512:
        # Many sequences, short contexts: one split of 128-key tiles, no combine launch. Batch 8 × 4 KV heads at the
        # decode bench's hint (392) took 7.57 ms per token against 7.66 for 7 splits of 64, in the chain
        # (benchmarks/ab_chain.py, H200, session 15, ab-chain-…T221916, 3 rounds; 1 split of 64 7.62, 2 splits 7.71,
        # 4 splits 7.63); batch 32 already took one split here. Batch 16 (between the two) is unmeasured. On this
        # form 8 warps lost (7.60 against 7.54) and 2 splits of 128 too (7.64; ab-chain-…T224446).
        return 128, 1
    splits = max(1, min((2 * sms) // (b * hk), cdiv(s_hint, block_n), _MAX_SPLITS))
    if d <= 128 and splits >= 2 and s_hint >= 192 * splits:
        return 128, splits // 2
    return block_n, splits


def decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    scale: float | None = None,
    sinks: torch.Tensor | None = None,
    window: int | None = None,
    out: torch.Tensor | None = None,
    max_seq_len: int | None = None,
    num_splits: int | None = None,
    block_n: int | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
    merge: bool | None = None,
    _new_kv: tuple | None = None,
    _probe: tuple | None = None,
) -> torch.Tensor:
    """softmax(q·Kᵀ·scale [+ sink]) · V for each sequence's valid keys (flash-decoding, two launches at most).

    Shapes: q [B, Hq, D] or [B, Q, Hq, D]; k_cache/v_cache [B, Hk, S_max, D]; seq_lens [B] int32/int64
    (token counts including the Q new ones; values above S_max are clamped to S_max); sinks [Hq] or None;
    window: sliding-window size or None. Hq must be a multiple of Hk; scale defaults to 1/sqrt(D).
    Tuning (optional): `max_seq_len` is a hint for the split count (default S_max; it never limits the
    lengths read); `num_splits`, `block_n` override the heuristic, `num_warps` and `num_stages` the split kernel's
    launch (sweeps, tests); `merge`: the split kernel's last program per (sequence, KV head) merges the splits, so
    there is no combine launch (default: up to MERGE_MAX_SPLITS splits).
    Returns `out` (allocated, or the given one) of q's shape and dtype.
    (`_new_kv` is `decode_attention_kv`'s, checked there: seq_lens are then the new tokens' positions. `_probe`,
    for benchmarks/probe_timeline.py: two int64 CUDA buffers of ≥ 4 values per split program and per combine program,
    filled with per-program timestamps.)
    """
    if q.dim() not in (3, 4):
        raise ValueError(f"decode_attention: q must be [B, Hq, D] or [B, Q, Hq, D]; got {tuple(q.shape)}")
    q4 = q.unsqueeze(1) if q.dim() == 3 else q
    b, nq, hq, d = q4.shape
    if k_cache.dim() != 4 or v_cache.shape != k_cache.shape:
        raise ValueError(
            f"decode_attention: k_cache and v_cache must be one shape [B, Hk, S_max, D]; "
            f"got {tuple(k_cache.shape)} and {tuple(v_cache.shape)}"
        )
    _, hk, s_max, dk = k_cache.shape
    if k_cache.shape[0] != b or dk != d:
        raise ValueError(f"decode_attention: k_cache is {tuple(k_cache.shape)}; expected [{b}, Hk, S_max, {d}]")
    if hk == 0 or hq % hk:
        raise ValueError(f"decode_attention: {hq} query heads is not a multiple of {hk} KV heads")
    if q.dtype not in _DTYPES or k_cache.dtype != q.dtype or v_cache.dtype != q.dtype:
        raise TypeError(
            f"decode_attention: q/k_cache/v_cache dtypes {q.dtype}/{k_cache.dtype}/{v_cache.dtype}; "
            "expected one of float16/bfloat16/float32 for all three"
        )
    if d == 0 or d > 512:
        raise ValueError(f"decode_attention: head_dim {d} is outside 1..512")
    dev = q.device
    check_device(q, "decode_attention: q")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache), ("seq_lens", seq_lens)):
        if t.device != dev:
            raise ValueError(f"decode_attention: {name} is on {t.device}, q on {dev}")
    if seq_lens.shape != (b,) or seq_lens.dtype not in (torch.int32, torch.int64):
        raise ValueError(
            f"decode_attention: seq_lens must be [{b}] int32/int64; got {tuple(seq_lens.shape)} {seq_lens.dtype}"
        )
    if sinks is not None and (sinks.shape != (hq,) or sinks.device != dev):
        raise ValueError(f"decode_attention: sinks must be [{hq}] on {dev}; got {tuple(sinks.shape)} on {sinks.device}")
    if window is not None and window < 1:
        raise ValueError(f"decode_attention: window must be >= 1, not {window}")
    if out is None:
        out = torch.empty(q.shape, dtype=q.dtype, device=dev)
    elif out.shape != q.shape or out.dtype != q.dtype or out.device != dev:
        raise ValueError(f"decode_attention: out must be {tuple(q.shape)} {q.dtype} on {dev}")
    if b == 0 or nq == 0 or hq == 0 or s_max == 0:
        return out.zero_() if s_max == 0 else out
    out4 = out.unsqueeze(1) if q.dim() == 3 else out

    auto_block_n, auto_splits = launch_params(b, hk, max_seq_len or s_max, d, sm_count(dev))
    block_n = block_n or auto_block_n
    if block_n < 16 or block_n & (block_n - 1):
        raise ValueError(f"decode_attention: block_n must be a power of two >= 16, not {block_n}")
    # Batch 1 at the decode bench's context takes 6-7 splits and the combine. Capping them so that the split kernel
    # merges them itself (MERGE, no combine launch) lost there: 7 merged in session 17 (2.41 -> 2.45 ms), 4 in session
    # 36 (H100, 2.832 -> 2.941 ms, h100/ab-chain-…T193238).
    splits = max(1, min(num_splits or auto_splits, _MAX_SPLITS))
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    g = hq // hk
    block_m = max(16, next_pow2(g * nq + (_new_kv is not None)))  # decode_attention_kv: + the k row
    block_d = max(16, next_pow2(d))
    final = splits == 1
    block_s = next_pow2(splits)
    # The merge's [rows, splits, D] fp32 tile stays within 128 values a thread on 4 warps (sm_90, Triton 3.6: 136-168
    # registers for 1-8 splits of the engine's form, no spill).
    fits = block_m * block_s * block_d <= 16384
    if merge and not final and not fits:
        raise ValueError(f"decode_attention: merge needs rows × splits × head_dim ≤ 16384 ({block_m} × {block_s} "
                         f"× {block_d}); use merge=False or fewer splits")
    merge = not final and fits and (splits <= MERGE_MAX_SPLITS if merge is None else merge)
    if final:
        mid_o = mid_lse = out4  # unused
        mid_strides = (0,) * 9
    else:
        mid_o = torch.empty((b, nq, hq, splits, d), dtype=torch.float32, device=dev)
        mid_lse = torch.empty((b, nq, hq, splits), dtype=torch.float32, device=dev)
        mid_strides = (*mid_o.stride(), *mid_lse.stride())
    sinks_arg = sinks if sinks is not None else q4  # unused without sinks
    if _new_kv is None:
        kn = vn = qw = kw = inv_freq = q4  # unused
        half, eps, norm, offset = 0, 0.0, False, False
        new_strides = (0,) * 6
    else:
        kn, vn, qw, kw, inv_freq, half, eps, norm, offset, fresh = _new_kv
        new_strides = (*kn.stride(), *vn.stride())
    # Launched with PDL (the qkv GEMV before it releases it early) unless the norm weights it reads before its wait
    # were copied just now: a kernel's output is only visible after the wait.
    pdl = _new_kv is not None and not fresh and pdl_supported(dev)
    # In the step-long chain (kernels.chain_pdl) the split kernel releases the combine, PDL-launched, once its q is in
    # registers, so the o projection after the combine streams its weight during the split. (Released as the split
    # starts instead, the o weight's flood slowed the split's own loads: batch 1 2.482 against 2.458 ms.)
    chain = chain_pdl(dev, b * nq)
    launch = {"launch_pdl": True} if pdl else {}
    probe_split, probe_combine = _probe if _probe is not None else (q4, q4)
    # (Taken for every split launch, so a graph captured later with merging finds the buffer its warm-up made.)
    cnt = counters(dev, b * hk, "attention") if not final else q4
    _split_kernel[(b * hk, splits)](
        q4, k_cache, v_cache, seq_lens, sinks_arg, out4, mid_o, mid_lse,
        kn, vn, qw, kw, inv_freq, cnt, probe_split,
        hk, d, nq, s_max, splits, scale * _LOG2E, window or 0, half, float(eps),
        *q4.stride(), *k_cache.stride(), *v_cache.stride(), seq_lens.stride(0),
        *out4.stride(), *mid_strides, *new_strides,
        G=g, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d,
        HAS_WINDOW=window is not None, HAS_SINKS=sinks is not None, FINAL=final,
        # fp32 caches get true fp32 products, not tf32
        PRECISION=dot_precision(q.dtype, "decode_attention" if _new_kv is None else "decode_attention_kv"),
        TRIGGER=2 if chain else int((final or merge) and pdl_supported(dev)), NEW_KV=_new_kv is not None, NORM=norm,
        OFFSET=offset, USE_PDL=pdl, PROBE=_probe is not None, MERGE=merge, BLOCK_S=block_s,
        # 4 warps, 3 stages: in the graph-replayed step 8 warps lost (batch 8 7.71 → 7.85 ms, before batch 8 joined
        # the PDL chain; batch 1 2.40 → 2.50) and 2 stages tied (7.70); the 32-key tiles at batch 8, in the chain,
        # tied (7.74 against 7.75): session 10, ab-chain-…T020023 / …T020056 / …T021459.
        # The stages also set the shared memory a program holds, 67.6 KB at 3 (two programs an SM, by registers), 133
        # KB at 5 (one an SM): the engine asks for 5 where qkv releases the split early (`early_release_stages`); 5
        # alone lost 2 % at Qwen3-30B-A3B batch 1 (H100, session 36, stage FT).
        num_warps=num_warps or 4,
        num_stages=num_stages or 3,
        **launch,
    )
    if not final and not merge:
        _combine_kernel[(b * nq * hq,)](
            mid_o, mid_lse, sinks_arg, out4, probe_combine,
            hq, nq, d, splits,
            *mid_o.stride(), *mid_lse.stride(), *out4.stride(),
            HAS_SINKS=sinks is not None, BLOCK_S=block_s, BLOCK_D=block_d, TRIGGER=pdl_supported(dev),
            USE_PDL=chain, PROBE=_probe is not None,
            num_warps=max(4, min(16, block_s * block_d // 2048)),  # ≤ 64 fp32 values per thread
            **({"launch_pdl": True} if chain else {}),
        )
    return out


def decode_attention_kv(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_weight: torch.Tensor | None,
    k_weight: torch.Tensor | None,
    positions: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    *,
    eps: float,
    rope_theta: float,
    rotary_dim: int | None = None,
    offset: bool = False,
    scale: float | None = None,
    sinks: torch.Tensor | None = None,
    window: int | None = None,
    out: torch.Tensor | None = None,
    max_seq_len: int | None = None,
    num_splits: int | None = None,
    block_n: int | None = None,
    num_stages: int | None = None,
    merge: bool | None = None,
) -> torch.Tensor:
    """A decode step's attention from the raw projection: `qk_norm_rope_kv` then `decode_attention`, in the split
    kernel's launch (plus the combine's, when the sequence is split).

    q [B, Hq, D], k and v [B, Hk, D] (one new token per sequence, any strides: views of the fused qkv), norm
    weights [D] or both None (RoPE only), positions [B]: the new token's position (the cache holds positions
    0 .. positions[b]-1 already). Every split program normalises and rotates its own q heads (G heads × D, from L2);
    the program whose chunk holds the new position normalises and rotates k, appends k and v to the cache, and
    merges that key from registers, so no program reads the row being written. Launched with PDL: the first K/V
    tile (the cache of earlier steps) streams while the qkv projection finishes. Returns the attention output
    [B, Hq, D]; contract: `moelab.ops.attention.decode_attention_kv_reference`.

    Napkin math (Qwen3-30B-A3B, B=1, ctx 1k, 16 splits × 4 KV heads): the prologue adds per program 8 q heads +
    1 k head × 128 × 2 B from L2 (2.3 KB: 0.15 MB over 64 programs, redundant 16× but 7 % of the 2.1 MB of K/V) and
    one rsqrt + 128 cos/sin per head; it removes one launch (2.9 µs of the chained step, trace-decode …T131900).
    """
    if q.dim() != 3:
        raise ValueError(f"decode_attention_kv: q must be [B, Hq, D] (one new token per sequence); got {tuple(q.shape)}")
    check_kv_args("decode_attention_kv", k_cache, v_cache, k, v, positions)
    b, hq, d = q.shape
    if k_cache.shape[0] != b or k_cache.shape[3] != d:
        raise ValueError(f"decode_attention_kv: k_cache is {tuple(k_cache.shape)}; expected [{b}, Hk, S_max, {d}]")
    given = (q_weight, k_weight)
    q_weight, k_weight, rotary_dim, out_dtype, norm = norm_rope_args("decode_attention_kv", q, q_weight, k_weight,
                                                                     rotary_dim, offset)
    fresh = norm and (q_weight is not given[0] or k_weight is not given[1])  # a strided weight was copied
    if out_dtype != k_cache.dtype or q.dtype != k_cache.dtype:
        raise ValueError(f"decode_attention_kv: the cache is {k_cache.dtype} but q is {q.dtype} and normalised q/k "
                         f"would be {out_dtype}")
    if q.stride(2) != 1:  # the q heads and the k head share one tile: one element stride, 1 (qkv views have it)
        q = q.contiguous()
    if k.stride(2) != 1:
        k = k.contiguous()
    inv_freq = _inv_freq(rope_theta, max(rotary_dim, 2), q.device)
    return decode_attention(q, k_cache, v_cache, positions, scale=scale, sinks=sinks, window=window, out=out,
                            max_seq_len=max_seq_len, num_splits=num_splits, block_n=block_n,
                            num_stages=num_stages, merge=merge,
                            _new_kv=(k, v, q_weight, k_weight, inv_freq, rotary_dim // 2, eps, norm, bool(offset),
                                     fresh))
