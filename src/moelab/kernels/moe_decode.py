"""Direct-routed MoE for decode sizes (T·k up to a few hundred pairs): ONE launch for both projections.

Napkin math, Qwen3-30B-A3B (H=2048, I=768, bf16), T tokens hitting U distinct experts:
    bytes  = U · (2I·H + H·I) · 2 B = U · 9.44 MB   (+ activations, a few KB)
    FLOPs  = 2 · T·k · 3·I·H       (T=1: 75 MFLOP against 75 MB: 1 FLOP/byte, far below any ridge)
    floor  = bytes / read bandwidth: T=1 (U=8) 75.5 MB / 4.3 TB/s ≈ 17.6 µs.
So the kernel must stream every routed expert's weights exactly once with the whole GPU busy, and
pay as few launch gaps and tails as possible.

Design (one grid, two phases, no host work, no index_select copy, no padding of tokens to tiles):
  * every program derives the same list of distinct experts ("slots") from topk_ids: a presence
    vector over E (one histogram) and its prefix sum (no sort, no extra launch);
  * phase 1, programs (slot, block of BLOCK_I rows of I): gate and up rows for all tokens routed to
    that expert, SiLU(gate)·up rounded to the activation dtype, into a small scratch act[slot, t, :];
    then a release-increment of the slot's counter;
  * phase 2, programs (slot, block of BLOCK_H output rows): wait (volatile spin, then acquire) for
    that slot's phase-1 blocks only — so phase 2 overlaps phase 1 — stream w2[e, rows, :], and store
    y · routing weight as an fp32 partial per (token, top-k position); the shared expert (if any) is
    one more slot, weighted by sigmoid(gate · x);
  * the last slot to finish a block of outputs sums its partials in top-k order (fixed order: bitwise
    deterministic) into out, and the last block resets the counters, so no memset launch is needed.
Forward progress: a program only waits for programs of lower index (phase 1 precedes phase 2), and CUDA
starts blocks in index order, so whatever it waits for is running or done: waiting cannot deadlock.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moelab.kernels import cdiv, chain_pdl, counter_stride, counters, env_flag, interpreting, next_pow2
from moelab.kernels import dot_precision as _prec


@triton.jit
def _slot_expert(present, rank, offs_e, s):
    """Expert id of slot s (the s-th distinct expert in increasing id order)."""
    return tl.sum(tl.where(present & (rank == s), offs_e, 0), axis=0)


def spin_asm(sleep_ns: int) -> str:
    """The PTX a waiting program runs between two polls of its counter: `nanosleep` of sleep_ns (0: none, a tight
    spin). Hundreds of waiting programs polling a few counters in L2 might slow the atomics and loads of the
    programs they wait for; whether backing off helps is measured by benchmarks/sweep_moe.py --mode pairs."""
    if sleep_ns < 0 or sleep_ns > 1_000_000:
        raise ValueError(f"SPIN_SLEEP must be 0..1000000 ns, not {sleep_ns}")
    return f"{{ nanosleep.u32 {int(sleep_ns)}; mov.b32 $0, $1; }}" if sleep_ns else ""


@triton.jit
def _wait_geq(ptr, target, n, SPIN_ASM: tl.constexpr):
    """Wait until *ptr ≥ target, then return n: the bound of the loads this wait guards, which must use it.

    Spin on plain volatile loads (cheap for L2), then one acquire at GPU scope and a barrier, so the data the
    publishers released is visible to every thread of this program. The bound is computed from the acquire's
    result so that the guarded loads depend on it: Triton 3.6 deletes an atomic whose result is unused (its PTX
    for sm_90, 2026-12-01, had no acquire and no barrier after the spin), which left those loads unordered
    after a relaxed spin: the cause of the pair kernel's wrong fp32 results and of the 8-warp race, both gone
    with this on the H200 (docs/worklog.md)."""
    v = tl.load(ptr, volatile=True)
    while v < target:
        if SPIN_ASM != "":  # back off (nanosleep) between polls; inline PTX: never under the interpreter
            v = tl.inline_asm_elementwise(SPIN_ASM, "=r,r", [v], dtype=tl.int32, is_pure=False, pack=1)
        v = tl.load(ptr, volatile=True)
    seen = tl.atomic_add(ptr, 0, sem="acquire", scope="gpu")
    tl.debug_barrier()
    return tl.where(seen >= target, n, 0)


@triton.jit
def _poll(ptrs, LD_ACQ: tl.constexpr):
    """The counters at ptrs, read from L2: `ld.acquire.gpu` loads with LD_ACQ (inline PTX), else volatile loads."""
    if LD_ACQ:
        return tl.inline_asm_elementwise("ld.acquire.gpu.global.b32 $0, [$1];", "=r,l", [ptrs], dtype=tl.int32,
                                         is_pure=False, pack=1)
    return tl.load(ptrs, volatile=True)


@triton.jit
def _wait_all_geq(ptrs, target, n, SPIN_ASM: tl.constexpr, LD_ACQ: tl.constexpr):
    """`_wait_geq` over a vector of counters at once: every poll one load of them all, so K counters cost one trip to
    L2 a poll, not 2·K in all (the pair kernel's DIRECT phase 2, which waits for all k slots: waiting for them one
    after another took its readiness from 6.75 to 9.0 µs at the tp=4 shard, H100, probe-timeline-…T093316). With
    LD_ACQ (the GPU) the polls are `ld.acquire.gpu` loads, so the last poll is the acquire and no trip follows it;
    without (the interpreter), plain volatile polls and one vector acquire after them. `target` is a scalar or one
    value a lane; a lane past the real counters points at a real one, with a target it reaches (0)."""
    v = _poll(ptrs, LD_ACQ)
    m = tl.min(v - target, axis=0)
    while m < 0:
        if SPIN_ASM != "":
            m = tl.inline_asm_elementwise(SPIN_ASM, "=r,r", [m], dtype=tl.int32, is_pure=False, pack=1)
        v = _poll(ptrs, LD_ACQ)
        m = tl.min(v - target, axis=0)
    if not LD_ACQ:
        m = tl.min(tl.atomic_add(ptrs, tl.zeros_like(v), sem="acquire", scope="gpu") - target, axis=0)
    tl.debug_barrier()  # what each thread acquired, every thread of the program may read
    return tl.where(m >= 0, n, 0)


@triton.jit
def _swiglu_rows(w_base, s_row, x_row_ptr, offs_i, imask, I_s, H, BLOCK_I: tl.constexpr, BLOCK_K: tl.constexpr):
    """SiLU(x·gate)·(x·up) for rows offs_i of one expert (gate rows at offs_i, up rows at I_s + offs_i): a GEMV
    over H in chunks of BLOCK_K, reduced per chunk (row accumulators only: few registers), fp32.
    (The decode GEMV's streaming form — next chunk in flight, per-thread partials — lost here by 0.5-1.9 µs on
    the H200, 2026-12-01: docs/worklog.md.)"""
    acc_g = tl.zeros((BLOCK_I,), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_I,), dtype=tl.float32)
    for k0 in range(0, H, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        kmask = offs_k < H
        wmask = imask[:, None] & kmask[None, :]
        wg = tl.load(w_base + offs_i[:, None] * s_row + offs_k[None, :], mask=wmask, other=0.0,
                     eviction_policy="evict_first")
        wu = tl.load(w_base + (offs_i + I_s)[:, None] * s_row + offs_k[None, :], mask=wmask, other=0.0,
                     eviction_policy="evict_first")
        xv = tl.load(x_row_ptr + offs_k, mask=kmask, other=0.0).to(tl.float32)
        acc_g += tl.sum(wg.to(tl.float32) * xv[None, :], axis=1)
        acc_u += tl.sum(wu.to(tl.float32) * xv[None, :], axis=1)
    return acc_g / (1.0 + tl.exp(-acc_g)) * acc_u


@triton.jit
def _moe_decode_kernel(
    # pointers
    x_ptr, w13_ptr, w2_ptr, tw_ptr, tid_ptr,  # x[T,H], w13[E,2I,H], w2[E,H,I], topk w/ids [T,K]
    sw13_ptr, sw2_ptr, sgate_ptr,  # shared expert: [2IS,H], [H,IS], [1,H] (unused unless HAS_SHARED)
    act_ptr, part_ptr, cnt_ptr, out_ptr,  # scratch act[S_MAX,T,I_MAX]; partials fp32 [T·(K+1), H]; counters; out[T,H]
    w13_desc, w2_desc,  # TMA only: tensor descriptors of w13 as [E·2I, H] and w2 as [E·H, I] (else unused)
    # sizes
    T, H, I, IS, E, I_MAX,
    # strides (elements)
    s_xt, s_w13e, s_w13r, s_w2e, s_w2r, s_ot,
    # meta
    K: tl.constexpr, K_PAD: tl.constexpr, P_PAD: tl.constexpr, E_PAD: tl.constexpr,
    S_MAX: tl.constexpr, S_PAD: tl.constexpr, N_IBLK: tl.constexpr, N_HBLK: tl.constexpr, N1: tl.constexpr,
    BLOCK_T: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_K: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_K2: tl.constexpr,
    HAS_SHARED: tl.constexpr, SHARED_GATE: tl.constexpr, PREC: tl.constexpr,
    TRIGGER: tl.constexpr = False,  # release a PDL-launched next kernel (the next norm) as each program starts
    USE_PDL: tl.constexpr = False,  # launched with PDL (the router released it): wait before reading anything
    TMA: tl.constexpr = False,  # weight tiles by tensor descriptor (Hopper TMA), not pointer loads; no shared expert
    CS: tl.constexpr = 1,  # counter stride (int32s): kernels.COUNTER_STRIDE
    SPIN_ASM: tl.constexpr = "",  # the phase-2 wait's backoff between polls (spin_asm; "": the tight spin)
):
    tl.static_assert(not (TMA and HAS_SHARED), "the TMA form has no shared expert")
    if TRIGGER:
        tl.extra.cuda.gdc_launch_dependents()
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # the routing, x and the counters all follow the router's completion
    # counters: [0, S_MAX) phase-1 blocks done per slot; [S_MAX, S_MAX+N_HBLK) phase-2 programs done per
    # block of outputs; S_MAX+N_HBLK: phase-2 programs done in all (the last one resets everything).
    pid = tl.program_id(0)
    USE_DOT: tl.constexpr = BLOCK_T >= 16

    # Distinct experts hit, in id order: presence over E from the T·K ids (identical in every program).
    offs_p = tl.arange(0, P_PAD)
    pid_ids = tl.load(tid_ptr + offs_p, mask=offs_p < T * K, other=-1)
    offs_e = tl.arange(0, E_PAD)
    # One histogram of the valid ids: an out-of-range id (possible only under graph capture, where the host check
    # is off) is counted nowhere, so it gets no slot and no weight is read for it. (The [P, E] compare it replaced
    # matched ids in [E, E_PAD) and would have read past the weights for them; it also ran ~360 more instructions
    # before each program's first load at T=8 — sm_90 SASS, Triton 3.6 — with the same speed: batch 8 7.94 ms per
    # token both ways, session 9, ab-chain-…T000611.)
    valid = (pid_ids >= 0) & (pid_ids < E)
    present = tl.histogram(tl.where(valid, pid_ids, 0).to(tl.int32), E_PAD, mask=valid) > 0  # (int64 ids: checked first)
    rank = tl.cumsum(present.to(tl.int32), axis=0) - 1
    n_routed = tl.sum(present.to(tl.int32), axis=0)
    n_slots = n_routed + HAS_SHARED

    offs_t = tl.arange(0, BLOCK_T)
    tmask = offs_t < T

    # Phase 1 is programs [0, N1) as (slot, row block); phase 2 the rest as (slot, output block).
    q = tl.maximum(pid - N1, 0)
    s = tl.where(pid < N1, pid // N_IBLK, q // N_HBLK)
    ib = pid % N_IBLK
    hb = q % N_HBLK
    if HAS_SHARED:
        is_shared = s == S_MAX - 1
    else:
        is_shared = s < 0
    e = _slot_expert(present, rank, offs_e, s)
    I_s = tl.where(is_shared, IS, I)
    slot_on = is_shared | (s < n_routed)

    if pid < N1:
        # ---------------- phase 1: gate/up rows of one expert for all its tokens ----------------
        if slot_on & (ib * BLOCK_I < I_s):
            if is_shared:
                w_base = sw13_ptr
                s_row = H
            else:
                w_base = w13_ptr + e.to(tl.int64) * s_w13e
                s_row = s_w13r
            offs_i = ib * BLOCK_I + tl.arange(0, BLOCK_I)
            imask = offs_i < I_s
            if USE_DOT:
                acc_g = tl.zeros((BLOCK_I, BLOCK_T), dtype=tl.float32)
                acc_u = tl.zeros((BLOCK_I, BLOCK_T), dtype=tl.float32)
                for k0 in range(0, H, BLOCK_K):
                    offs_k = k0 + tl.arange(0, BLOCK_K)
                    kmask = offs_k < H
                    if TMA:
                        # Rows past this expert's gate (or up) block read the next rows; they only feed act rows
                        # that the store below masks. Columns past H and rows past E·2I arrive as zeros.
                        row0 = e * (2 * I) + ib * BLOCK_I
                        wg = w13_desc.load([row0, k0])
                        wu = w13_desc.load([row0 + I, k0])
                    else:
                        wmask = imask[:, None] & kmask[None, :]
                        wg = tl.load(w_base + offs_i[:, None] * s_row + offs_k[None, :], mask=wmask, other=0.0,
                                     eviction_policy="evict_first")
                        wu = tl.load(w_base + (offs_i + I_s)[:, None] * s_row + offs_k[None, :], mask=wmask,
                                     other=0.0, eviction_policy="evict_first")
                    xt = tl.load(x_ptr + offs_t[:, None] * s_xt + offs_k[None, :],
                                 mask=tmask[:, None] & kmask[None, :], other=0.0)  # [BLOCK_T, BLOCK_K]
                    acc_g = tl.dot(wg, tl.trans(xt), acc_g, input_precision=PREC)
                    acc_u = tl.dot(wu, tl.trans(xt), acc_u, input_precision=PREC)
                act = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u  # SiLU(gate) · up
            else:  # one token: the pair kernel's GEMV
                act = _swiglu_rows(w_base, s_row, x_ptr, offs_i, imask, I_s, H, BLOCK_I, BLOCK_K)[:, None]
            a_ptrs = act_ptr + (s * T + offs_t[None, :]) * I_MAX + offs_i[:, None]
            tl.store(a_ptrs, act.to(act_ptr.dtype.element_ty), mask=imask[:, None] & tmask[None, :])
            tl.debug_barrier()  # every thread's stores precede the release below
            tl.atomic_add(cnt_ptr + s * CS, 1, sem="release", scope="gpu")
    else:
        # ------------- phase 2: one slot's down projection for a block of outputs -------------
        if slot_on:
            offs_h = hb * BLOCK_H + tl.arange(0, BLOCK_H)
            hmask = offs_h < H
            if is_shared:
                w_base = sw2_ptr
                s_row = IS
            else:
                w_base = w2_ptr + e.to(tl.int64) * s_w2e
                s_row = s_w2r
            I_ready = _wait_geq(cnt_ptr + s * CS, tl.cdiv(I_s, BLOCK_I), I_s, SPIN_ASM)
            if USE_DOT:
                acc = tl.zeros((BLOCK_H, BLOCK_T), dtype=tl.float32)
            else:
                acc = tl.zeros((BLOCK_H,), dtype=tl.float32)
            for k0 in range(0, I_s, BLOCK_K2):
                offs_k = k0 + tl.arange(0, BLOCK_K2)
                kmask = offs_k < I_s
                if TMA:  # rows past H feed only output rows the stores mask; columns past I arrive as zeros
                    w = w2_desc.load([e * H + hb * BLOCK_H, k0])
                else:
                    w = tl.load(w_base + offs_h[:, None] * s_row + offs_k[None, :],
                                mask=hmask[:, None] & kmask[None, :], other=0.0, eviction_policy="evict_first")
                if USE_DOT:
                    a = tl.load(act_ptr + (s * T + offs_t[:, None]) * I_MAX + offs_k[None, :],
                                mask=tmask[:, None] & (offs_k < I_ready)[None, :], other=0.0, cache_modifier=".cg")
                    acc = tl.dot(w, tl.trans(a), acc, input_precision=PREC)
                else:
                    a = tl.load(act_ptr + s * T * I_MAX + offs_k, mask=offs_k < I_ready, other=0.0,
                                cache_modifier=".cg").to(tl.float32)
                    acc += tl.sum(w.to(tl.float32) * a[None, :], axis=1)
            if USE_DOT:
                y = acc
            else:
                y = acc[:, None]  # [BLOCK_H, 1]
            # Partials per (token, top-k position): y times that position's routing weight.
            if is_shared:
                if SHARED_GATE:
                    gacc = tl.zeros((BLOCK_T,), dtype=tl.float32)
                    for k0 in range(0, H, BLOCK_K2):
                        offs_k = k0 + tl.arange(0, BLOCK_K2)
                        kmask = offs_k < H
                        gv = tl.load(sgate_ptr + offs_k, mask=kmask, other=0.0).to(tl.float32)
                        xv = tl.load(x_ptr + offs_t[:, None] * s_xt + offs_k[None, :],
                                     mask=tmask[:, None] & kmask[None, :], other=0.0).to(tl.float32)
                        gacc += tl.sum(xv * gv[None, :], axis=1)
                    gw = tl.sigmoid(gacc)
                else:
                    gw = tl.full((BLOCK_T,), 1.0, dtype=tl.float32)
                p_ptrs = part_ptr + (T * K + offs_t[None, :]) * H + offs_h[:, None]
                tl.store(p_ptrs, y * gw[None, :], mask=hmask[:, None] & tmask[None, :])
            else:
                for j in tl.static_range(K):
                    tid_j = tl.load(tid_ptr + offs_t * K + j, mask=tmask, other=-1)
                    tw_j = tl.load(tw_ptr + offs_t * K + j, mask=tmask, other=0.0).to(tl.float32)
                    hit = tid_j == e
                    p_ptrs = part_ptr + (offs_t[None, :] * K + j) * H + offs_h[:, None]
                    tl.store(p_ptrs, y * tw_j[None, :], mask=hmask[:, None] & (tmask & hit)[None, :])
            tl.debug_barrier()
            arrived = tl.atomic_add(cnt_ptr + (S_MAX + hb) * CS, 1, sem="acq_rel", scope="gpu")
            if arrived == n_slots - 1:
                # Last slot for this block of outputs: sum the partials in a fixed order (deterministic).
                offs_k2 = tl.arange(0, K_PAD)
                tk = tmask[:, None] & (offs_k2[None, :] < K)
                ids2 = tl.load(tid_ptr + offs_t[:, None] * K + offs_k2[None, :], mask=tk, other=0)
                bad = tl.max((((ids2 < 0) | (ids2 >= E)) & tk).to(tl.int32), axis=1) > 0  # [BLOCK_T]
                total = tl.zeros((BLOCK_H, BLOCK_T), dtype=tl.float32)
                for j in tl.static_range(K):
                    total += tl.load(part_ptr + (offs_t[None, :] * K + j) * H + offs_h[:, None],
                                     mask=hmask[:, None] & tmask[None, :], other=0.0, cache_modifier=".cg")
                if HAS_SHARED:
                    total += tl.load(part_ptr + (T * K + offs_t[None, :]) * H + offs_h[:, None],
                                     mask=hmask[:, None] & tmask[None, :], other=0.0, cache_modifier=".cg")
                total = tl.where(bad[None, :], float("nan"), total)  # an out-of-range id poisons its token
                o_ptrs = out_ptr + offs_t[None, :] * s_ot + offs_h[:, None]
                tl.store(o_ptrs, total.to(out_ptr.dtype.element_ty), mask=hmask[:, None] & tmask[None, :])
                tl.store(cnt_ptr + (S_MAX + hb) * CS, 0)
                # The last block of outputs to finish resets the per-slot counters for the next call.
                blocks_done = tl.atomic_add(cnt_ptr + (S_MAX + N_HBLK) * CS, 1, sem="acq_rel", scope="gpu")
                if blocks_done == N_HBLK - 1:
                    offs_s = tl.arange(0, S_PAD)
                    tl.store(cnt_ptr + offs_s * CS, tl.zeros((S_PAD,), dtype=tl.int32), mask=offs_s < S_MAX)
                    tl.store(cnt_ptr + (S_MAX + N_HBLK) * CS, 0)


def decode_config(T: int, k: int, H: int, I: int) -> dict:
    """Launch parameters. Best of benchmarks/sweep_moe.py --mode decode on the H200 at Qwen3-30B-A3B.
    T = 2..16: 32-row phase-1 tiles, 64-row phase-2 tiles, 4 warps, 4 pipeline stages (session 10, stage AP,
    `--phase2`: T=8 124.2 µs against 126.2 for the 32-row phase-2 tiles on 2 warps that session 8 chose, T=16 200.4
    against 203.1; batch 8 end to end 7.93 → 7.86 ms per token, the same tokens, ab-chain-…T015104). Half the
    phase-2 programs, and each re-reads its slot's activations once per 64 outputs instead of 32: L2 traffic beyond
    the weights' own (Nsight Compute, stage AP: L2 87-89 % busy against DRAM 81-84 %). Above 16 tokens (a top-k
    of 2 to 4: Mixtral, OLMoE's 8 is the same as Qwen's) the 32-row tiles on 4 warps of session 3's sweep."""
    block_t = 1 if T == 1 else max(16, next_pow2(T))
    if block_t == 1:
        return dict(BLOCK_T=1, BLOCK_I=8, BLOCK_K=512, BLOCK_H=16, BLOCK_K2=512, num_warps=4)
    if T <= 16:
        return dict(BLOCK_T=block_t, BLOCK_I=32, BLOCK_K=64, BLOCK_H=64, BLOCK_K2=64, num_warps=4, num_stages=4)
    return dict(BLOCK_T=block_t, BLOCK_I=32, BLOCK_K=64, BLOCK_H=32, BLOCK_K2=64, num_warps=4)


# (The next kernel's weight asked of L2 while the router runs, as the pair kernel does, was tried here too (session 33,
# H100, Qwen3-30B-A3B batch 8, ab-chain-…T125644, two rounds, the same tokens): base 10.086 ms, 4 MB 10.073, its dry
# control (the same kernel asking for 0 bytes: 64 registers against 67) 10.072. The registers, not the prefetch, made
# the 0.13 %: removed.)


def moe_decode(x, w13, w2, topk_weights, topk_ids, shared=None, *, out=None, config: dict | None = None):
    """Launcher: args already checked by `moelab.kernels.moe.fused_moe`. Returns out[T, H]."""
    T, H = x.shape
    E, I2, _ = w13.shape
    I = I2 // 2
    k = topk_ids.shape[1]
    cfg = dict(decode_config(T, k, H, I), **(config or {}))
    num_warps = cfg.pop("num_warps")
    cs = int(cfg.pop("CS", counter_stride()))
    spin = spin_asm(cfg.pop("SPIN_SLEEP", 0))
    if spin and interpreting():
        raise ValueError("SPIN_SLEEP > 0 is inline PTX: the Triton interpreter cannot run it")
    IS = shared[1].shape[1] if shared is not None else 0
    i_max = max(I, IS)
    s_max = min(E, T * k) + (shared is not None)
    n_iblk = cdiv(i_max, cfg["BLOCK_I"])
    n_hblk = cdiv(H, cfg["BLOCK_H"])
    n1, n2 = s_max * n_iblk, s_max * n_hblk
    act = torch.empty(s_max, T, i_max, dtype=x.dtype, device=x.device)
    part = torch.empty(T * (k + 1), H, dtype=torch.float32, device=x.device)
    # int64 ids (torch.topk's) are read as they are, as in the pair kernel: no conversion launch, and a huge id cannot
    # wrap into range as a cast to int32 would make it (the kernel checks the range before its 32-bit histogram).
    ids = topk_ids.contiguous()
    tw = topk_weights.contiguous()
    sw13, sw2, sgate = shared if shared is not None else (x, x, None)
    # In the step-long PDL chain (kernels.chain_pdl), as the pair kernel: released by the router as it starts, this
    # waits for it in hardware, and it releases the next norm as each program starts; the next kernel's grid launches
    # once every program has started, so the norm and the qkv projection after it are resident in this kernel's tail.
    # (Whatever a phase-2 program waits for started before it, so the early grid cannot block it.)
    pdl = chain_pdl(x.device, T)
    # Weight tiles by TMA (session 10's prepared A/B, MOELAB_CENSUS_TMA, unmeasured): the copy engine moves each tile
    # into shared memory, so a program issues no per-thread copies for the weight bytes (registers: 71 against 67 for
    # the pointer form, sm_90, Triton 3.6). Tensor-core tiles only, no shared expert, contiguous weights and the
    # 16-byte alignment TMA needs (rows of H and I elements, the bases).
    tma = (bool(cfg.pop("TMA", env_flag("MOELAB_CENSUS_TMA"))) and shared is None and cfg["BLOCK_T"] >= 16
           and w13.is_contiguous() and w2.is_contiguous()
           and (H * w13.element_size()) % 16 == 0 and (I * w2.element_size()) % 16 == 0
           and w13.data_ptr() % 16 == 0 and w2.data_ptr() % 16 == 0)
    if tma:
        from triton.tools.tensor_descriptor import TensorDescriptor
        w13_desc = TensorDescriptor.from_tensor(w13.view(E * I2, H), [cfg["BLOCK_I"], cfg["BLOCK_K"]])
        w2_desc = TensorDescriptor.from_tensor(w2.view(E * H, I), [cfg["BLOCK_H"], cfg["BLOCK_K2"]])
    else:
        w13_desc, w2_desc = w13, w2  # unused
    _moe_decode_kernel[(n1 + n2,)](
        x, w13, w2, tw, ids, sw13, sw2, sgate if sgate is not None else x,
        act, part, counters(x.device, (s_max + n_hblk + 1) * cs, "moe"), out, w13_desc, w2_desc,
        T, H, I, IS, E, i_max,
        x.stride(0), w13.stride(0), w13.stride(1), w2.stride(0), w2.stride(1), out.stride(0),
        K=k, K_PAD=next_pow2(k), P_PAD=next_pow2(T * k),
        E_PAD=next_pow2(E), S_MAX=s_max, S_PAD=next_pow2(s_max), N_IBLK=n_iblk, N_HBLK=n_hblk, N1=n1,
        HAS_SHARED=shared is not None, SHARED_GATE=sgate is not None,
        PREC=_prec(x.dtype, "fused_moe (census path)") if cfg["BLOCK_T"] >= 16 else "tf32",  # 1 token: no tl.dot
        TRIGGER=pdl, USE_PDL=pdl, TMA=tma, CS=cs, SPIN_ASM=spin, num_warps=num_warps,
        **({"launch_pdl": True} if pdl else {}), **cfg,
    )
    return out
