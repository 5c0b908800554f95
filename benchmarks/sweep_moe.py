"""Sweep the MoE kernels' launch parameters on this GPU (graph-replayed, L2 defeated).

    python benchmarks/sweep_moe.py [--shapes qwen3,shard,qwen35] [--tokens 1,8] [--grouped 64,256,4096]
    python benchmarks/sweep_moe.py --mode pairs --shapes qwen3 --tokens 1,2,4 --spin 0,64,256,1024
    python benchmarks/sweep_moe.py --shapes qwen3 --tokens 8,16 --stages 2,3,4,5    # the census kernel's depth

Prints, per shape and T, each config's median µs and % of the floor (floor = distinct experts ×
bytes per expert / measured read bandwidth), best first; writes the table as JSON to $OUT if set. Every config is
timed in two passes, the second in reverse order (`two_pass`), and its time is the mean of the two medians.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os

import torch

from moelab import hardware, ops, timing
from moelab.kernels import CHAIN_MAX_T, next_pow2
from moelab.kernels.moe import fused_moe
from moelab.kernels.moe_decode import decode_config, moe_decode
from moelab.kernels.moe_grouped import grouped_config, moe_grouped
from moelab.kernels.moe_pairs import moe_pairs, pairs_config

SHAPES = {  # E, H, I, k, shared I
    "qwen3": (128, 2048, 768, 8, 0),
    "shard": (256, 2048, 128, 8, 0),
    "qwen35": (256, 2048, 512, 8, 512),
    "shard35": (256, 2048, 128, 8, 128),  # Qwen3.5-35B-A3B's tp=4 shard with its shared expert (bench moe --tp 4)
    "shard30": (128, 2048, 192, 8, 0),  # Qwen3-30B-A3B's tp=4 shard (I=768/4)
    "tiny": (8, 64, 32, 2, 32),  # a smoke test of this script on the CPU (--device cpu, TRITON_INTERPRET=1)
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="qwen3,shard,qwen35")
    ap.add_argument("--tokens", default="1,8")
    ap.add_argument("--mode", default="decode", choices=["decode", "pairs", "block"],
                    help="decode / pairs: sweep that kernel's tiles; block: whole layers with routing counted in (the "
                         "route kernel, then the pair kernel)")
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--device", default="cuda", help="cuda; cpu only to smoke-test the script (times mean nothing)")
    ap.add_argument("--grouped", default="", help="token counts for the grouped (prefill) path sweep, qwen3 shape")
    ap.add_argument("--grouped-variants", action="store_true",
                    help="with --grouped: instead of the tile sweep, the default config without each of N_FASTEST "
                         "(column blocks of a token tile on consecutive programs), Y_LOWP (per-pair outputs in bf16), "
                         "TMA (weight and act tiles by tensor descriptor), the Triton grouping; with WIDE (gate and "
                         "up as one dot); the down GEMM's own "
                         "tiles (T >= 2048); and all three options at a few tiles")
    ap.add_argument("--spin", default="", help="pairs mode (or decode mode, the census kernel): only the default "
                    "config, with these nanosleep backoffs (ns, comma-separated; 0 = the tight spin) in the phase-2 wait")
    ap.add_argument("--stages", default="", help="decode mode, T > 1: also the census kernel at these num_stages "
                    "(comma-separated), square tiles of 16/32 rows, K chunks of 32/64, 2/4 warps")
    ap.add_argument("--phase2", action="store_true",
                    help="decode mode, T > 1: also the census kernel with larger phase-2 tiles (BLOCK_H 32-128), "
                         "4 stages")
    ap.add_argument("--phase1", action="store_true",
                    help="decode mode, T > 1: also the census kernel with larger phase-1 tiles (BLOCK_I 32/64, BLOCK_K "
                         "64/128, 3/4 stages) on the default's 64-row phase-2 tiles and 4 warps")
    ap.add_argument("--narrow", action="store_true",
                    help="pairs mode: the default and tiles for narrow experts (the tp=4 shard, I=128)")
    ap.add_argument("--whole2", action="store_true",
                    help="pairs mode: the default and phase-2 tiles that request a program's whole w2 slice before "
                         "its wait (BLOCK_K2 >= I)")
    ap.add_argument("--chain", action="store_true",
                    help="block mode: route + the default experts' path (pairs or census) with T inside and outside "
                         "the step's PDL chain (MOELAB_CHAIN_MAX_T at T or above, and at T - 1)")
    ap.add_argument("--cnt-stride", default="",
                    help="pairs / block mode: only the default config, its arrival counters these many int32s apart "
                         "(1 packed, 32 a 128-byte line each)")
    ap.add_argument("--route-pdl", action="store_true",
                    help="block mode: the default experts' path with the route kernel launched plainly and PDL-launched "
                         "(MOELAB_ROUTE_PDL=0/1: resident and waiting in hardware while the previous layer's experts "
                         "drain)")
    ap.add_argument("--pairs-two", action="store_true",
                    help="block mode: the default experts' path with the pair kernel as one kernel and as two, each "
                         "phase compiled alone (MOELAB_PAIRS_TWO=0/1)")
    ap.add_argument("--pairs-two-tiles", action="store_true",
                    help="with --pairs-two: also phase-1 tiles that fit one wave at T=1 (16 × 512, 16 × 256, 32 × 256)")
    ap.add_argument("--pairs-two-p2", action="store_true",
                    help="with --pairs-two: also phase-2 tiles of fewer registers (16 × 256, 32 × 128, 16 × 128), as "
                         "one kernel and as two")
    ap.add_argument("--direct", action="store_true",
                    help="block mode, T=1: the launcher's choice and the partials form against DIRECT (phase 2 without "
                         "partials, $MOELAB_PAIRS_DIRECT; "
                         "with a shared expert $MOELAB_PAIRS_DIRECT_SHARED) at several output blocks, experts wider "
                         "than 128 in column chunks ($MOELAB_PAIRS_DIRECT_MAX_I), and with the routing inside the "
                         "kernel (ROUTE_IN) where DIRECT applies")
    ap.add_argument("--grouped-overlap", action="store_true",
                    help="--grouped: only the default against OVERLAP (the down GEMM polling each token tile's counter, "
                         "PDL-launched beside gate/up's last wave), its act rows by pointers and by TMA")
    ap.add_argument("--grouped-chunk", action="store_true",
                    help="--grouped: the default grouping against the chunked one over 128/256/512-pair chunks (more "
                         "programs, each sorting fewer keys)")
    ap.add_argument("--grouped-half", action="store_true",
                    help="--grouped: the WIDE tiles (T >= 1024) with and without HALF (an expert's last tile with at "
                         "most half its rows as a half tile) on 3 and 4 stages")
    ap.add_argument("--tma", action="store_true",
                    help="decode mode, T > 1: also every census config above with its weight tiles by tensor "
                         "descriptor")
    ap.add_argument("--t1", default="all", choices=["all", "dot"],
                    help="decode mode at T=1: all configs, or only the tensor-core form, the pair kernel and cuBLAS")
    a = ap.parse_args()
    if (a.pairs_two_tiles or a.pairs_two_p2) and not a.pairs_two:
        ap.error("--pairs-two-tiles and --pairs-two-p2 are parts of --pairs-two: give both")
    try:
        ceil = hardware.ceilings()
    except Exception as e:  # the probe is new: say so and use the datasheet rather than stop the sweep
        print(f"measured ceilings unavailable ({type(e).__name__}: {e}); floor from the H200 datasheet")
        ceil = hardware.ceilings("h200")
    dev, dt = a.device, (torch.bfloat16 if a.device == "cuda" else torch.float32)
    two0 = os.environ.get("MOELAB_PAIRS_TWO")  # restored for every block config without TWO_ENV
    results = []
    for name in [s_ for s_ in a.shapes.split(",") if s_]:  # --shapes "" with --grouped: the prefill sweep alone
        E, H, I, k, SI = SHAPES[name]
        layers = [((torch.randn(E, 2 * I, H, device=dev) * H ** -0.5).to(dt), (torch.randn(E, H, I, device=dev) * I ** -0.5).to(dt))
                  for _ in range(3)]
        sh = None
        if SI:
            sh = ((torch.randn(2 * SI, H, device=dev) * H ** -0.5).to(dt), (torch.randn(H, SI, device=dev) * SI ** -0.5).to(dt),
                  (torch.randn(1, H, device=dev) * H ** -0.5).to(dt))
        for T in [int(t) for t in a.tokens.split(",")]:
            n_sets = timing.sets_for_l2(int(E * (1 - (1 - k / E) ** T)) * 3 * H * I * 2)
            sets = []
            for i in range(n_sets):
                lg = torch.randn(T, E, device=dev)
                w, ids = ops.get("route", "eager")(lg, k)
                sets.append((torch.randn(T, H, device=dev).to(dt), *layers[i % 3], w, ids, lg))
            distinct = sum(torch.unique(st[4]).numel() for st in sets) / len(sets)
            floor = (distinct * 3 * H * I * 2 + (3 * H * SI * 2 if SI else 0)) / (ceil.read_gbps * 1e3)
            base = decode_config(T, k, H, I) if a.mode == "decode" else "pairs_config"
            grid = []
            if a.mode == "block":
                space = []
            elif a.mode == "pairs":
                # Session 3's sweep (results/sweep-moe-pairs-*-T1158.json) also tried phase 1 in the decode GEMV's
                # streaming form: it lost and was removed. Phase-2 tiles small enough to leave registers for more
                # programs per SM (ptxas sm_90, Triton 3.6: 230 registers at BLOCK_H=32, 104 at BLOCK_H=8).
                space = [(bi, bk, bh, bk2, 4) for bi in (4, 8) for bk in (512, 1024)
                         for bh, bk2 in ((32, 256), (16, 256), (8, 256))]
            elif T == 1 and a.t1 == "dot":
                space = []
            elif T == 1:  # register-light tiles first (ptxas on CPU: 64-130 registers, no stack)
                space = [(8, 256, 8, 256, 4), (8, 512, 16, 512, 4), (4, 1024, 8, 512, 4),
                         (16, 256, 16, 256, 4), (8, 256, 16, 256, 4), (8, 256, 8, 256, 2),
                         (4, 512, 4, 512, 2), (8, 128, 8, 128, 2), (4, 256, 8, 256, 2)]
            else:
                space = [(16, 64, 16, 64, 4), (16, 128, 16, 64, 4), (32, 64, 32, 64, 4),
                         (16, 64, 32, 64, 4), (16, 128, 16, 128, 4), (16, 64, 16, 64, 2)]
            grid = [dict(BLOCK_I=bi, BLOCK_K=bk, BLOCK_H=bh, BLOCK_K2=bk2, num_warps=nw) for bi, bk, bh, bk2, nw in space]
            if a.mode == "decode" and T > 1 and a.stages:
                # The census kernel's depth: every sweep so far left num_stages at Triton's 3, and K chunks of 64 beat
                # 128 by 25-30 % (T=8, sweep-moe-census-…T0533), so 32 and deeper pipelines are the unmeasured side.
                grid += [dict(BLOCK_I=b, BLOCK_K=bk, BLOCK_H=b, BLOCK_K2=bk, num_warps=nw, num_stages=int(ns))
                         for b in (16, 32) for bk in (32, 64) for nw in (2, 4) for ns in a.stages.split(",")]
            if a.mode == "decode" and T > 1 and a.phase2:
                # Fewer, larger phase-2 programs (session 9's lead): at T=8 the default launches 4,096 phase-2 programs
                # of 48 KB each (32 rows × I=768), ~17 % of them on empty slots. Prediction: BLOCK_H=64 -2 to -5 µs of
                # the 131 (half the programs, each census and wait paid once per 96 KB); 128 no better (1,024 programs).
                # On 2 warps both larger tiles compile to 254-255 registers (sm_90, Triton 3.6), so 4 warps too.
                grid += [dict(BLOCK_I=32, BLOCK_K=64, BLOCK_H=bh, BLOCK_K2=bk2, num_warps=nw, num_stages=4)
                         for bh in (32, 64, 128) for bk2 in (64, 128) for nw in (2, 4)]
            if a.mode == "decode" and T > 1 and a.phase1:
                # Session 10's probe_layout.py (stage AQ): a pure tile reader of 268 MB reached 78 % of the read ceiling
                # with 32×64 tiles on 2 warps, 86-88 % with 64×64 on 4 and 87-89 % with 64×128 on 4 (3 stages), and the
                # layout (row-major or each tile contiguous) changed nothing. Phase 1 reads gate + up as two 32×64
                # tiles per step: predicted BLOCK_K=128 at 3 stages −3 to −6 µs at T=8 (124 µs with 64).
                grid += [dict(BLOCK_I=bi, BLOCK_K=bk, BLOCK_H=64, BLOCK_K2=64, num_warps=4, num_stages=ns)
                         for bi in (32, 64) for bk in (64, 128) for ns in (3, 4)]
            if a.mode == "decode" and T > 1 and a.tma:
                # Session 10's prepared experiment (MOELAB_CENSUS_TMA): the census kernel's weight tiles by TMA (sm_90,
                # Triton 3.6, a real T=8 launch's specialization: 71 registers against 67, the copies by the copy
                # engine, not per-thread cp.async). Predicted 0 to −5 % at T=8. Each config both ways, the shipped one
                # included, in the same process.
                census = [dict(decode_config(T, k, H, I))] + [c for c in grid if "KERNEL" not in c]
                grid = census + [dict(c, TMA=True) for c in census]
            if a.mode == "decode" and T > 1 and not a.tma and decode_config(T, k, H, I) not in grid:
                grid.insert(0, dict(decode_config(T, k, H, I)))  # the shipped census config, in the same process
                if I <= 256:  # narrow experts: the shipped tiles with 16-row phase-1 blocks, twice the phase-1 programs
                    grid.insert(1, dict(decode_config(T, k, H, I), BLOCK_I=16))
            if a.mode == "decode" and 1 < T <= 16:
                # The pair kernel (the default up to pairs_max_t(I)) against the census, same process, up to T=16:
                # until session 28 this was measured only at Qwen3-30B-A3B, T=2 and 4, while the tp=4 shard (I=128) ran
                # its census at T=8 with 65 slots × 4 phase-1 blocks = 260 phase-1 programs (60 us against 21.7 at
                # T=4, floor 20). Session 28 (H100): pairs won at the shard T=8/16 and Qwen3.5 T=8 (`pairs_max_t`).
                grid.append(dict(KERNEL="pairs"))
            if a.mode == "pairs" and a.narrow:
                # Session 14: narrow experts (the tp=4 shard, I=128). The default's phase-2 tile is 32 × 256 with half
                # its columns masked at I=128, and it sets the kernel's registers (Triton 3.6, sm_90: 239, 2 programs
                # per SM; 32 × 128 158; 16 × 128 with 8 × 1024 phase-1 tiles 91, with 4 × 1024 or 4 × 2048 80); phase 1
                # in one chunk of all H (one DRAM trip, not two). The shared expert is one copy for every rotation set
                # (L2 may serve its ~1.5 MB at shard35): the floor's percentages read high, the comparison holds.
                # Predicted: the shard (16.6 us with routing) -2..-4 us at BLOCK_K2=128.
                grid = [dict(pairs_config(T, k, H, I)), dict(pairs_config(T, k, H, I), BLOCK_K2=256)] + [
                    dict(BLOCK_I=bi, BLOCK_K=bk, BLOCK_H=bh, BLOCK_K2=bk2, num_warps=4)
                    for bi in (2, 4, 8) for bk in (1024, 2048) for bh, bk2 in ((16, 128), (32, 128), (64, 128))]
            if a.mode == "pairs" and a.whole2:
                # Session 16's timeline probe (probe-timeline-…T074950): at T=1 phase 2 streams 25 MB at ~2 TB/s, each
                # program's 32 × 768 slice in three serial 16 KB chunks, two of them after its wait; the last slot's
                # readiness (19.5 µs) is 4.75 µs before the kernel's end. With the whole slice requested before the
                # wait only the sum is left after it. Registers (Triton 3.9 sm_90 ptxas; 3.6 may differ): 32 × 256
                # (the default) 255, 8 × 1024 128, 16 × 1024 255, 16 × 512 168, 32 × 1024 spills. Predicted T=1
                # −2..−3 µs.
                bk2 = next_pow2(max(I, SI))
                grid = [dict(pairs_config(T, k, H, I))] + [
                    dict(pairs_config(T, k, H, I), BLOCK_I=bi, BLOCK_H=bh, BLOCK_K2=bk2)
                    for bi in (4, 8) for bh in (8, 16)] + [dict(pairs_config(T, k, H, I), BLOCK_H=16, BLOCK_K2=512)]
            if a.mode == "pairs" and a.spin:
                grid = [dict(SPIN_SLEEP=int(ns)) for ns in a.spin.split(",")]
            if a.mode == "decode" and a.spin:
                # Session 20: the census kernel's wait had no backoff; with its counters on lines of their own
                # (COUNTER_STRIDE = 32) at T=8 ~51 slots × 32 output blocks of programs poll them.
                grid = [dict(decode_config(T, k, H, I), SPIN_SLEEP=int(ns)) for ns in a.spin.split(",")]
            if a.mode == "pairs" and a.cnt_stride:
                # Session 20 (probe_links.py, probe-links-…T124823): 128 programs per step polling counters packed in
                # one line cost 15 µs a link. The pair kernel's 9 slot counters share a line that 768 phase-1 release
                # atomics and up to 512 phase-2 polls hit. Predicted T=1 −0.5..−2 µs at CS=32.
                grid = [dict(pairs_config(T, k, H, I), CS=int(c)) for c in a.cnt_stride.split(",")]
            if a.mode == "decode" and T == 1:
                # The tensor-core form at T=1 (the one token padded to 16 columns): its loads feed tl.dot, so
                # Triton software-pipelines them through shared memory (cp.async; ptxas sm_90 on the CPU:
                # 16×128 tiles 72 registers, 20 KB shared) — many more bytes in flight per SM than the GEMV
                # tiles, which no num_stages setting pipelines. Never measured at T=1.
                grid += [dict(BLOCK_T=16, BLOCK_I=bi, BLOCK_K=bk, BLOCK_H=bh, BLOCK_K2=bk2, num_warps=nw)
                         for bi, bk, bh, bk2, nw in [(16, 128, 16, 128, 4), (16, 64, 16, 64, 4), (32, 64, 32, 64, 4),
                                                     (16, 256, 16, 128, 4), (16, 128, 16, 128, 2)]]
                grid += [dict(BLOCK_T=16, BLOCK_I=16, BLOCK_K=128, BLOCK_H=16, BLOCK_K2=128, num_warps=4, num_stages=ns)
                         for ns in (4, 5)]  # deeper software pipelines (Triton's default is 3)
                grid.append(dict(KERNEL="pairs"))  # the current T=1 default, in the same process
                if not SI:
                    # Not a MoE: cuBLAS over the same bytes (k consecutive experts, so w13 is one [k·2I, H] matrix):
                    # GEMV, SiLU·mul, batched GEMV, sum — what a library stream of this size reaches, 4 launches.
                    grid.append(dict(KERNEL="cublas"))
            if a.mode == "block":
                # (Until session 15 the T=1 kernel without partials, `moe_t1`, was timed here beside it at the shard:
                # 15.7 against the pair kernel's 13.0 µs, sweep-moe-block-shard-…T2134; it was removed.)
                grid = [dict(ROUTE="kernel")]
                if a.cnt_stride:  # the default experts' path (pairs or census), its counters CS int32s apart
                    grid = [dict(ROUTE="kernel", CS_ENV=int(c)) for c in a.cnt_stride.split(",")]
                if a.route_pdl:
                    # Prepared in session 26 (no GPU), unmeasured: predicted T=1 −0.5..−1.5 µs a layer (the route
                    # kernel's launch and the experts' kernel's residency off the critical path), T=2..16 −0.3..−1.
                    grid = [dict(ROUTE="kernel", RPDL_ENV=0), dict(ROUTE="kernel", RPDL_ENV=1)]
                if a.pairs_two:
                    # The pair kernel as one kernel and as two (each phase compiled alone: PAIRS_TWO_MIN_T). Session 21
                    # also swept, with two kernels (sweep-moe-block-two-…T1608, …-two-whole2-…T1617), phase 1 at 8 ×
                    # 2048 and 4 × 1024, and phase-2 tiles holding the whole w2 slice before the wait (8 × whole, 16 ×
                    # whole, 16 × half): lost or tied at every shape and T.
                    grid = [dict(ROUTE="kernel", TWO_ENV=0), dict(ROUTE="kernel", TWO_ENV=1)]
                    if a.pairs_two_tiles:
                        # Prepared in session 21, unmeasured: phase-1 tiles whose programs all fit one wave at T=1
                        # (768 of 8 × 1024 at 96 registers make 1.16 waves at 5 an SM): 16 × 512 (384 programs at 168
                        # registers, 3 an SM), 16 × 256 (384 at 94: 5 an SM, room beside them for a phase-2 program),
                        # 32 × 256 (192 at 167) — sm_90, Triton 3.6.
                        grid += [dict(ROUTE="kernel", TWO_ENV=1, BLOCK_I=bi, BLOCK_K=bk)
                                 for bi, bk in ((16, 512), (16, 256), (32, 256))]
                    if a.pairs_two_p2:
                        # Prepared in session 29 (ptxas -v, Triton 3.6, sm_90a, Qwen3-30B-A3B T=1, every integer argument
                        # specialised divisible by 16 as a real launch is): phase 1 alone 94 registers (5 programs an
                        # SM), phase 2 alone at the default 32 × 256 tile 127 (4 an SM; none fits beside 5 of phase 1's,
                        # and one beside 4), at 16 × 256 and 32 × 128 48, at 16 × 128 32 (2-3 beside 4 of phase 1's).
                        # As one kernel the phases share the larger count (128 at the default), which session 6's tile
                        # A/B measured (stage AA: lost); as two kernels with these tiles, never. Predicted: two kernels
                        # with a light phase 2, T=1 −0.5..−1.5 µs against the default.
                        grid += [dict(ROUTE="kernel", TWO_ENV=two, BLOCK_H=bh, BLOCK_K2=bk2)
                                 for two in (1, 0) for bh, bk2 in ((16, 256), (32, 128), (16, 128))]
                if a.direct and T == 1 and SI and max(I, SI) <= 128:
                    # DIRECT with the shared expert (Qwen3.5-35B-A3B's tp=4 shard, shard35; moe_pairs.PAIRS_DIRECT_SHARED):
                    # 16-output blocks 168 registers (3 an SM: 396 resident of 416 programs), 8 124 (4: 528 of 544).
                    # Predicted −1..−1.5 µs against the default (12.0 µs on the H200), and routing inside −0.5..−1 more.
                    # DIRECT is the default here since session 44 (H100: 12.27 -> 11.55 µs, 11.26 with ROUTE_IN, the
                    # default too): DIRECT=False is the form it replaced.
                    grid = [dict(ROUTE="kernel"), dict(ROUTE="kernel", DIRECT=False),
                            *(dict(ROUTE="kernel", DIRECT=True, BLOCK_HD=bh) for bh in (8, 16)),
                            dict(ROUTE="in", DIRECT=True, BLOCK_HD=16)]
                elif a.direct and T == 1 and max(I, SI) > 128:
                    # Wider than PAIRS_DIRECT_MAX_I, the w2 tile in column chunks (BLOCK_CD; session 43). Registers
                    # (Triton 3.6, sm_90, one kernel) follow next_pow2(k) × BLOCK_HD × the chunks' width: ≤ 24K
                    # elements 168 (3 programs an SM), 48K 255 and spilling. Qwen3-30B-A3B (I=768): 4 or 2 outputs
                    # over 256-column chunks (168), 4 over 128 (255, no spill). Its tp=4 shard (I=192; session 42's
                    # 8 × 256 lost, 14.13 -> 15.44 µs on the H100): 64-column chunks, no padding. Qwen3.5 with its
                    # shared expert (I=IS=512, two kernels at T=1). Predicted Qwen3-30B-A3B −1..−2 µs of 24.4.
                    if I == 192:
                        tiles = ((8, 256), (8, 64), (16, 64), (4, 64))
                    else:
                        tiles = ((4, 256), (2, 256), (4, 128))
                    grid = [dict(ROUTE="kernel"), *(dict(ROUTE="kernel", DIRECT=True, BLOCK_HD=bh, BLOCK_CD=bc)
                                                    for bh, bc in tiles)]
                elif a.direct and T == 1 and not SI:
                    # Session 42: phase 2 without partials (the shard's timeline: 2.5-3 µs from the slots' readiness
                    # to the kernel's end, three dependent L2 trips). Registers (Triton 3.6, sm_90, the shard's T=1
                    # launch): 8-output blocks 96 (5 an SM: all 512 programs resident), 16 168 (3: 384 of 396), 32
                    # 255 with 348 B spilled. Predicted the shard T=1 −1..−1.5 µs.
                    grid = [dict(ROUTE="kernel"), dict(ROUTE="kernel", DIRECT=False),
                            *(dict(ROUTE="kernel", DIRECT=True, BLOCK_HD=bh) for bh in (8, 16, 32))]
                    # With DIRECT at 16-output blocks (H100 …T0943: 10.58 µs against the default's 12.03), phase 1's
                    # tiles (168 registers at each but 8 × 2048's 246, phase 2 setting them), and the phases as two
                    # kernels (phase 1 alone at ~96 registers: 5 an SM). Predicted 4 × 2048 (one 32 KB trip a program,
                    # not two serial 16 KB ones) −0.3..−0.6 µs.
                    grid += [dict(ROUTE="kernel", DIRECT=True, BLOCK_HD=16, BLOCK_I=bi, BLOCK_K=bk)
                             for bi, bk in ((4, 2048), (2, 2048), (2, 1024), (8, 1024))]
                    grid += [dict(ROUTE="kernel", DIRECT=True, BLOCK_HD=16, TWO_ENV=1)]
                    # Routing inside the kernel (ROUTE_IN: moe_block's route launch gone; moe_pairs.PAIRS_ROUTE_IN).
                    # Predicted −0.5..−1 µs against DIRECT after the route kernel.
                    grid += [dict(ROUTE="in", DIRECT=True, BLOCK_HD=16), dict(ROUTE="in", DIRECT=True, BLOCK_HD=16,
                                                                           BLOCK_I=2, BLOCK_K=2048)]
                if a.chain:
                    # Session 19 (stages CU, as --route-trigger, and CX): T=16 in the chain 216.1 -> 214.5 us
                    # (sweep-moe-block-trigger-…T1818), 182.7 -> 181.0 (sweep-moe-block-chain-…T1913): CHAIN_MAX_T is 16.
                    grid = [dict(ROUTE="kernel", CHAIN=max(CHAIN_MAX_T, T)), dict(ROUTE="kernel", CHAIN=T - 1)]
            x0, w130, w20, tw0, ids0, _ = sets[0]
            ref = ops.get("fused_moe", "eager")(x0, w130, w20, tw0, ids0, sh)
            rows, fns, errs = [], {}, {}
            for cfg in grid:
                def f(x, w13, w2, tw, ids, lg, cfg=cfg):
                    if a.mode == "block":  # routing counted in (the route kernel, then the experts)
                        c = {k_: v for k_, v in cfg.items() if k_ != "ROUTE"}
                        if "CS_ENV" in cfg:  # read by the launchers (counter_stride), so at the graph's capture
                            os.environ["MOELAB_CNT_STRIDE"] = str(cfg["CS_ENV"])
                            tw, ids = ops.get("route", "moelab")(lg, k)
                            return fused_moe(x, w13, w2, tw, ids, sh, out=torch.empty_like(x))
                        if "RPDL_ENV" in cfg:  # read by route's launcher, so at the graph's capture
                            os.environ["MOELAB_ROUTE_PDL"] = str(cfg["RPDL_ENV"])
                            tw, ids = ops.get("route", "moelab")(lg, k)
                            return fused_moe(x, w13, w2, tw, ids, sh, out=torch.empty_like(x))
                        if "TWO_ENV" in cfg:  # read by the pair kernel's launcher, so at the graph's capture
                            os.environ["MOELAB_PAIRS_TWO"] = str(cfg["TWO_ENV"])
                            c.pop("TWO_ENV")
                        elif two0 is None:  # the launcher's own rule (or the caller's setting), not a value an
                            os.environ.pop("MOELAB_PAIRS_TWO", None)  # earlier config left
                        else:
                            os.environ["MOELAB_PAIRS_TWO"] = two0
                        if "CHAIN" in cfg:  # read by the launchers (chain_pdl), so at the graph's capture
                            os.environ["MOELAB_CHAIN_MAX_T"] = str(cfg["CHAIN"])
                            tw, ids = ops.get("route", "moelab")(lg, k)
                            return fused_moe(x, w13, w2, tw, ids, sh, out=torch.empty_like(x))
                        if cfg["ROUTE"] == "in":  # the pair kernel routes the token itself, into these buffers
                            tw, ids = torch.empty(T, k, device=x.device), torch.empty(T, k, dtype=torch.int32, device=x.device)
                            return moe_pairs(x, w13, w2, tw, ids, sh, out=torch.empty_like(x), config=c, logits=lg)
                        tw, ids = ops.get("route", "moelab")(lg, k)
                        return moe_pairs(x, w13, w2, tw, ids, sh, out=torch.empty_like(x), config=c)
                    if cfg.get("KERNEL") == "cublas":  # experts 0..k-1 of this layer copy: plain views, no gather
                        gu = torch.nn.functional.linear(x, w13[:k].reshape(k * 2 * I, H)).view(k, 2, I)
                        act = (torch.nn.functional.silu(gu[:, 0].float()) * gu[:, 1].float()).to(x.dtype)
                        y = torch.bmm(w2[:k], act.unsqueeze(-1)).squeeze(-1)  # [k, H]
                        return (y.float() * tw[0, :, None]).sum(0, keepdim=True).to(x.dtype)
                    if cfg.get("KERNEL") == "pairs":
                        return moe_pairs(x, w13, w2, tw, ids, sh, out=torch.empty_like(x))
                    run = moe_pairs if a.mode == "pairs" else moe_decode
                    return run(x, w13, w2, tw, ids, sh, out=torch.empty_like(x), config=cfg)
                try:
                    got = f(*sets[0])
                    errs[len(fns)] = 0.0 if cfg.get("KERNEL") == "cublas" else float((got.float() - ref.float()).norm() / ref.float().norm())
                    fns[len(fns)] = (cfg, f)
                except Exception as e:  # a config that fails to compile is skipped and said
                    rows.append(dict(cfg=cfg, error=f"{type(e).__name__}: {str(e)[:80]}"))
            for i, (us, iqr, passes) in two_pass({i: f for i, (_, f) in fns.items()}, sets, a.samples).items():
                rows.append(dict(cfg=fns[i][0], us=us, iqr=iqr, passes_us=passes, pct=100 * floor / us, err=errs[i]))
            ok = sorted([r for r in rows if "us" in r], key=lambda r: r["us"])
            print(f"\n== {a.mode} {name} T={T} distinct={distinct:.1f} floor={floor:.2f} us (read {ceil.read_gbps:.0f} GB/s); default={base}")
            for r in ok[:6]:
                passes = "/".join(f"{p_:.1f}" for p_ in r["passes_us"])
                print(f"  {r['us']:8.2f} us  ±{r['iqr']:.2f} ({passes})  {r['pct']:5.1f}% floor  err {r['err']:.1e}  {r['cfg']}")
            bad = [r for r in rows if "error" in r or r.get("err", 0) > 2e-2]
            if bad:
                print(f"  {len(bad)} configs failed or wrong, e.g. {bad[0]}")
            results.append(dict(mode=a.mode, shape=name, T=T, floor_us=floor, distinct=distinct, rows=rows))
            save(a, ceil, results)
    os.environ.pop("MOELAB_CHAIN_MAX_T", None)  # --chain set it per config; the grouped sweep runs on the default
    os.environ.pop("MOELAB_CNT_STRIDE", None)  # --cnt-stride likewise
    os.environ.pop("MOELAB_ROUTE_PDL", None)  # --route-pdl likewise
    os.environ.pop("MOELAB_PAIRS_TWO", None)  # --pairs-two likewise
    for T in [int(t) for t in a.grouped.split(",") if t]:
        results.append(sweep_grouped(T, ceil, a.samples, a.grouped_variants, a.grouped_overlap, a.grouped_half, a.grouped_chunk))
        save(a, ceil, results)


def two_pass(fns: dict, sets, samples: int) -> dict:
    """{key: (mean of two medians µs, the larger IQR, [the two medians])} for each graph-replayed fn over sets: two
    passes, the second in reverse order. In one forward pass the same config timed early and late in the list
    differed by ~10 % at T=64 and 256 (session 11, stage AY), more than the effects swept; the reversed pass cancels
    a drift linear in time, and two medians far apart say the machine moved under the sweep."""
    times: dict = {i: [] for i in fns}
    for order in (list(fns), list(fns)[::-1]):
        for i in order:
            times[i].append(timing.measure(fns[i], sets, mode="graph", samples=samples, warmup=2))
    return {i: (sum(m.median_us for m in ms) / len(ms), max(m.iqr_us for m in ms), [m.median_us for m in ms])
            for i, ms in times.items()}


def save(a, ceil, results) -> None:
    """Write what is measured so far to $OUT (after every shape and T: a step that runs out of time keeps its rows)."""
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], f"sweep_moe_{a.mode}_{a.shapes.replace(',', '-') or 'grouped'}.json"), "w") as fh:
            json.dump(dict(env=timing.env_record(), read_gbps=ceil.read_gbps, results=results), fh, indent=1)


def sweep_grouped(T: int, ceil, samples: int, variants: bool = False, overlap: bool = False,
                  half: bool = False, chunk: bool = False) -> dict:
    """Prefill path at Qwen3-30B-A3B shapes: % of the measured bf16 matmul rate (FLOPs = 2·T·k·3·H·I)."""
    E, H, I, k = 128, 2048, 768, 8
    dev, dt = "cuda", torch.bfloat16
    w13 = (torch.randn(E, 2 * I, H, device=dev) * H ** -0.5).to(dt)
    w2 = (torch.randn(E, H, I, device=dev) * I ** -0.5).to(dt)
    sets = []
    for _ in range(2):
        w, ids = ops.get("route", "eager")(torch.randn(T, E, device=dev), k)
        sets.append((torch.randn(T, H, device=dev).to(dt), w13, w2, w, ids))
    flops = 2.0 * T * k * 3 * H * I
    hit = sum(int(torch.unique(s_[4]).numel()) for s_ in sets) / len(sets)  # distinct experts, mean over the sets
    floor = max(flops / (ceil.bf16_tflops * 1e6), hit * 3 * H * I * 2 / (ceil.read_gbps * 1e3))
    x0, _, _, tw0, ids0 = sets[0]
    ref = ops.get("fused_moe", "eager")(x0, w13, w2, tw0, ids0)
    rows = []
    cfgs = [dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=nw, num_stages=ns)
            for bm, bn, bk, nw, ns in itertools.product([64, 128], [64, 128], [64], [4, 8], [3, 4])]
    if T <= 512:
        # Few tokens per expert (T=32: ~2.3 of 64 tile rows real): the 64-row token tile spends most of its MMAs on
        # padding (T=32: ~53 GFLOP, ~70 µs of tensor-core time for ~5 GFLOP of real work) and its 512 KB programs leave
        # a long tail. Token tiles of 16-32 rows (mma.sync rather than wgmma) and 32-row weight tiles, 4 warps.
        cfgs += [dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=64, num_warps=4, num_stages=ns)
                 for bm, bn, ns in itertools.product([16, 32], [32, 64, 128], [3, 4])]
        cfgs += [dict(BLOCK_M=64, BLOCK_N=32, BLOCK_K=64, num_warps=4, num_stages=ns) for ns in (3, 4)]
    if variants:
        base = grouped_config(T * k, E, H, I)
        off = [{}, dict(N_FASTEST=False), dict(Y_LOWP=False), dict(TMA=False),
               dict(N_FASTEST=False, Y_LOWP=False, TMA=False), dict(GROUP_FUSED=False),
               dict(WIDE=not base.get("WIDE", False))]
        cfgs = [dict(base, **f) for f in off]
        # The down GEMM's own tiles (K = I = 768: 12 chunks of 64), as (BLOCK_N, BLOCK_K, num_warps, num_stages).
        # Below 2048 tokens (session 13, trace_moe.py at T=256: the down GEMM streams w2 at 82 % of the read ceiling
        # where gate/up reaches 90 %; predicted −5..−11 µs): longer programs on 4 warps. (The sort in one launch at
        # 2048 pairs was swept then too, and lost: code in a828a66.)
        if T >= 2048:  # and WIDE's weights by pointers, wider K chunks
            cfgs += [dict(base, WIDE_TMA=False), dict(base, BLOCK_K=128, num_stages=2)]
            downs = [(128, 64, 8, 3), (256, 128, 8, 2), (128, 128, 8, 3), (128, 64, 8, 2), (128, 64, 4, 3), (64, 64, 4, 4)]
        else:
            downs = [(128, 64, 4, 3), (128, 64, 4, 4), (128, 128, 4, 3), (256, 64, 8, 3), (64, 128, 4, 3), (64, 64, 4, 5)]
        cfgs += [dict(base, DOWN=dict(BLOCK_N=bn, BLOCK_K=bk, num_warps=nw, num_stages=ns)) for bn, bk, nw, ns in downs]
        alln = dict(N_FASTEST=True, Y_LOWP=True, TMA=True)
        tiles = ([(128, 128, 64, 8, 2), (128, 64, 64, 4, 3), (64, 128, 64, 4, 3), (128, 128, 128, 8, 2)]
                 if T >= 2048 else
                 [(64, 64, 64, 4, 3), (64, 64, 64, 4, 4), (32, 64, 64, 4, 4), (16, 64, 64, 4, 4),
                  (16, 64, 64, 4, 3), (16, 128, 64, 4, 4), (32, 64, 64, 4, 3)])
        cfgs += [dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=nw, num_stages=ns, **alln)
                 for bm, bn, bk, nw, ns in tiles]
    if overlap:
        # Session 22: the down GEMM starts each token tile once its gate/up column blocks are done (a counter per tile),
        # PDL-launched once every gate/up program has started, so its first programs fill the SMs that gate/up's last
        # wave leaves idle, instead of waiting for the whole GEMM to end.
        base = grouped_config(T * k, E, H, I)
        cfgs = [dict(base, OVERLAP=False), dict(base, OVERLAP=True), dict(base, OVERLAP=True, OVERLAP_TMA=True)]
    if half:
        # Session 23 (stages DT-DV): at T >= 1024 an expert's last 128-row tile is on average half padding; HALF runs it
        # as a 64-row tile when it has at most 64 rows. 3 against 4 stages in each GEMM, with and without it.
        base = dict(grouped_config(T * k, E, H, I), WIDE=True, TMA=True, N_FASTEST=True, Y_LOWP=True, OVERLAP=False)
        down = dict(BLOCK_N=256, BLOCK_K=64, num_warps=8)
        cfgs = [dict(base, HALF=h, num_stages=g, DOWN=dict(down, num_stages=d_))
                for h in (False, True) for g, d_ in ((3, 3), (4, 4), (4, 3), (3, 4))]
    if chunk:
        # Session 23: the chunked grouping's place step sorted each 1024-pair chunk in one program (6.3 µs at T=1024, 6.7
        # at 4096 in trace-moe-…T191916); smaller chunks, more programs, shorter sorts.
        base = grouped_config(T * k, E, H, I)
        cfgs = [base] + [dict(base, GROUP_FUSED=True, GROUP_CHUNK=c_) for c_ in (128, 256, 512)]
    if not (overlap or half or chunk):
        cfgs.append(dict(BLOCK_M=128, GEMM="grouped_mm"))  # PyTorch's grouped GEMM for the same pass, side by side
    fns, errs = {}, {}
    for i, cfg in enumerate(cfgs):
        def f(x, w13, w2, tw, ids, cfg=cfg):
            return moe_grouped(x, w13, w2, tw, ids, out=torch.empty_like(x), config=cfg)
        try:
            got = f(*sets[0])
            errs[i] = float((got.float() - ref.float()).norm() / ref.float().norm())
            fns[i] = f
        except Exception as e:
            rows.append(dict(cfg=cfg, error=f"{type(e).__name__}: {str(e)[:80]}"))
    for i, (us, iqr, passes) in two_pass(fns, sets, samples).items():
        rows.append(dict(cfg=cfgs[i], us=us, iqr=iqr, passes_us=passes, pct=100 * floor / us, err=errs[i],
                         tflops=flops / us / 1e6))
    ok = sorted([r for r in rows if "us" in r], key=lambda r: r["us"])
    print(f"\n== grouped qwen3 T={T} floor={floor:.1f} us (bf16 {ceil.bf16_tflops:.0f} TFLOP/s)")
    for r in (ok if variants else ok[:5]):
        passes = "/".join(f"{p_:.0f}" for p_ in r.get("passes_us", []))
        print(f"  {r['us']:9.1f} us  ±{r['iqr']:.1f} ({passes})  {r['tflops']:6.1f} TFLOP/s  {r['pct']:5.1f}% floor  "
              f"err {r['err']:.1e}  {r['cfg']}")
    bad = [r for r in rows if "error" in r]
    if bad:
        print(f"  {len(bad)} configs failed, e.g. {bad[0]}")
    return dict(shape="qwen3-grouped", T=T, floor_us=floor, rows=rows)


if __name__ == "__main__":
    main()
