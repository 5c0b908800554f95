"""Grouped MoE for large T (prefill, big batches): tokens grouped by expert, tensor-core GEMMs.

Napkin math, Qwen3-30B-A3B prefill T=4096, k=8 (bf16):
    FLOPs = 2 · T·k · 3·H·I = 309 GFLOP; weights 128 · 9.44 MB = 1.2 GB; activations ~0.2 GB
    → compute-bound: floor ≈ 309 GFLOP / ~750 TFLOP/s ≈ 0.41 ms.
Steps (no host synchronisation, so it can be graph-captured):
  1. grouping on the device: a stable argsort of the T·k expert ids, the count per expert and its cumsums, so each
     expert's pairs are contiguous; tiles of BLOCK_M pairs never straddle two experts; the grid is sized by the
     worst case (P/BLOCK_M + E tiles), surplus programs exit at once. With torch ops that is about 13 small
     launches (sort, casts, scatter_add, cumsums: counted with torch.profiler on the CPU), each ~2 µs of a
     graph-replayed step at batch 32 (48 layers: ~1 ms of 17.9); `_group_sort_kernel` does it in one launch of one
     program (P ≤ GROUP_FUSED_MAX_P; batch 32 18.2 → 16.1 ms per token in a first form), with the same order;
     above that in three, over chunks of 512 pairs (`_group_count_kernel`, `_group_scan_kernel`,
     `_group_place_kernel`);
  2. `_gate_up_kernel`: per (tile, block of I) gathers its tokens' rows of x, multiplies by the
     expert's gate and up rows on tensor cores, SiLU(gate)·up in the epilogue → act[sorted pair, I];
  3. `_down_kernel`: per (tile, block of H) act · w2[e]ᵀ, times the pair's routing weight → y[pair, H] fp32;
  4. `_sum_k_kernel`: out[t] = Σ_j y[t·k + j] in a fixed order (deterministic; no atomics).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moelab.kernels import cdiv, counter_stride, counters, env_int, interpreting, next_pow2, pdl_supported
from moelab.kernels import dot_precision as _prec
from moelab.kernels.moe_decode import _wait_geq


@triton.jit
def _ld(ptr, mask=None, other=None, CG: tl.constexpr = False):
    """A load, from L2 (.cg) when CG: what a kernel that starts before its producer ends reads (never a line an
    earlier kernel left in this SM's L1)."""
    if CG:
        return tl.load(ptr, mask=mask, other=other, cache_modifier=".cg")
    else:
        return tl.load(ptr, mask=mask, other=other)


@triton.jit
def _tile_rows(pid_m, cum_tiles_ptr, start_ptr, count_ptr, E, E_PAD: tl.constexpr, BLOCK_M: tl.constexpr,
               CG: tl.constexpr = False):
    """Tile pid_m's expert, the start of that expert's segment of sorted pairs, the tile's first row and its row
    offsets inside the segment with their mask (cum_tiles: inclusive cumsum of tiles per expert)."""
    offs = tl.arange(0, E_PAD)
    cum = _ld(cum_tiles_ptr + offs, offs < E, 2**30, CG)
    e = tl.sum((cum <= pid_m).to(tl.int32), axis=0)
    prev = tl.sum(tl.where(offs == e - 1, cum, 0), axis=0)  # tiles before expert e
    seg = _ld(start_ptr + e, CG=CG)
    m0 = (pid_m - prev) * BLOCK_M
    offs_m = m0 + tl.arange(0, BLOCK_M)
    return e, seg, m0, offs_m, offs_m < _ld(count_ptr + e, CG=CG)


@triton.jit
def _group_sort_kernel(ids_ptr, order_ptr, start_ptr, count_ptr, cum_tiles_ptr, P, E,
                       BM: tl.constexpr, E_PAD: tl.constexpr, P_PAD: tl.constexpr):
    """The grouping in one program: count[e], start[e] (exclusive cumsum), cum_tiles[e] (inclusive cumsum of
    ⌈count/BM⌉) and order[start[e] + j] = the j-th pair (in pair order) routed to e — a stable argsort, as
    torch.sort(stable=True). Every id is loaded at once, counted with one histogram, and the stable order is one
    bitonic sort of the keys id · P_PAD + pair (unique, so any sort is stable): order = the sorted keys' pair parts.
    An out-of-range id (possible only under graph capture, where the host check is off) gets a key above every
    valid one, so it is counted nowhere and placed nowhere; `_sum_k_kernel` poisons its token.
    Napkin math at P=256, E=128: 1 KB read, ~2 KB written; a 256-element bitonic sort is 36 compare-exchange steps.
    It replaced a program that walked the pairs in 2 × 8 dependent chunks of 32 (12.8 µs at 256 pairs,
    trace-decode-…T220433): batch 32 15.7 → 15.2 ms per token, the same tokens (H200, session 9,
    ab-chain-…T233201; predicted −3 %)."""
    offs = tl.arange(0, P_PAD)
    ids = tl.load(ids_ptr + offs, mask=offs < P, other=-1)
    valid = (offs < P) & (ids >= 0) & (ids < E)
    count = tl.histogram(tl.where(valid, ids, 0), E_PAD, mask=valid)
    offs_e = tl.arange(0, E_PAD)
    emask = offs_e < E
    tl.store(count_ptr + offs_e, count, mask=emask)
    tl.store(start_ptr + offs_e, tl.cumsum(count, axis=0) - count, mask=emask)
    tl.store(cum_tiles_ptr + offs_e, tl.cumsum((count + BM - 1) // BM, axis=0), mask=emask)
    keys = tl.sort(tl.where(valid, ids * P_PAD + offs, E_PAD * P_PAD))
    n_valid = tl.sum(valid.to(tl.int32), axis=0)
    tl.store(order_ptr + offs, keys % P_PAD, mask=offs < n_valid)


@triton.jit
def _group_count_kernel(ids_ptr, part_ptr, P, E, CHUNK: tl.constexpr, E_PAD: tl.constexpr):
    """The chunked grouping (P > GROUP_FUSED_MAX_P), step 1 of 3: part[c, e] = the pairs of chunk c routed to e."""
    c = tl.program_id(0)
    offs = c * CHUNK + tl.arange(0, CHUNK)
    ids = tl.load(ids_ptr + offs, mask=offs < P, other=-1)
    valid = (offs < P) & (ids >= 0) & (ids < E)
    tl.store(part_ptr + c * E_PAD + tl.arange(0, E_PAD), tl.histogram(tl.where(valid, ids, 0), E_PAD, mask=valid))


@triton.jit
def _group_scan_kernel(part_ptr, off_ptr, start_ptr, count_ptr, cum_tiles_ptr, E, N_CHUNK,
                       BM: tl.constexpr, E_PAD: tl.constexpr, C_PAD: tl.constexpr):
    """Step 2, one program: count, start, cum_tiles as `_group_sort_kernel` gives them, and off[c, e] = where chunk
    c's pairs of expert e start in the order (start[e] + the earlier chunks' pairs of e), less where they start in
    chunk c's own sorted keys (its pairs of experts below e), so that step 3 places a key by off + its position."""
    offs_c = tl.arange(0, C_PAD)
    offs_e = tl.arange(0, E_PAD)
    ptrs = offs_c[:, None] * E_PAD + offs_e[None, :]
    m = ptrs < N_CHUNK * E_PAD  # whole rows: the chunks that exist
    part = tl.load(part_ptr + ptrs, mask=m, other=0)  # [C_PAD, E_PAD]
    count = tl.sum(part, axis=0)
    start = tl.cumsum(count, axis=0) - count
    emask = offs_e < E
    tl.store(count_ptr + offs_e, count, mask=emask)
    tl.store(start_ptr + offs_e, start, mask=emask)
    tl.store(cum_tiles_ptr + offs_e, tl.cumsum((count + BM - 1) // BM, axis=0), mask=emask)
    off = start[None, :] + (tl.cumsum(part, axis=0) - part) - (tl.cumsum(part, axis=1) - part)
    tl.store(off_ptr + ptrs, off, mask=m)


@triton.jit
def _group_place_kernel(ids_ptr, off_ptr, order_ptr, P, E, CHUNK: tl.constexpr, E_PAD: tl.constexpr):
    """Step 3: chunk c's pairs sorted by (expert, pair) — keys e · CHUNK + local index, unique, so the sort is
    stable — and each written to order[off[c, e] + its position among the sorted keys]. An out-of-range id sorts
    after every valid key and is placed nowhere, as in `_group_sort_kernel`.
    Napkin math at T=4096, k=8 (64 chunks of 512): 128 KB of ids read twice, 128 KB of order written; the torch ops
    it replaces (a stable sort of int64 ids, a scatter_add of 32k ones into 128 counters) are ~13 launches."""
    c = tl.program_id(0)
    local = tl.arange(0, CHUNK)
    offs = c * CHUNK + local
    ids = tl.load(ids_ptr + offs, mask=offs < P, other=-1)
    valid = (offs < P) & (ids >= 0) & (ids < E)
    keys = tl.sort(tl.where(valid, ids * CHUNK + local, E_PAD * CHUNK))
    e_s = keys // CHUNK
    ok = e_s < E
    dest = tl.load(off_ptr + c * E_PAD + e_s, mask=ok, other=0) + local
    tl.store(order_ptr + dest, c * CHUNK + keys % CHUNK, mask=ok)


@triton.jit
def _tile_pids(N, BLOCK_N: tl.constexpr, N_FASTEST: tl.constexpr):
    """(token tile, column block) of this program. N_FASTEST: a 1-D grid whose consecutive programs take the column
    blocks of one token tile, so the programs resident together share their activation rows in L2 (and an expert's
    weight block is read by its few token tiles at about the same time); else the 2-D grid, token tile fastest."""
    if N_FASTEST:
        nb = tl.cdiv(N, BLOCK_N)
        pid = tl.program_id(0)
        return pid // nb, pid % nb
    else:
        return tl.program_id(0), tl.program_id(1)


@triton.jit
def _gate_up_kernel(
    x_ptr, w13_ptr, order_ptr, start_ptr, count_ptr, cum_tiles_ptr, act_ptr, w13_desc, cnt_ptr,
    H, I, E, K_TOP, s_xt, s_w13e, s_w13r,
    E_PAD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    PREC: tl.constexpr, N_FASTEST: tl.constexpr = False,
    TMA: tl.constexpr = False,  # weight tiles by tensor descriptor (w13 as [E·2I, H]; WIDE: [E·2, I, H])
    WIDE: tl.constexpr = False,  # gate and up as one [BLOCK_K, 2·BLOCK_N] operand of one dot
    OVERLAP: tl.constexpr = False,  # count each token tile's finished column blocks (cnt_ptr, CS int32s apart) for
    #                                 the down GEMM, which polls them
    CS: tl.constexpr = 1,
    TRIGGER: tl.constexpr = False,  # release the PDL-launched down GEMM as each program starts
    HALF: tl.constexpr = False,  # WIDE + TMA: an expert's last tile with at most BLOCK_M / 2 rows as a half tile
):
    if TRIGGER:
        tl.extra.cuda.gdc_launch_dependents()
    pid_m, pid_n = _tile_pids(I, BLOCK_N, N_FASTEST)
    total = tl.load(cum_tiles_ptr + E - 1)
    if HALF:
        if pid_m < total:
            e, seg, m0, offs_m, mmask = _tile_rows(pid_m, cum_tiles_ptr, start_ptr, count_ptr, E, E_PAD, BLOCK_M)
            if tl.load(count_ptr + e) - m0 <= BLOCK_M // 2:
                _gate_up_rows(x_ptr, w13_desc, order_ptr, count_ptr, act_ptr, e, seg, m0, pid_n, H, I, K_TOP, s_xt,
                              BLOCK_M // 2, BLOCK_N, BLOCK_K, PREC)
            else:
                _gate_up_rows(x_ptr, w13_desc, order_ptr, count_ptr, act_ptr, e, seg, m0, pid_n, H, I, K_TOP, s_xt,
                              BLOCK_M, BLOCK_N, BLOCK_K, PREC)
        return
    if pid_m < total:
        e, seg, m0, offs_m, mmask = _tile_rows(pid_m, cum_tiles_ptr, start_ptr, count_ptr, E, E_PAD, BLOCK_M)
        pair = tl.load(order_ptr + seg + offs_m, mask=mmask, other=0)
        tok = pair // K_TOP
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        nmask = offs_n < I
        wbase = w13_ptr + e.to(tl.int64) * s_w13e
        if WIDE:
            act = _gate_up_wide(x_ptr, wbase, w13_desc, e, tok, mmask, pid_n, H, I, s_xt, s_w13r,
                                BLOCK_M, BLOCK_N, BLOCK_K, PREC, TMA)
        else:  # gate and up as two dots on two accumulators
            acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k0 in range(0, H, BLOCK_K):
                offs_k = k0 + tl.arange(0, BLOCK_K)
                kmask = offs_k < H
                a = tl.load(x_ptr + tok[:, None] * s_xt + offs_k[None, :], mask=mmask[:, None] & kmask[None, :],
                            other=0.0)
                if TMA:
                    # Rows past this expert's gate (or up) block feed only act columns the store masks; columns past
                    # H and rows past E·2I arrive as zeros.
                    row0 = e * (2 * I) + pid_n * BLOCK_N
                    wg = tl.trans(w13_desc.load([row0, k0]))
                    wu = tl.trans(w13_desc.load([row0 + I, k0]))
                else:
                    wg = tl.load(wbase + offs_n[None, :] * s_w13r + offs_k[:, None],
                                 mask=nmask[None, :] & kmask[:, None], other=0.0)
                    wu = tl.load(wbase + (offs_n + I)[None, :] * s_w13r + offs_k[:, None],
                                 mask=nmask[None, :] & kmask[:, None], other=0.0)
                acc_g = tl.dot(a, wg, acc_g, input_precision=PREC)
                acc_u = tl.dot(a, wu, acc_u, input_precision=PREC)
            act = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
        rows = seg + offs_m
        tl.store(act_ptr + rows[:, None].to(tl.int64) * I + offs_n[None, :], act.to(act_ptr.dtype.element_ty),
                 mask=mmask[:, None] & nmask[None, :])
        if OVERLAP:
            tl.debug_barrier()  # every thread's stores precede the release
            tl.atomic_add(cnt_ptr + pid_m * CS, 1, sem="release", scope="gpu")


@triton.jit
def _gate_up_rows(x_ptr, w13_desc, order_ptr, count_ptr, act_ptr, e, seg, m0, pid_n, H, I, K_TOP, s_xt,
                  ROWS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PREC: tl.constexpr):
    """A WIDE + TMA tile of ROWS token rows (HALF: BLOCK_M, or BLOCK_M / 2 for an expert's last tile that has at most
    that many), the act rows stored."""
    offs_m = m0 + tl.arange(0, ROWS)
    mmask = offs_m < tl.load(count_ptr + e)
    tok = tl.load(order_ptr + seg + offs_m, mask=mmask, other=0) // K_TOP
    act = _gate_up_wide(x_ptr, x_ptr, w13_desc, e, tok, mmask, pid_n, H, I, s_xt, 0, ROWS, BLOCK_N, BLOCK_K, PREC, True)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = seg + offs_m
    tl.store(act_ptr + rows[:, None].to(tl.int64) * I + offs_n[None, :], act.to(act_ptr.dtype.element_ty),
             mask=mmask[:, None] & (offs_n < I)[None, :])


@triton.jit
def _gate_up_wide(x_ptr, wbase, w13_desc, e, tok, mmask, pid_n, H, I, s_xt, s_w13r,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PREC: tl.constexpr,
                  TMA: tl.constexpr):
    """The same tile as one dot over a [BLOCK_K, 2·BLOCK_N] weight operand, so each x tile is read from shared
    memory once per K chunk, not twice (H200, T=4096: 769 → 747 µs by pointers, 733-738 by TMA; session 12,
    sweep-moe-grouped-BE/BF/BG-…).
    Pointer loads: column 2j is gate row j, 2j+1 up row j (each a contiguous run along K), and the accumulator's
    column pairs split into gate and up. TMA: w13 as [E·2, I, H], one [2, BLOCK_N, BLOCK_K] box (the expert's gate
    rows, then its up rows; rows past I arrive as zeros), so the first BLOCK_N columns are gate, the rest up."""
    if TMA:
        acc = tl.zeros((BLOCK_M, 2 * BLOCK_N), dtype=tl.float32)
        for k0 in range(0, H, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            a = tl.load(x_ptr + tok[:, None] * s_xt + offs_k[None, :], mask=mmask[:, None] & (offs_k < H)[None, :],
                        other=0.0)
            w = tl.reshape(w13_desc.load([2 * e, pid_n * BLOCK_N, k0]), (2 * BLOCK_N, BLOCK_K))
            acc = tl.dot(a, tl.trans(w), acc, input_precision=PREC)
        g, u = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N)), (0, 2, 1)))
    else:
        offs_c = tl.arange(0, 2 * BLOCK_N)
        col = pid_n * BLOCK_N + offs_c // 2
        wrow = col + (offs_c % 2) * I
        cmask = col < I
        acc = tl.zeros((BLOCK_M, 2 * BLOCK_N), dtype=tl.float32)
        for k0 in range(0, H, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            kmask = offs_k < H
            a = tl.load(x_ptr + tok[:, None] * s_xt + offs_k[None, :], mask=mmask[:, None] & kmask[None, :],
                        other=0.0)
            w = tl.load(wbase + wrow[None, :] * s_w13r + offs_k[:, None], mask=cmask[None, :] & kmask[:, None],
                        other=0.0)
            acc = tl.dot(a, w, acc, input_precision=PREC)
        g, u = tl.split(tl.reshape(acc, (BLOCK_M, BLOCK_N, 2)))
    return g / (1.0 + tl.exp(-g)) * u


@triton.jit
def _down_kernel(
    act_ptr, w2_ptr, tw_ptr, order_ptr, start_ptr, count_ptr, cum_tiles_ptr, y_ptr, act_desc, w2_desc, cnt_ptr,
    H, I, E, s_w2e, s_w2r, MAX_TILES, N_GU, N_HB,
    E_PAD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    PREC: tl.constexpr, N_FASTEST: tl.constexpr = False,
    TMA: tl.constexpr = False,  # act [P, I] and w2 (as [E·H, I]) tiles by tensor descriptor
    OVERLAP: tl.constexpr = False,  # PDL-launched with no hardware wait: poll the token tile's counter (N_GU gate/up
    #                                 column blocks done), the act rows by pointers from L2; the tile's last of N_HB
    #                                 programs resets its counters (MAX_TILES apart)
    CS: tl.constexpr = 1,
    ACT_TMA: tl.constexpr = False,  # OVERLAP: the act rows by TMA after the acquire and a generic-to-async proxy fence
    HALF: tl.constexpr = False,  # TMA: an expert's last tile with at most BLOCK_M / 2 rows as a half tile (act_half)
    act_half=None,  # HALF: act's descriptor with BLOCK_M / 2-row boxes
):
    pid_m, pid_n = _tile_pids(H, BLOCK_N, N_FASTEST)
    if HALF:
        if pid_m < tl.load(cum_tiles_ptr + E - 1):
            e, seg, m0, offs_m, mmask = _tile_rows(pid_m, cum_tiles_ptr, start_ptr, count_ptr, E, E_PAD, BLOCK_M)
            if tl.load(count_ptr + e) - m0 <= BLOCK_M // 2:
                _down_rows(act_half, w2_desc, tw_ptr, order_ptr, count_ptr, y_ptr, e, seg, m0, pid_n, H, I,
                           BLOCK_M // 2, BLOCK_N, BLOCK_K, PREC)
            else:
                _down_rows(act_desc, w2_desc, tw_ptr, order_ptr, count_ptr, y_ptr, e, seg, m0, pid_n, H, I,
                           BLOCK_M, BLOCK_N, BLOCK_K, PREC)
        return
    # With OVERLAP the grouping (which the gate/up GEMM, a plain launch, followed) and the routing are read without a
    # wait: both ended before the gate/up GEMM began, and this kernel starts only once every gate/up program has.
    total = _ld(cum_tiles_ptr + E - 1, CG=OVERLAP)
    if pid_m < total:
        e, seg, m0, offs_m, mmask = _tile_rows(pid_m, cum_tiles_ptr, start_ptr, count_ptr, E, E_PAD, BLOCK_M, OVERLAP)
        rows = seg + offs_m
        pair = _ld(order_ptr + rows, mmask, 0, OVERLAP)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        nmask = offs_n < H
        wbase = w2_ptr + e.to(tl.int64) * s_w2e
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        k_end = I
        if OVERLAP:  # the loads below depend on the acquire's result (see _wait_geq)
            k_end = _wait_geq(cnt_ptr + pid_m * CS, N_GU, I, "")  # a tight spin (a 256 ns backoff tied, stage DM)
            if ACT_TMA:  # the acquire ordered generic-proxy reads; a TMA load is the async proxy: fence between them
                k_end = tl.inline_asm_elementwise("{ fence.proxy.async.global; mov.b32 $0, $1; }", "=r,r", [k_end],
                                                  dtype=tl.int32, is_pure=False, pack=1)
        for k0 in range(0, k_end, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            kmask = offs_k < I
            if OVERLAP and ACT_TMA:
                a = act_desc.load([seg + m0, k0])
                w = tl.trans(w2_desc.load([e * H + pid_n * BLOCK_N, k0]))
            elif OVERLAP:  # act by pointers from L2 (a TMA load is another proxy than the acquire's loads)
                a = tl.load(act_ptr + rows[:, None].to(tl.int64) * I + offs_k[None, :],
                            mask=mmask[:, None] & kmask[None, :], other=0.0, cache_modifier=".cg")
                if TMA:
                    w = tl.trans(w2_desc.load([e * H + pid_n * BLOCK_N, k0]))
                else:
                    w = tl.load(wbase + offs_n[None, :] * s_w2r + offs_k[:, None],
                                mask=nmask[None, :] & kmask[:, None], other=0.0)
            elif TMA:
                # Token rows past this expert's segment are the next expert's pairs, rows past H the next expert's
                # weights: both feed only outputs the store masks. Columns past I and rows past the ends are zeros.
                a = act_desc.load([seg + m0, k0])
                w = tl.trans(w2_desc.load([e * H + pid_n * BLOCK_N, k0]))
            else:
                a = tl.load(act_ptr + rows[:, None].to(tl.int64) * I + offs_k[None, :],
                            mask=mmask[:, None] & kmask[None, :], other=0.0)
                w = tl.load(wbase + offs_n[None, :] * s_w2r + offs_k[:, None], mask=nmask[None, :] & kmask[:, None],
                            other=0.0)
            acc = tl.dot(a, w, acc, input_precision=PREC)
        wt = _ld(tw_ptr + pair, mmask, 0.0, OVERLAP).to(tl.float32)
        acc = acc * wt[:, None]
        tl.store(y_ptr + pair[:, None].to(tl.int64) * H + offs_n[None, :], acc.to(y_ptr.dtype.element_ty),
                 mask=mmask[:, None] & nmask[None, :])
        if OVERLAP:  # every program of this tile has passed its wait once N_HB have arrived here
            tl.debug_barrier()
            arrived = tl.atomic_add(cnt_ptr + (MAX_TILES + pid_m) * CS, 1, sem="acq_rel", scope="gpu")
            if arrived == N_HB - 1:
                tl.store(cnt_ptr + pid_m * CS, 0)
                tl.store(cnt_ptr + (MAX_TILES + pid_m) * CS, 0)


@triton.jit
def _down_rows(act_desc, w2_desc, tw_ptr, order_ptr, count_ptr, y_ptr, e, seg, m0, pid_n, H, I,
               ROWS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PREC: tl.constexpr):
    """A TMA down tile of ROWS token rows (act_desc's boxes are ROWS × BLOCK_K), weighted and stored as y rows."""
    offs_m = m0 + tl.arange(0, ROWS)
    mmask = offs_m < tl.load(count_ptr + e)
    pair = tl.load(order_ptr + seg + offs_m, mask=mmask, other=0)
    acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, I, BLOCK_K):
        a = act_desc.load([seg + m0, k0])
        w = tl.trans(w2_desc.load([e * H + pid_n * BLOCK_N, k0]))
        acc = tl.dot(a, w, acc, input_precision=PREC)
    wt = tl.load(tw_ptr + pair, mask=mmask, other=0.0).to(tl.float32)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    y = (acc * wt[:, None]).to(y_ptr.dtype.element_ty)
    tl.store(y_ptr + pair[:, None].to(tl.int64) * H + offs_n[None, :], y, mask=mmask[:, None] & (offs_n < H)[None, :])


@triton.jit
def _sum_k_kernel(y_ptr, extra_ptr, ids_ptr, out_ptr, H, E, s_ot, K_TOP: tl.constexpr, K_PAD: tl.constexpr,
                  HAS_EXTRA: tl.constexpr, BLOCK: tl.constexpr):
    """out[t] = Σ_j y[t·k + j] (+ the shared expert's row) in a fixed order; NaN for a token with an out-of-range id
    (graph capture skips the host check; its pair's y row was never written)."""
    t = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = offs < H
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for j in tl.static_range(K_TOP):
        acc += tl.load(y_ptr + (t * K_TOP + j).to(tl.int64) * H + offs, mask=m, other=0.0).to(tl.float32)
    if HAS_EXTRA:
        acc += tl.load(extra_ptr + t.to(tl.int64) * H + offs, mask=m, other=0.0).to(tl.float32)
    offs_j = tl.arange(0, K_PAD)
    ids = tl.load(ids_ptr + t * K_TOP + offs_j, mask=offs_j < K_TOP, other=0)
    bad = tl.max(((ids < 0) | (ids >= E)).to(tl.int32), axis=0) > 0
    acc = tl.where(bad, float("nan"), acc)
    tl.store(out_ptr + t * s_ot + offs, acc.to(out_ptr.dtype.element_ty), mask=m)


def grouped_config(P: int, E: int, H: int, I: int) -> dict:
    """Tile sizes and options for P (token, expert) pairs over E experts: best of benchmarks/sweep_moe.py --grouped
    on the H200, Qwen3-30B-A3B. Tiles (session 8: sweep-moe-grouped-t32-t256-…T2153 and -t64-t128-…T2203): a
    64-row tile spends most of its MMA rows on padding while an expert has a few pairs. Options (session 11,
    --grouped-variants, gpu-session-AW-…): N_FASTEST (a 1-D grid, the column blocks of one token tile on consecutive
    programs: at T=4096 the down GEMM's act rows stay in L2 across its 16 column blocks), Y_LOWP (the per-pair
    outputs in the input dtype: at T=4096 268 MB less written and read), TMA (weight and act tiles by tensor
    descriptor). Each alone at T=4096 (128 × 128, 4 stages): 1,110 µs → 1,021 / 1,000 / 1,097; all three 891, and
    on 3 stages 859 µs (360 TFLOP/s, 47 % of the bf16 rate). WIDE (gate and up as one operand of one dot,
    by TMA) at P ≥ 8192 since session 12 (T=4096 769 → 733-738 µs); its 256-column down tiles are a tie with 128.
      T=32 (256 pairs, 2 an expert on average): 16 × 64 tiles, 4 stages, the options: 261 µs (16 × 32, 3 stages, as
        before them: 267);
      T=64 / 128 (4 / 8 an expert): 16 × 64, 4 stages (session 8: 316 / 356 µs; the options unmeasured here);
      T=32..128 with OVERLAP and OVERLAP_TMA since session 22 (GROUPED_OVERLAP: T=32 −4.4, T=64 −4.8 µs);
      T=256 (2k pairs) 64 × 64, 4 warps, 3 stages, the options: 379 µs (388 without); in session 13's sweep with the
        options 32 × 64 beat it, 313 against 318 µs (8 to 16 pairs an expert: 32-row tiles from P > 8·E to 16·E);
        there, too, the down GEMM's own 128-column tiles tied (314) and the one-launch sort at 2048 pairs lost
        (325: one program's 2048-element sort is slower than the chunked grouping's three launches; a828a66);
      T=4096 (32k pairs) 128 × 128, 8 warps, 3 stages, the options: 859 µs (1,110 without, on 4 stages); with WIDE
        (session 12) 733-738; HALF on 4 stages since session 23 (T=1024 −26, 2048 −33 µs; 4096 a tie: GROUPED_HALF).
    Each expert's last rows in a second launch of each GEMM with 32/64-row tiles (session 17: at T=4096 ~20 % of the
    128-row tiles' MMA rows are padding) lost at every T: 4096 734 → 804-816 µs, 1024 384 → 389-398, 256 (16-row
    tails of 32-row tiles) 318 → 342 (sweep-moe-grouped-tail-…T1156; code in 3dd96ea). A tail tile still streams its
    expert's whole weight slice, and in a launch of its own that memory-bound stream (~half the experts' weights
    again) is no longer hidden under the compute-bound full tiles.
    """
    opts = dict(N_FASTEST=True, Y_LOWP=True, TMA=True)
    if P >= 8192:  # HALF on 4 stages since session 23 (see GROUPED_HALF)
        return dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=4, WIDE=True, HALF=True,
                    DOWN=dict(BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=4), **opts)
    if P <= 8 * E:  # the down GEMM overlapping gate/up's last wave, its act rows by TMA (see GROUPED_OVERLAP)
        return dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=64, num_warps=4, num_stages=4, OVERLAP=True, OVERLAP_TMA=True,
                    **opts)
    if P <= 16 * E:  # T=256: 32-row tiles 313.3 against 317.6-318.4 us for 64 (session 13, gpu-session-BN-…)
        return dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=64, num_warps=4, num_stages=3, **opts)
    return dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, num_warps=4, num_stages=3, **opts)


# The down GEMM overlapping the gate/up GEMM's last wave (cfg OVERLAP; see `_experts_pass`), its act rows by TMA behind
# a proxy fence (OVERLAP_TMA) or by pointers. H200, session 22, Qwen3-30B-A3B, grouped sweep (sweep_moe.py
# --grouped-overlap, two passes in one process; plain → OVERLAP → OVERLAP_TMA, µs), on two machine starts:
#   T=32   263.9 → 260.4 (sweep-moe-grouped-overlap-…T1729)        250.2 → 247.4 → 245.8 (…-overlap-tma-…T1736)
#   T=64   297.2 → 294.3                                             283.2 → 279.8 → 278.4
#   T=256  318.5 → 322.6                                             308.9 → 313.4 → 310.1
#   T=1024 384.9 → 381.1                                             376.3 → 373.7 → 370.7
#   T=4096 740.6 → 804.7                                             726.8 → 771.4 → 760.5
# Batch 32 end to end (the grouped path at T=32 in every layer): 14.41 → 14.25 → 14.19 ms a token, the same tokens
# (ab-chain-…T173709). So it is the default with the 16-row tiles (P ≤ 8·E: T=17..128 at Qwen3-30B-A3B), and off
# where it lost (T=256, 4096; why is unmeasured) or won once (T=1024, the same config as 4096). The config keys OVERLAP
# and OVERLAP_TMA, or $MOELAB_GROUPED_OVERLAP / $MOELAB_GROUPED_OVERLAP_TMA (read at launch), choose.
GROUPED_OVERLAP = 0  # where grouped_config does not say

# HALF: an expert's last token tile with at most BLOCK_M / 2 rows multiplied as a half tile in the same launch (a
# 64-row path beside the 128-row one in each GEMM: the same shared memory, +2 registers), bitwise the full tiles'
# output. At T=1024 an expert has ~64 pairs, at 2048 ~128, at 4096 ~256: its last 128-row tile is about half padding.
# H200, session 23, Qwen3-30B-A3B, sweep_moe.py --grouped-half (two passes; 3 stages both GEMMs → HALF → 4 stages →
# HALF on 4 stages, µs):
#   T=1024 384.8 → 371.9 → 369.9 → 358.4  (sweep-moe-grouped-stages-…T1911; DU: 384.3 → 368.6, HALF on 4: 355.8)
#   T=2048 490.6 → 480.6 → 477.3 → 457.7  (DU: 488.9 → 474.3, 445.9)
#   T=4096 748.2 → 772.9 → 871.3 → 744.4  (DU: 743.3 → 742.5, 729.9; at T=4096 the passes drift 40-60 µs apart, so a
#                                           tie: HALF does not buy its ~10 % fewer MMA rows there, for a reason unmeasured)
# The default for the WIDE tiles (P ≥ 8192); the config key HALF or $MOELAB_GROUPED_HALF (read at launch) chooses.
# Tried beside it and removed (f31db59): both GEMMs persistent, a program an SM walking the tiles with the (tile,
# K chunk) loop flattened so the next tile loads during the epilogue: T=1024 −6..−7 µs, T=2048 0..+11, T=4096 +9..+72.

GROUP_FUSED_MAX_P = 1024  # one program sorts all the pairs: at P=1024 (T=128, k=8) 48 registers (sm_90, Triton 3.6)
GROUP_CHUNK = 512  # above it, chunks of this many pairs, scanned by one program (1024 until session 23: 512 gave T=256
#                    308.4 → 304.7 µs, T=1024 350.0 → 346.5, one sweep of two passes, sweep-moe-grouped-chunk-…T2121)
GROUP_SCAN_MAX = 16384  # chunks × E_PAD the scan's single program holds (T=16k, k=8, E=128: 128 × 128)


def group_fused(P: int) -> bool:
    """Whether the grouping runs as `_group_sort_kernel` (one launch) rather than in chunks: up to
    GROUP_FUSED_MAX_P pairs. The batch-32 step went 18.2 → 16.1 ms per token with its first form, the same tokens
    (H200, session 8, ab-chain-…T215300), and 15.7 → 15.2 with this one (session 9)."""
    return P <= GROUP_FUSED_MAX_P


def group_chunk(P: int, E: int) -> int:
    """The chunk size of the chunked grouping for P pairs over E experts: GROUP_CHUNK, doubled (to 4096 at most)
    while the scan's [chunks, E_PAD] tile would exceed GROUP_SCAN_MAX; 0 where even that does not fit (the torch
    ops then)."""
    chunk = GROUP_CHUNK
    while cdiv(P, chunk) * next_pow2(E) > GROUP_SCAN_MAX:
        chunk *= 2
    return chunk if chunk <= 4096 else 0


def group_pairs(ids: torch.Tensor, E: int, bm: int, *, fused: bool, chunk: int | None = None):
    """(order, start, count, cum_tiles), int32: the (token, slot) pairs of ids [T, k] sorted by expert, stably;
    where each expert's pairs start in that order and how many; the inclusive cumsum of its ⌈count/bm⌉ tiles.
    fused: Triton kernels — one launch up to GROUP_FUSED_MAX_P pairs, else three over chunks (`chunk` pairs each, a
    power of two; by default `group_chunk`); not fused: torch ops (the reference the kernels are tested against)."""
    flat = ids.reshape(-1)
    P = flat.numel()
    if fused:
        if flat.dtype != torch.int32:
            # The kernels' histograms take 32-bit ids (torch.topk gives int64): out-of-range ids become -1 first, so
            # a huge one cannot wrap into range (counted nowhere either way; `_sum_k_kernel` poisons the token).
            flat = torch.where((flat >= 0) & (flat < E), flat, -1).to(torch.int32)
        buf = torch.empty(P + 3 * E, dtype=torch.int32, device=ids.device)
        order, start, count, cum_tiles = buf[:P], buf[P:P + E], buf[P + E:P + 2 * E], buf[P + 2 * E:]
        e_pad = next_pow2(E)
        if chunk is None and group_fused(P):
            _group_sort_kernel[(1,)](flat, order, start, count, cum_tiles, P, E, BM=bm, E_PAD=e_pad,
                                     P_PAD=max(16, next_pow2(P)), num_warps=8)
            return order, start, count, cum_tiles
        chunk = chunk or group_chunk(P, E)
        if chunk:
            n = cdiv(P, chunk)
            part = torch.empty(2, n, e_pad, dtype=torch.int32, device=ids.device)
            _group_count_kernel[(n,)](flat, part[0], P, E, CHUNK=chunk, E_PAD=e_pad, num_warps=4)
            _group_scan_kernel[(1,)](part[0], part[1], start, count, cum_tiles, E, n, BM=bm, E_PAD=e_pad,
                                     C_PAD=next_pow2(n), num_warps=8)
            _group_place_kernel[(n,)](flat, part[1], order, P, E, CHUNK=chunk, E_PAD=e_pad, num_warps=4)
            return order, start, count, cum_tiles
    flat = flat.to(torch.int64)
    order = torch.sort(flat, stable=True).indices.to(torch.int32)  # pairs grouped by expert, token order kept
    # scatter_add, not bincount: bincount syncs with the host to size its output (no graph capture).
    count = torch.zeros(E, dtype=torch.int32, device=ids.device).scatter_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))
    start = (torch.cumsum(count, 0) - count).to(torch.int32)
    cum_tiles = torch.cumsum((count + bm - 1) // bm, 0).to(torch.int32)
    return order, start, count, cum_tiles


def _experts_pass(x, w13, w2, weights, ids, cfg) -> torch.Tensor:
    """y[T·k, H] (fp32, or x's dtype with Y_LOWP): each (token, slot) pair's weighted expert output."""
    T, H = x.shape
    E, I2, _ = w13.shape
    I = I2 // 2
    k = ids.shape[1]
    P = T * k
    bm = cfg.get("BLOCK_M", 64)
    extra = set(cfg.get("DOWN", {})) - {"BLOCK_N", "BLOCK_K", "num_warps", "num_stages"}
    if extra:  # said before anything launches: the grid and the token tiles are shared with the gate/up GEMM
        raise ValueError(f"grouped config DOWN: only BLOCK_N, BLOCK_K, num_warps, num_stages may differ from the "
                         f"gate/up GEMM's, got {sorted(extra)}")
    order, start, count, cum_tiles = group_pairs(ids, E, bm, fused=cfg.get("GROUP_FUSED", True),
                                                 chunk=cfg.get("GROUP_CHUNK"))
    if cfg.get("GEMM", "triton") == "grouped_mm":
        return _experts_pass_grouped_mm(x, w13, w2, weights, order, count, k)
    max_tiles = cdiv(P, bm) + E
    act = torch.empty(P, I, dtype=x.dtype, device=x.device)
    # y in the activations' dtype (Y_LOWP; fp32 inputs keep fp32): transformers' loop rounds each expert's output
    # to the model dtype too. At T=4096, P·H fp32 is 268 MB written and read back by the sum.
    y_dtype = x.dtype if cfg.get("Y_LOWP", False) else torch.float32
    y = torch.empty(P, H, dtype=y_dtype, device=x.device)
    bn, bk = cfg["BLOCK_N"], cfg["BLOCK_K"]
    tma = bool(cfg.get("TMA", False)) and _tma_ok(x, w13, w2, act)
    if tma:
        from triton.tools.tensor_descriptor import TensorDescriptor
        w13_desc = (TensorDescriptor.from_tensor(w13.view(E * 2, I, H), [2, bn, bk]) if cfg.get("WIDE", False)
                    else TensorDescriptor.from_tensor(w13.view(E * I2, H), [bn, bk]))
        w2_desc = TensorDescriptor.from_tensor(w2.view(E * H, I), [bn, bk])
        act_desc = TensorDescriptor.from_tensor(act, [bm, bk])
    else:
        w13_desc, w2_desc, act_desc = w13, w2, act  # unused
    n_fast = bool(cfg.get("N_FASTEST", False))
    # OVERLAP: the down GEMM PDL-launched as soon as every gate/up program has started, each of its programs polling
    # its token tile's counter instead of waiting for the whole gate/up GEMM ($MOELAB_GROUPED_OVERLAP, read at launch,
    # overrides the config). Without PDL (the interpreter, MOELAB_PDL=0) the same kernels run in stream order.
    overlap = bool(env_int("MOELAB_GROUPED_OVERLAP", int(cfg.get("OVERLAP", GROUPED_OVERLAP))))
    cs = counter_stride()
    cnt = counters(x.device, 2 * max_tiles * cs, "moe_grouped") if overlap else act  # unused without OVERLAP
    pdl = {"launch_pdl": True} if overlap and pdl_supported(x.device) else {}
    meta = dict(E_PAD=next_pow2(E), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
                PREC=_prec(x.dtype, "fused_moe (grouped path)"), N_FASTEST=n_fast, TMA=tma)

    def grid(n: int, block_n: int) -> tuple[int, ...]:
        return (max_tiles * cdiv(n, block_n),) if n_fast else (max_tiles, cdiv(n, block_n))

    # WIDE_TMA=False keeps WIDE's weights on pointer loads (session 11's form) while the down GEMM takes TMA.
    gate_up = dict(meta, TMA=tma and cfg.get("WIDE_TMA", True)) if cfg.get("WIDE", False) else meta
    # HALF: an expert's last tile with at most BLOCK_M / 2 rows runs as a half tile in both GEMMs (WIDE + TMA only;
    # $MOELAB_GROUPED_HALF, read at launch, overrides the config; "auto", the default's, wherever the tiles allow it).
    # Without TMA the full tiles run: the same numbers.
    env_half = env_int("MOELAB_GROUPED_HALF", -1)
    asked = cfg.get("HALF", False) if env_half < 0 else bool(env_half)
    half = _half_fits(cfg, overlap) if asked == "auto" else bool(asked)
    if half and not _half_fits(cfg, overlap):
        raise ValueError("grouped config HALF: the half tiles take WIDE + TMA tiles of 32 rows or more (a dot needs 16), "
                         "without OVERLAP")
    half = half and tma
    _gate_up_kernel[grid(I, bn)](
        x, w13, order, start, count, cum_tiles, act, w13_desc, cnt, H, I, E, k, x.stride(0), w13.stride(0),
        w13.stride(1), WIDE=bool(cfg.get("WIDE", False)), OVERLAP=overlap, CS=cs, TRIGGER=bool(pdl), HALF=half,
        **gate_up)
    # The down GEMM (K = I, short: 12 chunks of 64 at Qwen3-30B-A3B) may take its own column tiles and pipeline:
    # cfg["DOWN"] = {BLOCK_N, BLOCK_K, num_warps, num_stages}; the token tiles are the grouping's.
    down = dict(meta, **cfg.get("DOWN", {}))
    if tma and cfg.get("DOWN"):
        w2_desc = TensorDescriptor.from_tensor(w2.view(E * H, I), [down["BLOCK_N"], down["BLOCK_K"]])
        act_desc = TensorDescriptor.from_tensor(act, [bm, down["BLOCK_K"]])
    # OVERLAP_TMA: with OVERLAP, the act rows by TMA behind a proxy fence instead of pointers: inline PTX, so on a GPU
    # only (under the interpreter the pointer form runs, the same numbers).
    act_tma = bool(overlap and tma and not interpreting()
                   and env_int("MOELAB_GROUPED_OVERLAP_TMA", int(cfg.get("OVERLAP_TMA", 0))))
    _down_kernel[grid(H, down["BLOCK_N"])](
        act, w2, weights.reshape(-1).contiguous(), order, start, count, cum_tiles, y, act_desc, w2_desc, cnt, H, I, E,
        w2.stride(0), w2.stride(1), max_tiles, cdiv(I, bn), cdiv(H, down["BLOCK_N"]), OVERLAP=overlap, CS=cs,
        ACT_TMA=act_tma, HALF=half, act_half=(TensorDescriptor.from_tensor(act, [bm // 2, down["BLOCK_K"]]) if half
                                              else None), **down, **pdl)
    return y


def _half_fits(cfg: dict, overlap: bool) -> bool:
    """Whether cfg's tiles can take HALF: WIDE + TMA tiles of 32 rows or more (a half tile's dot needs 16), no OVERLAP."""
    return (not overlap and cfg.get("BLOCK_M", 64) >= 32 and bool(cfg.get("WIDE", False))
            and bool(cfg.get("WIDE_TMA", True)))


def _merged(default: dict, config: dict | None) -> dict:
    """grouped_config's choice with the caller's keys over it. The default's HALF becomes "auto": taken wherever the
    launch's tiles allow it (a caller's tiles, or $MOELAB_GROUPED_OVERLAP, may not); asked for by the caller or by
    $MOELAB_GROUPED_HALF where they do not, it is a ValueError at launch."""
    cfg = dict(default, **(config or {}))
    if "HALF" not in (config or {}) and cfg.get("HALF"):
        cfg["HALF"] = "auto"
    return cfg


def _tma_ok(x, w13, w2, act) -> bool:
    """Whether the tiles can come by tensor descriptor: contiguous weights, rows of 16-byte multiples, aligned bases
    (TMA's rules); else the pointer loads (the same numbers)."""
    e = x.element_size()
    return (w13.is_contiguous() and w2.is_contiguous() and (w13.shape[2] * e) % 16 == 0 and (w2.shape[2] * e) % 16 == 0
            and all(t.data_ptr() % 16 == 0 for t in (w13, w2, act)))


def _experts_pass_grouped_mm(x, w13, w2, weights, order, count, k) -> torch.Tensor:
    """The same pass on PyTorch's grouped GEMM (`torch._grouped_mm`: CUTLASS on Hopper), chosen explicitly
    with config GEMM="grouped_mm" — an alternative to measure against the Triton GEMMs at prefill sizes
    (FACTS.md: 800 µs at T=4096 on the H200 against these kernels' 1,080 µs). Not fused: x rows are
    gathered (a P×H copy), SwiGLU is a separate elementwise pass. bf16 only, like the library op."""
    if not hasattr(torch, "_grouped_mm"):
        raise ValueError("GEMM='grouped_mm' needs torch._grouped_mm (PyTorch 2.8 or newer)")
    if x.dtype != torch.bfloat16:
        raise ValueError(f"GEMM='grouped_mm' runs in bf16 only, got {x.dtype}")
    I = w2.shape[2]
    pos = order.long()
    offs = torch.cumsum(count, 0).to(torch.int32)
    xs = x.index_select(0, pos // k)  # [P, H] tokens in expert order
    gu = torch._grouped_mm(xs, w13.transpose(1, 2), offs=offs)  # [P, 2I]
    act = torch.nn.functional.silu(gu[:, :I]) * gu[:, I:]  # rounded to bf16, as the model does
    ys = torch._grouped_mm(act, w2.transpose(1, 2), offs=offs)  # [P, H]
    y = torch.empty(pos.numel(), w2.shape[1], dtype=torch.float32, device=x.device)
    y[pos] = ys.float() * weights.reshape(-1)[pos, None].float()  # back to (token, slot) order
    return y


def moe_grouped(x, w13, w2, topk_weights, topk_ids, shared=None, *, out=None, config: dict | None = None):
    """Launcher: args already checked by `moelab.kernels.moe.fused_moe`. Returns out[T, H]."""
    T, H = x.shape
    k = topk_ids.shape[1]
    topk_ids = topk_ids.contiguous()  # _group_sort_kernel and _sum_k_kernel index it as [T, k] rows
    cfg = _merged(grouped_config(T * k, w13.shape[0], H, w2.shape[2]), config)
    y = _experts_pass(x, w13, w2, topk_weights, topk_ids, cfg)
    extra = None
    if shared is not None:
        # The shared expert is a one-expert MoE that every token takes, weighted by its sigmoid gate.
        sw13, sw2, sgate = shared
        gate = (torch.sigmoid(x.float() @ sgate.float().t()) if sgate is not None
                else torch.ones(T, 1, dtype=torch.float32, device=x.device))
        # Its own tiles: T pairs on one expert (the routed experts' small tiles would stream its weight ⌈T/16⌉ times).
        scfg = _merged(grouped_config(T, 1, H, sw2.shape[1]), config)
        extra = _experts_pass(x, sw13[None], sw2[None], gate, torch.zeros(T, 1, dtype=torch.int32, device=x.device),
                              scfg)
    BLOCK = 1024
    _sum_k_kernel[(T, cdiv(H, BLOCK))](y, extra if extra is not None else y, topk_ids, out, H, w13.shape[0],
                                       out.stride(0), K_TOP=k, K_PAD=next_pow2(k), HAS_EXTRA=extra is not None,
                                       BLOCK=BLOCK, num_warps=4)
    return out
