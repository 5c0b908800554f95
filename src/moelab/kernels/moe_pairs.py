"""Direct-routed MoE, one (token, expert) pair per slot: the GEMV form for the smallest T (T=1).

Napkin math as in `moe_decode` (T=1, Qwen3-30B-A3B: 8 experts × 9.44 MB = 75.5 MB → ~16.5 µs at
4.6 TB/s). At T=1 the top-k experts of the token are distinct, so a slot per pair reads every byte
once and needs no census of distinct experts; for T > 1 a pair slot re-reads an expert that two tokens
share, which `moe_decode`'s census avoids (the launcher picks by measurement).

Two phases, as `moe_decode`; at T=1 one launch, from PAIRS_TWO_MIN_T tokens two kernels (see `pairs_two`; each compiled with its own
phase only, so phase 1 is not held to phase 2's registers; phase 2 still polls phase 1's counters):
  * phase 1, programs (slot, block of BLOCK_I rows): x[t] · gate/up rows of expert e → SiLU(g)·u,
    rounded to the activation dtype, into act[slot, :]; release-increment the slot's counter;
  * phase 2, programs (slot, block of BLOCK_H outputs): load the first chunk of w2[e, rows, :] BEFORE
    waiting for the slot's activations (so the down projection's bytes are in flight while phase 1
    still streams), then w2 · act × routing weight → fp32 partial[slot, rows];
  * the last slot to finish a block of outputs sums its partials in (token, top-k) order — bitwise
    deterministic — and the last block resets the counters (no memset launch).
The shared expert, if any, is one more slot per token, weighted by sigmoid(shared_gate · x[t]).
At T=1 for narrow experts (`pairs_direct`), phase 2 has no partials: a program of BLOCK_H outputs holds every slot's
w2 rows, waits for all the slots, and stores the weighted sum itself (DIRECT).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moelab.kernels import cdiv, chain_pdl, counter_stride, counters, env_int, interpreting, next_pow2
from moelab.kernels.attention import sm_count
from moelab.kernels.moe_decode import _swiglu_rows, _wait_all_geq, _wait_geq, spin_asm
from moelab.kernels.probe import now_ns, sm_id
from moelab.kernels.route import _route_rows


@triton.jit
def _prefetch_range(ptr, share, n_bytes, program, N: tl.constexpr):
    """Program `program` asks L2 for bytes [program·share, (program + 1)·share) of the first n_bytes at ptr, in N bulk
    prefetches (`cp.async.bulk.prefetch.L2`; `share` a multiple of 16·N, so every piece is 16-byte aligned). (An
    evict-last policy on them tied with the default one: session 32, ab-chain-…T100544.)"""
    piece = share // N
    off = tl.arange(0, N).to(tl.int64) * piece + tl.cast(program, tl.int64) * share  # the bytes asked for
    size = (tl.minimum(tl.maximum(n_bytes - off, 0), piece) // 16 * 16).to(tl.int32)
    base = ptr.to(tl.pointer_type(tl.int8), bitcast=True)
    tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.gt.s32 p, $2, 0; @p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r", [base + off, size], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _prefetch_shared(sw13_ptr, sw2_ptr, ib, H, IS, on, BLOCK_I: tl.constexpr, N_IBLK: tl.constexpr,
                     N_PF: tl.constexpr):
    """Phase-1 block ib of a shared-expert slot asks L2 for the bytes the shared expert will read: its gate rows, its
    up rows ([2·IS, H], contiguous) and its 1/N_IBLK share of the shared w2 ([H, IS], contiguous), N_PF bulk
    prefetches a region (`_prefetch_range`). Issued before the PDL wait: the shared expert's weights are the only
    expert bytes known before the routing, and HBM is nearly idle while the router runs (it reads E·H·2 bytes: 1 MB at
    Qwen3.5-35B-A3B). `on` (a runtime 0 or 1) scales every size: at 0 the same code issues nothing, the control for
    what the prefetch itself buys."""
    EB: tl.constexpr = sw13_ptr.dtype.element_ty.primitive_bitwidth // 8
    rows = tl.minimum(tl.maximum(IS - ib * BLOCK_I, 0), BLOCK_I)
    nb = rows * H * EB * on
    share = tl.cdiv(nb, 16 * N_PF) * 16 * N_PF
    _prefetch_range(sw13_ptr + ib * BLOCK_I * H, share, nb, 0, N_PF)  # gate rows
    _prefetch_range(sw13_ptr + (IS + ib * BLOCK_I) * H, share, nb, 0, N_PF)  # up rows
    w2_share = tl.cdiv(tl.cdiv(H * IS * EB, N_IBLK), 16 * N_PF) * 16 * N_PF  # bytes a block, whole 16-byte pieces
    _prefetch_range(sw2_ptr, w2_share, H * IS * EB * on, ib, N_PF)


@triton.jit
def _route_token(lg_ptr, tw_ptr, tid_ptr, pid, E, K: tl.constexpr, K_PAD: tl.constexpr, E_PAD: tl.constexpr,
                 RENORM: tl.constexpr):
    """ROUTE_IN: the softmax top-k (weights, ids: [1, K_PAD]) of the token's E logits, the route kernel's code (its
    bitonic top-k); program 0 stores them for the caller. The logits are read from L2 (in the two-kernel form phase 2
    has no wait of its own)."""
    offs_e = tl.arange(0, E_PAD)
    lg = tl.load(lg_ptr + offs_e[None, :], mask=(offs_e < E)[None, :], other=-float("inf"),
                 cache_modifier=".cg").to(tl.float32)
    r_w, r_id = _route_rows(lg, offs_e, offs_e < E, tw_ptr, 1.0, K, K_PAD, E_PAD, 0, RENORM, False, 1, 1, True)
    kk = tl.arange(0, K_PAD)[None, :]
    if pid == 0:
        tl.store(tw_ptr + kk, r_w, mask=kk < K)
        tl.store(tid_ptr + kk, r_id, mask=kk < K)
    return r_w, r_id


@triton.jit(do_not_specialize=["pf_on"])
def _moe_pairs_kernel(
    # pointers
    x_ptr, w13_ptr, w2_ptr, tw_ptr, tid_ptr,  # x[T,H], w13[E,2I,H], w2[E,H,I], topk w/ids [T,K]
    sw13_ptr, sw2_ptr, sgate_ptr,  # shared expert [2IS,H], [H,IS], [1,H]
    act_ptr, part_ptr, gw_ptr, cnt_ptr, out_ptr,  # act[S,I_MAX] (x dtype), partials fp32 [S,H], shared gate fp32 [T],
    #                                              int32 counters, out[T,H]
    probe_ptr,  # PROBE only: int64 [programs, 4] (start ns, phase 1: expert id known / phase 2: activations ready ns,
    #             end ns, SM·2 + is phase 2)
    # sizes
    H, I, IS, E, I_MAX,
    # strides (elements)
    s_xt, s_w13e, s_w13r, s_w2e, s_w2r, s_ot,
    # meta
    T: tl.constexpr, K: tl.constexpr, K_PAD: tl.constexpr, T_PAD: tl.constexpr,
    N_SLOTS: tl.constexpr, S_PAD: tl.constexpr, N_IBLK: tl.constexpr, N_HBLK: tl.constexpr, N1: tl.constexpr,
    BLOCK_I: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K2: tl.constexpr,
    HAS_SHARED: tl.constexpr, SHARED_GATE: tl.constexpr, SPIN_ASM: tl.constexpr,
    TRIGGER: tl.constexpr,  # release a PDL-launched next kernel (the next norm) as each program starts
    USE_PDL: tl.constexpr,  # launched with PDL (the router released it): wait before reading anything
    PROBE: tl.constexpr = False,  # per-program timestamps (benchmarks/probe_timeline.py)
    CS: tl.constexpr = 1,  # counter stride (int32s): kernels.COUNTER_STRIDE
    PHASE: tl.constexpr = 0,  # 0 both phases; 1 or 2 only that phase's code (two kernels from PAIRS_TWO_MIN_T, each
    #                           with the registers of its own phase; phase 2 still polls phase 1's counters)
    PID0=0,  # PHASE 2: the first program's pid (N1)
    SHARED_PF: tl.constexpr = False,  # with USE_PDL: shared-slot phase-1 blocks prefetch their weights before the wait
    N_PF: tl.constexpr = 128,  # bulk prefetches a region and program (≥ the threads at 4 warps: none idle)
    pf_on=1,  # SHARED_PF: 0 issues nothing from the same code (the dry control, $MOELAB_PAIRS_SHARED_PF_DRY)
    next_ptr=None, next_share=0, next_bytes=0, next_progs=0,  # NEXT_PF: the next kernel's weight, a share a block
    NEXT_PF: tl.constexpr = False,  # with USE_PDL: the first phase-1 blocks ask L2 for next_bytes of it before the wait
    DIRECT: tl.constexpr = False,  # T=1: phase 2 without partials (see `pairs_direct`)
    BLOCK_C: tl.constexpr = 1,  # DIRECT: the w2 tile's columns (next_pow2(I) for narrow experts; wider ones loop)
    N_C: tl.constexpr = 1,  # DIRECT: cdiv(max(I, IS), BLOCK_C) chunks
    LD_ACQ: tl.constexpr = False,  # DIRECT: poll with ld.acquire (inline PTX: the GPU only)
    lg_ptr=None,  # ROUTE_IN: the router logits [1, E]
    ROUTE_IN: tl.constexpr = False,  # DIRECT only: every program routes the token itself (see `pairs_route_in`)
    E_PAD: tl.constexpr = 1,  # ROUTE_IN: next_pow2(E)
    RENORM: tl.constexpr = True,  # ROUTE_IN: renormalise the top-k probabilities
):
    pid = tl.program_id(0) + PID0
    if TRIGGER and PHASE != 1:
        tl.extra.cuda.gdc_launch_dependents()
    P: tl.constexpr = T * K
    s1 = pid // N_IBLK  # phase 1's slot
    if SHARED_PF and USE_PDL and HAS_SHARED and PHASE != 2:
        if (pid < N1) & (s1 == P):  # every token's shared slot reads the same weights: the first asks for them
            _prefetch_shared(sw13_ptr, sw2_ptr, pid % N_IBLK, H, IS, pf_on, BLOCK_I, N_IBLK, N_PF)
    if NEXT_PF and USE_PDL and PHASE != 2:
        # The first next_progs blocks (one an SM: those the GPU makes resident first, so they ask while the router
        # runs; a block started after it would ask just before its own weight stream)
        if pid < next_progs:
            _prefetch_range(next_ptr, next_share, next_bytes, pid, N_PF)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # the routing, x and the counters all follow the router's completion
    if TRIGGER and PHASE == 1:
        # The phase-2 kernel reads the routing without a wait of its own (it polls this kernel's counters, and its
        # wait would be for this whole kernel): release it only once every program here has seen the router end.
        tl.extra.cuda.gdc_launch_dependents()
    if PROBE:  # the start: the wait returned (or the program began)
        tl.store(probe_ptr + pid * 4, now_ns(pid))
        tl.store(probe_ptr + pid * 4 + 3, sm_id(pid).to(tl.int64) * 2 + (pid >= N1).to(tl.int64))
    # counters (each CS int32s apart): [0, N_SLOTS) phase-1 blocks done per slot; N_SLOTS + hb: slots done for output
    # block hb; N_SLOTS + N_HBLK: output blocks done (the last resets all).
    # Phase-major: all phase-1 programs, then all phase-2 programs. (A slot-major order, each slot's phase 2
    # right after its phase 1, measured slower at every shape: docs/worklog.md.)
    q = tl.maximum(pid - N1, 0)
    if PHASE == 0:
        phase1 = pid < N1
    else:
        phase1: tl.constexpr = PHASE == 1  # the other phase's code is not compiled: its registers are not reserved
    s = tl.where(phase1, s1, q // N_HBLK)
    ib = pid % N_IBLK
    hb = q % N_HBLK
    is_shared = s >= P
    t = tl.where(is_shared, s - P, s // K)
    if ROUTE_IN:
        # The token's top-k in every program, so no route launch precedes this one (`_route_token`).
        r_w, r_id = _route_token(lg_ptr, tw_ptr, tid_ptr, pid, E, K, K_PAD, E_PAD, RENORM)
        kk = tl.arange(0, K_PAD)[None, :]
        e = tl.sum(tl.where(kk == tl.minimum(s, P - 1), r_id, 0))
        route_w = tl.sum(tl.where(kk == tl.minimum(s, P - 1), r_w, 0.0))
    elif PHASE == 2:
        # No wait before these (the router ended before this kernel was released, stage DH): read them from L2, the
        # GPU's point of coherence, never from a line an earlier kernel left in this SM's L1.
        e = tl.load(tid_ptr + tl.minimum(s, P - 1), cache_modifier=".cg")
        route_w = tl.load(tw_ptr + tl.minimum(s, P - 1), cache_modifier=".cg").to(tl.float32)
    else:
        e = tl.load(tid_ptr + tl.minimum(s, P - 1))
        route_w = tl.load(tw_ptr + tl.minimum(s, P - 1)).to(tl.float32)
    if PROBE:  # stamp 1: phase 1 knows its expert (routed, or loaded) here; phase 2 stamps its slots' readiness
        if phase1:
            tl.store(probe_ptr + pid * 4 + 1, now_ns(e.to(tl.int32)))
    e = tl.where((e < 0) | (e >= E), 0, e).to(tl.int64)  # stay in bounds; the reducer poisons the token
    I_s = tl.where(is_shared, IS, I)

    if phase1:
        # ---------------- phase 1: SiLU(x·gate)·(x·up) for BLOCK_I rows of one slot ----------------
        if ib * BLOCK_I < I_s:
            w_base = tl.where(is_shared, sw13_ptr, w13_ptr + e * s_w13e)  # branch-free: no value-yielding `if`
            s_row = tl.where(is_shared, H, s_w13r)
            offs_i = ib * BLOCK_I + tl.arange(0, BLOCK_I)
            imask = offs_i < I_s
            act = _swiglu_rows(w_base, s_row, x_ptr + t * s_xt, offs_i, imask, I_s, H, BLOCK_I, BLOCK_K)
            tl.store(act_ptr + s * I_MAX + offs_i, act.to(act_ptr.dtype.element_ty), mask=imask)
            if HAS_SHARED:
                if is_shared & (ib == 0):  # the shared expert's gate for token t: sigmoid(gate · x[t]), or 1
                    if SHARED_GATE:
                        gacc = tl.zeros((BLOCK_K,), dtype=tl.float32)
                        for k0 in range(0, H, BLOCK_K):
                            offs_g = k0 + tl.arange(0, BLOCK_K)
                            gm = offs_g < H
                            gacc += (tl.load(sgate_ptr + offs_g, mask=gm, other=0.0).to(tl.float32)
                                     * tl.load(x_ptr + t * s_xt + offs_g, mask=gm, other=0.0).to(tl.float32))
                        tl.store(gw_ptr + t, tl.sigmoid(tl.sum(gacc, axis=0)))
                    else:
                        tl.store(gw_ptr + t, 1.0)
            tl.debug_barrier()  # all threads' stores precede the release
            tl.atomic_add(cnt_ptr + s * CS, 1, sem="release", scope="gpu")
    elif DIRECT:
        # ---- phase 2 at T=1 without partials: BLOCK_H outputs over all K slots, no second trip to L2 ----
        # The program holds w2[e_j, its BLOCK_H rows, the first BLOCK_C columns] of every slot j ([K, BLOCK_H,
        # BLOCK_C]: 32 KB at the tp=4 shard's I=128 with BLOCK_H=16, the whole width), requested before it waits for
        # all K slots' activations; then the K dot products, wider experts' further column chunks after the wait (a
        # fixed order), and the routing-weighted sum in registers (deterministic), and the output stored. No fp32
        # partials, no arrival count per output block, no last-arriver reload.
        offs_h = q * BLOCK_H + tl.arange(0, BLOCK_H)
        hmask = offs_h < H
        offs_j = tl.arange(0, K_PAD)
        jmask = offs_j < K
        if ROUTE_IN:
            ids = tl.reshape(r_id, (K_PAD,))
        else:
            ids = tl.load(tid_ptr + offs_j, mask=jmask, other=0, cache_modifier=".cg")
        bad = tl.max((((ids < 0) | (ids >= E)) & jmask).to(tl.int32), axis=0) > 0
        ev = tl.where((ids < 0) | (ids >= E), 0, ids).to(tl.int64)
        offs_c = tl.arange(0, BLOCK_C)
        w_rows = w2_ptr + ev[:, None, None] * s_w2e + offs_h[None, :, None] * s_w2r  # [K_PAD, BLOCK_H, 1]
        w = tl.load(w_rows + offs_c[None, None, :],
                    mask=jmask[:, None, None] & hmask[None, :, None] & (offs_c < I)[None, None, :], other=0.0,
                    eviction_policy="evict_first")  # in flight before we wait
        if HAS_SHARED:  # the shared expert's w2 rows too ([BLOCK_H, BLOCK_C]), its slot the last (P)
            ws = tl.load(sw2_ptr + offs_h[:, None] * IS + offs_c[None, :],
                         mask=hmask[:, None] & (offs_c < IS)[None, :], other=0.0, eviction_policy="evict_first")
        if ROUTE_IN:
            tw = tl.reshape(r_w, (K_PAD,))
        else:
            tw = tl.load(tw_ptr + offs_j, mask=jmask, other=0.0, cache_modifier=".cg").to(tl.float32)
        # Every slot's counter at once (routed slots count I's blocks, the shared slot IS's); lanes past the slots
        # read slot 0's with nothing to wait for.
        offs_w = tl.arange(0, S_PAD)
        wmask = offs_w < N_SLOTS
        target = tl.where(wmask, tl.where(offs_w < P, tl.cdiv(I, BLOCK_I), tl.cdiv(IS, BLOCK_I)), 0)
        I_ready = _wait_all_geq(cnt_ptr + tl.where(wmask, offs_w, 0) * CS, target, I, SPIN_ASM, LD_ACQ)
        # Counted out as soon as it has seen the slots (not after its output): this program reads no counter again,
        # so the last to count may reset them while the others still compute, and the count's trip to L2 overlaps
        # the activations' load below.
        done = tl.atomic_add(cnt_ptr + (N_SLOTS + N_HBLK) * CS, 1, sem="relaxed", scope="gpu")
        if PROBE:
            tl.store(probe_ptr + pid * 4 + 1, now_ns(I_ready))
        IS_ready = tl.where(I_ready > 0, IS, 0)
        a = tl.load(act_ptr + offs_j[:, None] * I_MAX + offs_c[None, :],
                    mask=jmask[:, None] & (offs_c < I_ready)[None, :], other=0.0,
                    cache_modifier=".cg").to(tl.float32)  # [K_PAD, BLOCK_C]
        y = tl.sum(w.to(tl.float32) * a[:, None, :], axis=2)  # [K_PAD, BLOCK_H]
        if HAS_SHARED:  # sigmoid(gate · x) (stored by the shared slot's block 0 before its release) × shared down
            a_s = tl.load(act_ptr + P * I_MAX + offs_c, mask=offs_c < IS_ready, other=0.0,
                          cache_modifier=".cg").to(tl.float32)
            ys = tl.sum(ws.to(tl.float32) * a_s[None, :], axis=1)  # [BLOCK_H]
        for c in tl.static_range(1, N_C):  # experts wider than BLOCK_C: the further chunks, after the wait (unrolled:
            offs_c = c * BLOCK_C + tl.arange(0, BLOCK_C)  # a runtime loop is pipelined, holding 255 registers)
            w = tl.load(w_rows + offs_c[None, None, :],
                        mask=jmask[:, None, None] & hmask[None, :, None] & (offs_c < I)[None, None, :], other=0.0,
                        eviction_policy="evict_first")
            a = tl.load(act_ptr + offs_j[:, None] * I_MAX + offs_c[None, :],
                        mask=jmask[:, None] & (offs_c < I_ready)[None, :], other=0.0, cache_modifier=".cg").to(tl.float32)
            y += tl.sum(w.to(tl.float32) * a[:, None, :], axis=2)
            if HAS_SHARED:
                ws = tl.load(sw2_ptr + offs_h[:, None] * IS + offs_c[None, :],
                             mask=hmask[:, None] & (offs_c < IS)[None, :], other=0.0, eviction_policy="evict_first")
                a_s = tl.load(act_ptr + P * I_MAX + offs_c, mask=offs_c < IS_ready, other=0.0,
                              cache_modifier=".cg").to(tl.float32)
                ys += tl.sum(ws.to(tl.float32) * a_s[None, :], axis=1)
        o = tl.sum(y * tw[:, None], axis=0)
        if HAS_SHARED:
            o += tl.load(gw_ptr, mask=I_ready > 0, other=0.0, cache_modifier=".cg") * ys
        o = tl.where(bad, float("nan"), o)
        tl.store(out_ptr + offs_h, o.to(out_ptr.dtype.element_ty), mask=hmask)
        if done == N_HBLK - 1:  # the last to count: every program has seen its slots, so the counters may go to 0
            tl.store(cnt_ptr + offs_w * CS, tl.zeros((S_PAD,), dtype=tl.int32), mask=wmask)
            tl.store(cnt_ptr + (N_SLOTS + N_HBLK) * CS, 0)
    else:
        # ---------------- phase 2: down projection of one slot for BLOCK_H outputs ----------------
        offs_h = hb * BLOCK_H + tl.arange(0, BLOCK_H)
        hmask = offs_h < H
        w_base = tl.where(is_shared, sw2_ptr, w2_ptr + e * s_w2e)
        s_row = tl.where(is_shared, IS, s_w2r)
        offs_k = tl.arange(0, BLOCK_K2)
        kmask = offs_k < I_s
        w = tl.load(w_base + offs_h[:, None] * s_row + offs_k[None, :], mask=hmask[:, None] & kmask[None, :],
                    other=0.0, eviction_policy="evict_first")  # in flight before we wait
        I_ready = _wait_geq(cnt_ptr + s * CS, tl.cdiv(I_s, BLOCK_I), I_s, SPIN_ASM)
        if PROBE:
            tl.store(probe_ptr + pid * 4 + 1, now_ns(I_ready))
        a = tl.load(act_ptr + s * I_MAX + offs_k, mask=offs_k < I_ready, other=0.0, cache_modifier=".cg").to(tl.float32)
        acc = tl.sum(w.to(tl.float32) * a[None, :], axis=1)
        for k0 in range(BLOCK_K2, I_s, BLOCK_K2):
            offs_k = k0 + tl.arange(0, BLOCK_K2)
            kmask = offs_k < I_s
            w = tl.load(w_base + offs_h[:, None] * s_row + offs_k[None, :], mask=hmask[:, None] & kmask[None, :],
                        other=0.0, eviction_policy="evict_first")
            a = tl.load(act_ptr + s * I_MAX + offs_k, mask=offs_k < I_ready, other=0.0,
                        cache_modifier=".cg").to(tl.float32)
            acc += tl.sum(w.to(tl.float32) * a[None, :], axis=1)
        # Routing weight of the slot; the shared expert's sigmoid gate was stored by its phase-1 block 0
        # (written before the release this program acquired).
        weight = tl.where(is_shared, tl.load(gw_ptr + t, mask=I_ready > 0, other=0.0, cache_modifier=".cg"), route_w)
        tl.store(part_ptr + s * H + offs_h, acc * weight, mask=hmask)
        tl.debug_barrier()
        arrived = tl.atomic_add(cnt_ptr + (N_SLOTS + hb) * CS, 1, sem="acq_rel", scope="gpu")
        if arrived == N_SLOTS - 1:
            # Last slot of this output block: sum partials in a fixed order, poison tokens with bad ids.
            offs_t = tl.arange(0, T_PAD)
            tmask = offs_t < T
            offs_j = tl.arange(0, K_PAD)
            tk = tmask[:, None] & (offs_j[None, :] < K)
            ids = tl.load(tid_ptr + offs_t[:, None] * K + offs_j[None, :], mask=tk, other=0)
            bad = tl.max((((ids < 0) | (ids >= E)) & tk).to(tl.int32), axis=1) > 0
            total = tl.zeros((T_PAD, BLOCK_H), dtype=tl.float32)
            for j in tl.static_range(K):
                total += tl.load(part_ptr + (offs_t[:, None] * K + j) * H + offs_h[None, :],
                                 mask=tmask[:, None] & hmask[None, :], other=0.0, cache_modifier=".cg")
            if HAS_SHARED:
                total += tl.load(part_ptr + (P + offs_t[:, None]) * H + offs_h[None, :],
                                 mask=tmask[:, None] & hmask[None, :], other=0.0, cache_modifier=".cg")
            total = tl.where(bad[:, None], float("nan"), total)
            tl.store(out_ptr + offs_t[:, None] * s_ot + offs_h[None, :], total.to(out_ptr.dtype.element_ty),
                     mask=tmask[:, None] & hmask[None, :])
            tl.store(cnt_ptr + (N_SLOTS + hb) * CS, 0)
            done = tl.atomic_add(cnt_ptr + (N_SLOTS + N_HBLK) * CS, 1, sem="acq_rel", scope="gpu")
            if done == N_HBLK - 1:
                offs_s = tl.arange(0, S_PAD)
                tl.store(cnt_ptr + offs_s * CS, tl.zeros((S_PAD,), dtype=tl.int32), mask=offs_s < N_SLOTS)
                tl.store(cnt_ptr + (N_SLOTS + N_HBLK) * CS, 0)
    if PROBE:
        tl.debug_barrier()
        tl.store(probe_ptr + pid * 4 + 2, now_ns(pid))


# Two kernels from this many tokens (see `moe_pairs`). Route + experts, one kernel against two, two passes in one process
# (H200, session 21, sweep-moe-block-two-…T1608): Qwen3-30B-A3B T=2 41.97 → 41.26 µs, T=4 75.20 → 74.52; Qwen3.5 T=2
# 34.72 → 33.71, T=4 60.04 → 59.26; its tp=4 shard T=2 15.48 → 15.21, T=4 21.97 → 21.88. At T=1 two kernels lost for
# Qwen3-30B-A3B (25.04 → 25.69; batch 1 2.37 → 2.38 ms a token, ab-chain-…T160825) and the shard (12.11 → 12.68), and
# Qwen3.5 T=1 (23.13 → 22.18) sat inside the one kernel's own pass-to-pass spread (23.8 / 22.4): one kernel stayed.
# Session 22 saw Qwen3.5 T=1 a third time (DH, DI, DL: 23.13 → 22.18, 22.98 → 22.14, 23.00 → 22.11 µs; the two kernels'
# passes within 0.1 µs each time, the one kernel's bimodal, sweep-moe-block-two-tiles-…T1729) while the shard with its
# shared expert lost again (12.05 → 12.60): so with a shared expert and I > 128, two kernels at T=1 too (`pairs_two`).
PAIRS_TWO_MIN_T = 2
# The shared expert's weights before the PDL wait (session 31). In the chain the router releases this kernel as it
# starts, and its programs sit in `gdc_wait` for the router's ~4-5 µs while HBM is nearly idle. The shared expert is
# the one expert known before the routing: with SHARED_PF the first shared slot's phase-1 blocks ask L2 for its gate/up
# rows and a share of its w2 first (Qwen3.5-35B-A3B: 4.2 + 2.1 MB in 64 programs; stage Q's lesson was that one SM
# issues bulk prefetches at only ~0.5 TB/s). 10 registers more (80 -> 90, Triton 3.6: 5 programs an SM, not 6; the
# 576 blocks of T=1 still one wave). Predicted −0.04..−0.08 ms a token at Qwen3.5 batch 1; measured on the H100
# (ab-chain-…T083523, …T083621; three and five rounds, the same tokens) 2.83 → **2.72 ms**; at batch 2 3.64 → 3.69
# with every shared slot asking (…T083704) and 3.64 → 3.68 with the first only (…T083907; the base's spread 3 %). So
# up to PAIRS_SHARED_PF_MAX_T tokens ($MOELAB_PAIRS_SHARED_PF, 0 for off). In the one-kernel form (the tp=4 shard's
# T=1) phase 2 sets the registers (205 either way); that form is unmeasured. The gain is larger than the shared
# expert's 6.3 MB take to stream (2 µs a layer at 3.1 TB/s, against 2.75 µs measured), and the kernel changed in two
# ways: the prefetch, and 10 more registers. The dry control ($MOELAB_PAIRS_SHARED_PF_DRY=1: the same code and 90
# registers, every size 0) says the prefetch bought it, not the registers: base 2.75, dry 2.81, off 2.81 ms (H100,
# session 32, ab-chain-…T100335, five rounds, this form of the code). Running those blocks first in the grid
# (SHARED_FIRST, session 31) tied without the prefetch (2.83 / 2.83) and with it (2.74 against 2.72): removed.
PAIRS_SHARED_PF_MAX_T = 1
# The next kernel's weight before the PDL wait (session 31; on since session 32). The routed slots' phase-1 blocks
# wait for the router too (768 at Qwen3-30B-A3B T=1, 512 at Qwen3.5), with nothing of theirs known; the first of them,
# one an SM (at Qwen3-30B-A3B's 2 an SM only 264 of the 1,280 are resident at first), ask. The engine hands
# the MoE its next layer's first projection (qkv: 21 MB at Qwen3-30B-A3B; the Gated DeltaNet input projection: 50 MB
# at Qwen3.5; lm_head after the last layer), and these blocks ask L2 for its first PAIRS_NEXT_PF_MB
# ($MOELAB_PAIRS_NEXT_PF) while the router runs. Predicted at Qwen3-30B-A3B batch 1 with 8 MB: −0.05..−0.1 ms a token
# if the lines outlive the MoE's own evict-first stream. Measured on the H100 (session 32, ab-chain-…T100544,
# …T100643, three rounds, the same tokens): Qwen3-30B-A3B 2.866 → 2.820 ms with 4 MB, 2.822 with 8, 2.824 with 8
# and an evict-last policy; Qwen3.5 2.750 → 2.705 with 4 MB, 2.710 with 8 and evict-last. With the variants' order
# reversed (n4 first, …T101053) 2.705 against 2.751. So 4 MB, the default policy (evict-last is gone). Each phase-1
# block asking L2 for its own 64 KB gate/up tile once it knew its expert (SELF_PF) lost: 2.87 → 3.01 and 2.75 → 2.85
# ms (removed).
PAIRS_NEXT_PF_MB = 4
# Up to how many tokens ($MOELAB_PAIRS_NEXT_PF_MAX_T). From T=2 phase 1 is a kernel of its own whose blocks wait for
# the routing as T=1's do (at Qwen3.5 batch 8, 64 blocks a slot, 72 slots). The shared expert's prefetch lost at T=2
# (3.64 -> 3.68 ms, above); this one won: Qwen3.5 batch 2 3.614 -> 3.562 ms, batch 8 8.258 -> 8.225 (H100, session 32,
# ab-chain-…T103527, …T103656, three rounds, the same tokens; predicted -0.5..-1.5 % and -0.3..-1 %). So up to 8, the
# pair kernel's largest T at Qwen3.5's width. At Qwen3-30B-A3B's width (pairs up to 4 at I=768), against
# MOELAB_PAIRS_NEXT_PF_MAX_T:1 (H100, session 33, the same tokens): batch 2 4.214 -> 4.158 ms (ab-chain-…T125731),
# batch 4 6.418 -> 6.387 (…T125854).
PAIRS_NEXT_PF_MAX_T = 8
# (More of that weight asked by phase 2's programs as they end, after their own reads, lost: session 33, H100,
# ab-chain-…T125117 and …T125213, three rounds, the same tokens. Predicted -1..-3 % at batch 1 from session 16's
# timeline, in which HBM is half idle in the kernel's tail. Qwen3-30B-A3B: base 2.850 ms, 8 MB 2.892, 16 MB 2.938, the
# dry control (the same kernel, 227 registers against 223, asking for 0 bytes) 2.851; Qwen3.5: 2.726, 2.798, 2.862.
# The loss grows with the bytes asked: the tail's HBM is not idle for the kernel's own last reads.)
# (Phase 1 as a persistent kernel, 1-4 programs an SM walking its blocks slot by slot so that slots become ready in turn
# and phase-2 programs resident beside them stream ready slots' w2 early, lost: session 30, H200, sweep-moe-block-
# persist-…T0657, alone at best a tie at T=1-4 (Qwen3 T=1 24.83 against one kernel's 25.11 ± 2.2, Qwen3.5 T=1 22.46
# against 22.15), in the batch-1 chain 2.35 → 2.49 ms at 2 an SM and 2.70 at 1 (ab-chain-…T065815). Fewer programs
# hold fewer bytes in flight than the one wave of 576-768.)


# Phase 2 without partials at T=1 (DIRECT, session 42; `moe_t1`'s phase 2 of sessions 2-15 inside this kernel, with
# its phase 1, counter stride, backoff and PDL). The tp=4 shard's timeline (H100, probe-timeline-…T092214: 10.6 µs a
# call, floor 3.9) has every phase-2 program resident from the start with its w2 loads in flight, its slot ready at
# 6.5 µs (p50; 7.0 the last), and the kernel's end at 9.5: 2.5-3 µs after readiness go to the partial's store, the
# arrival atomic and the last arriver's reload of 8 partials, three dependent trips to L2. Here a program of BLOCK_H
# outputs holds all K slots' w2 rows ([K, BLOCK_H, next_pow2(I)]: 16K elements at I=128, BLOCK_H=16; 168 registers,
# 3 programs an SM, Triton 3.6) and waits for all K slots with one vector poll of `ld.acquire` loads, counts itself
# out at once (the reset's atomic overlapping the activations' load), sums in registers and stores. Predicted the
# shard T=1 −1..−1.5 µs with routing. Measured (H100, session 42, sweep_moe.py --direct, route + experts, two
# passes): 12.03 → **10.58 µs** (…-direct-…T0943; the kernel alone 10.61 → 8.61, probe-timeline-…T094403: the slots
# seen at 7.0, the end at 8.25). The first form, waiting for the slots one after another, lost (12.04 → 13.64,
# …T0933), and a vector poll with an acquire after it won only 0.3 µs (…T0938). 8-output blocks 10.97 µs, 32
# (spilling) 11.93; phase-1 tiles under it (…T0946) 2 × 2048 10.42, 4 × 2048 10.77, 8 × 1024 11.40 against 4 × 1024's
# 10.55, and two kernels 10.66: the tiles stay. On by default where it applies ($MOELAB_PAIRS_DIRECT=0: off);
# registers bound it to narrow experts (PAIRS_DIRECT_MAX_I): at Qwen3-30B-A3B's tp=4 shard (I=192, padded to 256)
# 8-output blocks (168 registers, 396 of 640 programs resident) lost, 14.13 → 15.44 µs, and 4-output ones 21.73
# (H100, sweep_moe.py --shapes shard30 --direct, …-direct-shard30-…T1000; predicted a tie or a loss).
PAIRS_DIRECT_MAX_I = 128
PAIRS_DIRECT_BLOCK_H = 16
# Wider experts under DIRECT (session 43, prepared): the program requests its w2 rows' first PAIRS_DIRECT_BLOCK_C
# columns of every slot before the wait, as at I=128, and streams the further chunks after it (Qwen3-30B-A3B's I=768:
# three chunks of 256; its tp=4 shard's I=192 one chunk, padded). The lost I=192 form held the whole padded width in
# one tile; this is that at ≤ 256 columns. What it would save at Qwen3-30B-A3B T=1 is the partials' tail: a partial
# store, an arrival atomic and the last arriver's reload of 8 partials after the last slot's readiness (~2 µs at the
# shard). Predicted −1..−2 µs of 24.4 at 4-output blocks (512 programs of 16 KB each before the wait: 8 MB in flight,
# as the default's 512 phase-2 programs). Measured (H100, session 44, sweep_moe.py --direct, route + experts, two passes,
# sweep_moe_block_qwen3-shard30 beside gpu-session-GO-…T1535): lost, 31.06 → 34.37 µs at 4 × 256, 34.94 at 2 × 256,
# 38.46 at 4 × 128; the shard30 tie at best (14.73 → 14.90 at 16 × 64); batch 1 2.82 → 3.10 ms (ab-chain-…T153746).
# Off: $MOELAB_PAIRS_DIRECT_MAX_I (768) widens where it runs; the code stays for the narrow shard, where it is one chunk.
# The unrolled chunks' loads are issued together (ptxas hoists them: Triton 3.6, sm_90), so a program's registers
# follow all its w2 elements, next_pow2(k) × BLOCK_H × the chunks' width: 16K at the shard (16 × 128) and 24K at
# Qwen3-30B-A3B's 4 × 768 take 168 registers (3 programs an SM); 8 × 768 (48K) takes 255 and spills.
PAIRS_DIRECT_BLOCK_C = 256
PAIRS_DIRECT_ELEMS = 24 * 1024


def direct_block_h(k: int, width: int) -> int:
    """DIRECT's outputs a program: the most, up to PAIRS_DIRECT_BLOCK_H, whose w2 tile (next_pow2(k) × BLOCK_H × the
    chunks' width) stays within PAIRS_DIRECT_ELEMS elements."""
    bh = PAIRS_DIRECT_BLOCK_H
    while bh > 1 and next_pow2(k) * bh * width > PAIRS_DIRECT_ELEMS:
        bh //= 2
    return bh


# With a shared expert (Qwen3.5-35B-A3B's tp=4 shard, IS=128; session 42, prepared after the device time ran out): its
# slot joins the vector poll, its w2 rows ([BLOCK_H, BLOCK_C]) are requested before the wait beside the routed
# ones, and its gate × its down projection is added in registers. 168 registers at 16-output blocks (as without it;
# Triton 3.6, sm_90). Predicted the shard with its shared expert (12.0 µs with routing on the H200) −1..−1.5 µs, as
# without it. Measured (H100, session 44, sweep_moe.py --shapes shard35 --direct, route + experts, two passes): 12.27 →
# 11.55 µs, and 11.26 with ROUTE_IN below (sweep_moe_block_shard-shard35 beside gpu-session-GO-…T1535). On by default
# ($MOELAB_PAIRS_DIRECT_SHARED=0: off).
PAIRS_DIRECT_SHARED = 1


def pairs_direct(T: int, I: int, IS: int = 0) -> bool:
    """Whether phase 2 runs without partials (DIRECT): one token, experts at most PAIRS_DIRECT_MAX_I wide
    ($MOELAB_PAIRS_DIRECT_MAX_I), unless $MOELAB_PAIRS_DIRECT (read at launch) is 0; with a shared expert (IS > 0, its
    width) only one as narrow and with $MOELAB_PAIRS_DIRECT_SHARED on."""
    max_i = env_int("MOELAB_PAIRS_DIRECT_MAX_I", PAIRS_DIRECT_MAX_I)
    if IS and not (IS <= max_i and env_int("MOELAB_PAIRS_DIRECT_SHARED", PAIRS_DIRECT_SHARED)):
        return False
    return T == 1 and I <= max_i and bool(env_int("MOELAB_PAIRS_DIRECT", 1))


# Routing inside the pair kernel at T=1 under DIRECT (ROUTE_IN, session 42): `moe_block`'s route launch gone, every
# program computing the token's softmax top-k itself (the route kernel's bitonic `tl.topk` over E int64 keys) before its
# first weight load. Session 2 lost with this (+1.9 µs at Qwen3-30B-A3B T=1: k serial arg-max rounds in each of ~800
# programs, before the bitonic top-k existed). The tp=4 shard's route costs 1.97 µs of its 10.58 (H100: route + experts
# against the experts alone, sweep-moe-block-direct-…T0943 and probe-timeline-…T094403). Predicted −0.5..−1 µs there.
# Measured (H100, session 44, the same sweep, two passes): the shard 10.93 → 10.36 µs, with Qwen3.5's shared expert
# 11.55 → 11.26. On by default ($MOELAB_PAIRS_ROUTE_IN=0: off); only `moe_block` (routing from logits) can take it:
# the engine routes in its router's launch.
PAIRS_ROUTE_IN = 1


# (The activations handed from phase 1 to phase 2 as self-flagging words, MBOX, lost: session 45, H100, stage GR. Phase
# 1 stored each activation's fp32 bits + 1 into a zeroed mailbox with no fence and no counter, and phase 2 polled the
# words themselves, so the poll that saw the last one held the values (predicted the shard T=1 −0.6..−1.2 µs: three of
# the four dependent L2 trips after the last activation gone). In the sweep (sweep-moe-block-mailbox-…T1706, route +
# experts, two passes) the shard went 10.29 → 13.71 µs, with its shared expert 11.31 → 13.49, Qwen3-30B-A3B T=1 31.01
# → 31.57 (the partials form, each column chunk polled as needed), T=2 54.6 → 55.5, T=4 102.4 → 103.5; Qwen3.5 T=1
# 26.5 → 25.1 sat inside the base's bimodal passes (28.0 / 25.1). `moelab bench moe` at the shard 9.97 → 18.09 µs
# (bench-moe-…T170744, …T170756); batch 1 2.82 → 2.84 ms (ab-chain-…T170723, the same tokens). The timeline
# (probe-timeline-…T170642) says why: phase 1 ended sooner (p50 7.25 → 6.5 µs) but phase 2 saw its data at 11.25
# instead of 8.5: 128 programs polling the same 4 KB, 1,024 words a poll, make a hot spot in the few L2 slices that
# hold it, where the counters' poll is 8 words. Removed.)


# (Phase 1's release without a fence, WORDS, sessions 45-46, removed: each activation stored as a word that says it was
# written (its fp32 bits + 1, never 0, in a zeroed buffer), the count after it with no fence, a hint; phase 2 waited
# for the counts, then read the words, again only while one was 0. The shard's timeline put the release's fence at
# ~0.75 µs of every phase-1 program; predicted the shard T=1 −0.4..−0.8 µs. Measured on H100s, route + experts: with
# the words read by scalar volatile loads 9.95 → 11.57 µs (sweep-moe-block-words-…T1726; `moelab bench moe` 9.99 →
# 12.7), with their first read as `.cg` vector loads 9.87 → 10.00 (sweep-moe-block-words-vec-…T1933, stage GT).
# Both forms lost; the vector form's timeline was not taken.)


# (Routing in phase 1 only, ROUTE_P1, lost: session 47, H100, stage GV. Under routing inside, all of the shard's 384
# programs (~3 an SM) compute the token's top-k; with ROUTE_P1 only phase 1's did, program 0 storing the ids and
# weights and releasing a flag that phase 2 waited for before it requested its w2 rows. Predicted the shard T=1
# 8.71 → 8.2-8.4 µs on the H200, if the SM's shared issue slots were the cost. Measured (H100, route + experts): the
# sweep 9.89 → 10.15 µs (sweep-moe-block-route-p1-…T2237, two passes), `moelab bench moe` 9.88 → 10.2. The timelines
# (probe-timeline-…T223711/…T223722/…T223732) show why: phase 1 knows its expert 0.25 µs after it starts with the
# ids ready, 1.75 with every program routing, 1.5 with ROUTE_P1. Routing is one program's latency (its dependent
# chain of shuffles and barriers), not the SM's throughput, and ROUTE_P1 added a flag's round trip to phase 2.)


def pairs_route_in(T: int, I: int, IS: int = 0) -> bool:
    """Whether `moe_block` routes inside the pair kernel: where DIRECT runs and $MOELAB_PAIRS_ROUTE_IN (read at
    launch) is on."""
    return pairs_direct(T, I, IS) and bool(env_int("MOELAB_PAIRS_ROUTE_IN", PAIRS_ROUTE_IN))


def pairs_two(T: int, I: int, shared: bool) -> bool:
    """Whether the pair kernel runs as two kernels (phase 1, then phase 2 polling it): from PAIRS_TWO_MIN_T tokens, and
    at T=1 for a model with a shared expert and experts wider than 128 (Qwen3.5-35B-A3B; measured above)."""
    return T >= PAIRS_TWO_MIN_T or (shared and I > 128)


def pairs_config(T: int, k: int, H: int, I: int) -> dict:
    """Launch parameters. Best of benchmarks/sweep_moe.py --mode pairs on the H200 (2026-12-01 11:58,
    results/sweep-moe-pairs-*-T1158.json) at Qwen3-30B-A3B T=1 (24.1 µs) and T=4 (75.9 µs) and Qwen3.5-35B-A3B
    T=1 (20.9 µs) alike: row blocks of 8 (~768 phase-1 programs at T=1) streaming H in chunks of 1024, output
    blocks of 32, the down projection in chunks of 256."""
    # SPIN_SLEEP: the phase-2 wait's nanosleep between polls. At T=1 128 ns beat the tight spin on the H200
    # (sweep_moe.py --spin, 2026-12-01 14:03: Qwen3-30B-A3B 25.9 → 24.2 µs, Qwen3.5-35B-A3B 22.1 → 20.2 µs); at
    # T=2..4 every setting was within ~1 µs (Qwen3.5 T=4: 0 best), so they keep the tight spin. End to end at
    # batch 1 it changed nothing (2.736 vs 2.729 ms). Inline PTX: never under the interpreter.
    sleep = 128 if T == 1 and not interpreting() else 0
    # The phase-2 tile in the chained step (benchmarks/ab_chain.py, batch 1, ms per token): 32 × 256 2.430-2.462;
    # 32 × 512 2.695 (ab-chain-…T171127); 32 × 128 2.516, 16 × 256 2.536, 16 × 128 2.621, 64 × 128 2.502
    # (…T172434), though the smaller tiles cut the kernel from 255 to 219 registers.
    # Phase-1 programs doing 2 or 3 row blocks each (the expert id and the program start paid once per 2-3 blocks,
    # 384 or 256 programs for 768) lost too: 2.558 and 2.683 against 2.432 ms, the same tokens (…T174715).
    # Phase 1's chunk of H at 2048 (all of Qwen3-30B-A3B's H: a program requests its whole 8 × 2 rows, 64 KB, at once
    # instead of two serial 32 KB chunks; 248 registers, no spill, Triton 3.6) lost: 2.43 → 2.58 ms per token at
    # batch 1 (H200, session 8, ab-chain-…T214730), against a predicted 3-5 % gain.
    # Narrow experts (I < 256) take the down projection's chunk at next_pow2(I): a 256-wide chunk is half masked at the
    # tp=4 shard's I=128. Predicted the shard −2..−4 µs from registers (Triton 3.6, sm_90: 239 with the 32 × 256 tile,
    # 158 with 32 × 128); measured alone (sweep_moe.py --narrow, H200, session 14, sweep-moe-pairs-narrow-…T1854.json,
    # kernel only, two passes) 12.79 → 12.40 µs with Qwen3.5's shared expert and 11.18 → 11.17 without: the registers
    # were not the limit. What won at T=1 and I ≤ 128 is the tile: 4-row phase-1 blocks and 64-output phase-2 blocks
    # (576 programs instead of 720, 252 registers): 10.01 and 9.13 µs (the best of 20 or within 0.02 µs of it).
    # At T=2 and 4 (session 15, sweep-moe-pairs-narrow-t24-…T2135.json, with the shared expert, two passes) the
    # 64-output blocks won too, with phase 1 in one chunk of H=2048: T=2 2 × 2048 13.45 µs against 16.67 for the
    # 8 × 1024 / 32-output default (the best of 20), T=4 4 × 2048 19.19 against 23.06 (the best). T=3 takes T=4's.
    # Phase-2 tiles holding a program's whole w2 slice before its wait (session 16, from the timeline probe: after
    # the last slot's readiness phase 2 still streamed two serial chunks, 4.75 µs to the kernel's end) lost: alone
    # at T=1 8 × 1024 26.5 and 16 × 1024 30.1 against 23.7 µs (sweep_moe.py --whole2, sweep-moe-pairs-whole2-…T0801),
    # T=2 and Qwen3.5 likewise or a tie; in the batch-1 chain 2.55 and 2.72 against 2.41 ms (ab-chain-…T080303).
    # Probed (…T080155): the tail after readiness shrank to 2.25 µs, but phase 1 ended later (its last slot ready at
    # 25.5 against 19.5 µs) with the phase-2 programs' whole slices competing for DRAM.
    bk2 = min(256, max(16, next_pow2(I)))
    if T == 1 and I <= 128:
        return dict(BLOCK_I=4, BLOCK_K=1024, BLOCK_H=64, BLOCK_K2=bk2, num_warps=4, SPIN_SLEEP=sleep)
    if I <= 128:
        return dict(BLOCK_I=2 if T == 2 else 4, BLOCK_K=2048, BLOCK_H=64, BLOCK_K2=bk2, num_warps=4, SPIN_SLEEP=sleep)
    return dict(BLOCK_I=8, BLOCK_K=1024, BLOCK_H=32, BLOCK_K2=bk2, num_warps=4, SPIN_SLEEP=sleep)


def next_pf_args(prefetch: torch.Tensor | None, n_bytes: int, n_first: int, x: torch.Tensor, sms: int,
                 n_pf: int = 128) -> dict:
    """The kernel arguments (NEXT_PF) with which the first min(n_first, sms) programs ask L2 for the first n_bytes of
    `prefetch`, the next kernel's weight, before their PDL wait: each a share in whole 16·n_pf-byte pieces (so every
    bulk prefetch is 16-byte aligned). {} when nothing is to be asked: no weight or no bytes, or a weight that is not
    contiguous, 16-byte aligned and on x's device. The caller checks the chain (PDL) and the interpreter."""
    if prefetch is None or n_bytes <= 0:
        return {}
    if not (prefetch.is_contiguous() and prefetch.data_ptr() % 16 == 0 and prefetch.device == x.device):
        return {}
    n = min(n_bytes, prefetch.numel() * prefetch.element_size())
    n_prog = min(n_first, sms)
    unit = 16 * n_pf
    return dict(next_ptr=prefetch, next_share=cdiv(cdiv(n, n_prog), unit) * unit, next_bytes=n, next_progs=n_prog,
                NEXT_PF=True)


def pairs_next_pf_bytes(T: int) -> int:
    """Bytes of the next kernel's weight the routed phase-1 blocks ask L2 for at T tokens ($MOELAB_PAIRS_NEXT_PF, in
    MB, up to $MOELAB_PAIRS_NEXT_PF_MAX_T tokens; 0 above)."""
    if T > env_int("MOELAB_PAIRS_NEXT_PF_MAX_T", PAIRS_NEXT_PF_MAX_T):
        return 0
    return env_int("MOELAB_PAIRS_NEXT_PF", PAIRS_NEXT_PF_MB) << 20


def moe_pairs(x, w13, w2, topk_weights, topk_ids, shared=None, *, out, config: dict | None = None, probe=None,
              prefetch: torch.Tensor | None = None, logits: torch.Tensor | None = None, renormalize: bool = True):
    """Launcher: args already checked by `moelab.kernels.moe.fused_moe`. Returns out[T, H]. `probe`, for
    benchmarks/probe_timeline.py: an int64 CUDA buffer of ≥ 4 values per program, filled with per-program timestamps.
    `logits` (ROUTE_IN, DIRECT only: [1, E], contiguous): the kernel routes the token itself (softmax top-k,
    `renormalize`) and writes topk_weights (fp32) and topk_ids (int32) [1, k] for the caller instead of reading them."""
    T, H = x.shape
    E, I2, _ = w13.shape
    I = I2 // 2
    k = topk_ids.shape[1]
    cfg = dict(pairs_config(T, k, H, I), **(config or {}))
    # In the step-long chain (kernels.chain_pdl): released by the router as it starts, this kernel waits for it in
    # hardware; it releases the next norm as each program starts (released only once phase 2's activations were
    # ready instead, batch 1 took 2.493 against 2.482 ms).
    pdl = trigger = chain_pdl(x.device, T)
    num_warps = cfg.pop("num_warps")
    spin = spin_asm(cfg.pop("SPIN_SLEEP", 0))
    cs = int(cfg.pop("CS", counter_stride()))
    if spin and interpreting():
        raise ValueError("SPIN_SLEEP > 0 is inline PTX: the Triton interpreter cannot run it")
    # (Bulk prefetches take 16-byte-aligned addresses: the shared weights' rows must keep that alignment.)
    cfg.setdefault("SHARED_PF", T <= env_int("MOELAB_PAIRS_SHARED_PF", PAIRS_SHARED_PF_MAX_T) and pdl
                   and shared is not None and (H * x.element_size()) % 16 == 0
                   and all(w.data_ptr() % 16 == 0 and w.is_contiguous() for w in shared[:2]))
    if cfg["SHARED_PF"] and interpreting():
        raise ValueError("SHARED_PF is inline PTX (sm_90 bulk prefetch): the Triton interpreter cannot run it")
    # The dry control: the same kernel (registers, occupancy, code) with every prefetch's size 0.
    cfg.setdefault("pf_on", 0 if env_int("MOELAB_PAIRS_SHARED_PF_DRY", 0) else 1)
    IS = shared[1].shape[1] if shared is not None else 0
    direct = bool(cfg.pop("DIRECT", pairs_direct(T, I, IS)))
    i_max = max(I, IS)
    block_c = cfg.pop("BLOCK_CD", min(next_pow2(i_max), PAIRS_DIRECT_BLOCK_C))
    block_hd = cfg.pop("BLOCK_HD", direct_block_h(k, cdiv(i_max, block_c) * block_c))
    if logits is not None and not direct:
        raise ValueError(f"routing inside the pair kernel (logits) needs DIRECT, which is off here (T={T}, I={I})")
    if logits is not None and (tuple(logits.shape) != (1, E) or logits.stride(-1) != 1
                               or topk_weights.dtype != torch.float32 or topk_ids.dtype != torch.int32):
        raise ValueError(f"logits must be [1, E={E}] contiguous, with fp32 weights and int32 ids to write; got "
                         f"{tuple(logits.shape)}, {topk_weights.dtype}, {topk_ids.dtype}")
    if direct:
        if T != 1:
            raise ValueError(f"DIRECT takes one token, got T={T}")
        cfg["BLOCK_H"] = block_hd
    n_slots = T * k + (T if shared is not None else 0)
    n_iblk = cdiv(i_max, cfg["BLOCK_I"])
    n_hblk = cdiv(H, cfg["BLOCK_H"])
    n1 = n_slots * n_iblk
    n2 = n_hblk if direct else n_slots * n_hblk
    if pdl and not interpreting():  # the first blocks (the routed slots'), one an SM
        cfg.update(next_pf_args(prefetch, pairs_next_pf_bytes(T), T * k * n_iblk, x, sm_count(x.device),
                                cfg.get("N_PF", 128)))
    act = torch.empty(n_slots, i_max, dtype=x.dtype, device=x.device)
    part = x if direct else torch.empty(n_slots, H, dtype=torch.float32, device=x.device)  # DIRECT has no partials
    gw = torch.empty(T, dtype=torch.float32, device=x.device)
    if logits is not None:  # buffers the kernel writes (checked above)
        tw, ids = topk_weights, topk_ids
    else:
        # int64 ids (torch.topk's, the Hugging Face router's) are read as they are: the kernel compiles for either
        # width, and a conversion would be a launch of its own before it, outside the PDL chain.
        tw, ids = topk_weights.contiguous(), topk_ids.contiguous()
    sw13, sw2, sgate = shared if shared is not None else (x, x, None)
    args = (x, w13, w2, tw, ids, sw13, sw2, sgate if sgate is not None else x,
            act, part, gw, counters(x.device, (n_slots + n_hblk + 1) * cs, "moe"), out, probe if probe is not None else x,
            H, I, IS, E, i_max,
            x.stride(0), w13.stride(0), w13.stride(1), w2.stride(0), w2.stride(1), out.stride(0))
    meta = dict(T=T, K=k, K_PAD=next_pow2(k), T_PAD=next_pow2(T),
                N_SLOTS=n_slots, S_PAD=next_pow2(n_slots), N_IBLK=n_iblk, N_HBLK=n_hblk, N1=n1,
                HAS_SHARED=shared is not None, SHARED_GATE=sgate is not None, SPIN_ASM=spin, TRIGGER=trigger,
                USE_PDL=pdl, PROBE=probe is not None, CS=cs, num_warps=num_warps,
                DIRECT=direct, BLOCK_C=block_c, N_C=cdiv(i_max, block_c), LD_ACQ=direct and not interpreting(),
                **(dict(lg_ptr=logits, ROUTE_IN=True, E_PAD=next_pow2(E), RENORM=bool(renormalize))
                   if logits is not None else {}),
                **({"launch_pdl": True} if pdl else {}), **cfg)
    # From PAIRS_TWO_MIN_T tokens the phases are two kernels, so phase 1 is compiled alone (96 registers at the T=1
    # tile, sm_90, Triton 3.6: 5 programs an SM) instead of under phase 2's 230 (2 an SM). Phase 2 is PDL-launched
    # once every phase-1 program has started, and polls the slots' counters as in one kernel (a hardware wait would
    # be for all of phase 1: that lost, stage DG). It is the chain's one PDL launch that does not wait: it reads the
    # routing (safe, see the kernel) and, after each slot's acquire, phase 1's output. Without PDL, stream order.
    # $MOELAB_PAIRS_TWO (0 or 1, read at launch) overrides the choice for an A/B. (With `probe`, the timeline probe's
    # stamps, it is always the one kernel.)
    if env_int("MOELAB_PAIRS_TWO", int(pairs_two(T, I, shared is not None))) and probe is None:
        _moe_pairs_kernel[(n1,)](*args, PHASE=1, PID0=0, **meta)
        _moe_pairs_kernel[(n2,)](*args, PHASE=2, PID0=n1, **dict(meta, USE_PDL=False))
        return out
    _moe_pairs_kernel[(n1 + n2,)](*args, **meta)
    return out
