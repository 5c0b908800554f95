#!/usr/bin/env bash
# A GPU session's runs, in stages that each fit one 10-minute device call:
#   bash benchmarks/gpu_session.sh A..Z, AA..AZ, BA..BZ, CA..CZ, DA..DZ, EA.. (on the device machine, from the repo root; session 3 ran each once)
# Every stage first measures this machine's ceilings (`moelab hw --save`: the floors of that call use them).
# One log for the whole stage ($OUT/session.log) plus the JSON records: the device tool returns at most 8 files.
# Copy the records into benchmarks/results/ afterwards, then `moelab report --readme README.md`.
# Set MOELAB_COMMIT to the sha the tree was sent at, written out here before the call: `git rev-parse` on the GPU
# machine answers the sha its session started from, not the tree's (session 34's records say 612f57f for later code).
# Stages W, X, Y, AA and AC ran session 6's A/B switches, AD, AE and AG session 7's (run in session 8), and AK and AM
# session 9's (MOELAB_GROUP_SORT, MOELAB_CENSUS_PREFETCH, MOELAB_CENSUS_HIST). Those switches are gone now, and
# ab_chain.py refuses a switch that nothing in src/moelab reads; the stages stay as the record of what ran.
# (MOELAB_FUSED_ROUTER_MAX_T:8 in AK/AL is the default now: those A/Bs would time two identical runs.) Session 10's
# AQ..AU: MOELAB_CENSUS_WIDE, MOELAB_ATTN_WARPS/STAGES/BLOCK_N and MOELAB_ATTN_MERGE_MAX_SPLITS are gone (AU's
# attention-combine step would now time the default), and MOELAB_CHAIN_MAX_T:8 in AS is the default now. Session 11
# (AV..BB): MOELAB_ROUTER_TILE:8192 gives the earlier router tiles; AX/AY's one-pass grouped sweeps predate the
# two-pass timing. Session 16's CE: MOELAB_COMBINE_EARLY_O (the early loads are the only order now) and
# MOELAB_PAIRS_P2 (lost) are gone; CF's MOELAB_ATTN_CHUNK_TILES too (the exact shares tied).
# Session 23's DT-DV ran --grouped-persist (the persistent GEMMs, removed in 3d1d70d); --grouped-half now sweeps HALF
# against the stages.
# Session 30: EM's MOELAB_ROUTE_PACKED and EN's MOELAB_PAIRS_P1_PER_SM lost and are gone; MOELAB_GDN_CONV_IN_PROJ now
# gives the most rows (1 by default), so EM's and EN's "ci" variants time the default.
# Session 31: ER's and ES's MOELAB_ROUTE_BITONIC now switches the route kernel only (on by default since ET); the
# router's last arriver reads MOELAB_ROUTER_BITONIC (off), so ER's "bt" in the router is that switch now.
# EW's MOELAB_GDN_PREFETCH lost (batch 1 2.70 -> 2.72, batch 8 8.24 -> 8.31 ms, H100) and is gone.
# Session 32: EY's MOELAB_PAIRS_SELF_PF (lost) and MOELAB_PAIRS_NEXT_PF_LAST (a tie) are gone, and MOELAB_PAIRS_NEXT_PF
# is 4 MB by default, so EY's n4 times the default. EU's and EV's MOELAB_PAIRS_SHARED_FIRST (a tie) is gone too.
# Session 33: MOELAB_PAIRS_TAIL_PF (FH, FI: lost) and MOELAB_CENSUS_NEXT_PF (FF, FI: its dry control gave the same) are
# gone.
# Session 34: FK's MOELAB_LINEAR_EARLY_RELEASE and MOELAB_GDN_STATE_EARLY, and FL's shape modes of the former, are gone:
# the engine asks for the early release per projection (MOELAB_EARLY_RELEASE_MAX_T, MOELAB_QKV_EARLY_RELEASE) and the
# state early (MOELAB_GDN_STATE_EARLY_MAX_T); FM times that rule.
# Session 35: FS (and the batch-8 A/Bs after it) measured that rule above one row (a tie or a loss: one row stays); FO traced the qkv link; FT
# (prepared) tests why it loses with MOELAB_ATTN_SPLIT_STAGES.
# Session 36: FT and FU ran on one H100 in one call (…-FT-FU-…T1931.log); FR still waits for an H200.
# Session 37: FR and FV ran on an H200; qkv's early release with the split's stages is the default at one row
# (`early_release_stages`), so MOELAB_ATTN_SPLIT_STAGES (FT's s5, FV's q5) and MOELAB_ATTN_MAX_SPLITS (FT's m4, lost)
# are gone.
# Session 38: no machine came; FY (FW cut to ~6 minutes) and FX (the shard without its shared expert) are prepared. FW
# writes 9 JSON files plus the log, one more than the device returns: pack them (`tar czf records.tgz *.json` in $OUT).
# Session 39: no machine came either. FW, FY and FX never ran and are gone: their steps are GA (the GPU tests, the 3k
# A/B, the shard without its shared expert), GB (Qwen3.5's A/B, both batch-1 records) and FZ (2k, 392, 16k, the
# probe), in the order of what is unmeasured, so a late start still gets the first. GA then GB is ~9 minutes and
# returns 5 records; with FZ too, 9: pack them as above.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 MOELAB_RESULTS_DIR=${OUT:?set OUT} COLUMNS=200
LOG=$OUT/session.log
run() {  # run NAME SECONDS CMD...: a step with its own time limit; a failure does not stop the stage
  local name=$1 secs=$2 t0=$SECONDS; shift 2
  echo "===== $name: $* ($(date +%T))" >> "$LOG"
  timeout "$secs" "$@" >> "$LOG" 2>&1
  local rc=$?
  echo "===== $name exit $rc in $((SECONDS - t0)) s" | tee -a "$LOG"
}
case "${1:?stage A to G}" in
  A)  # what is unmeasured: the acquire fix, end-to-end moelab decode, the profiler, T=1 on tensor cores
    run hw 90 python -m moelab hw --save
    run acquire 90 python benchmarks/check_moe_fp32.py
    run decode 140 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run profile 180 python -m moelab profile qwen3-30b-a3b --batch 1 --ctx 1024 --samples 15 --save
    run sweep-t1 100 python benchmarks/sweep_moe.py --mode decode --shapes qwen3 --tokens 1 --samples 10 --t1 dot
    ;;
  B)  # what the session-3 changes bought: PDL's value on a chain, the engine with kv_write + the one-launch router
    run hw 90 python -m moelab hw --save
    run pdl 60 python benchmarks/check_pdl.py
    run decode 120 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run profile 150 python -m moelab profile qwen3-30b-a3b --batch 1 --ctx 1024 --samples 15 --impl eager,moelab --save
    run kernel-tests 150 python -m pytest tests/kernels/test_moe.py tests/kernels/test_router.py tests/kernels/test_kv_cache.py -q -x -p no:cacheprovider --tb=short -rf
    ;;
  C)  # the decode GEMV and PDL in the engine: end to end, the profile, and the GEMV's config sweep
    run hw 90 python -m moelab hw --save
    run decode 120 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run profile 150 python -m moelab profile qwen3-30b-a3b --batch 1 --ctx 1024 --samples 15 --impl eager,moelab --save
    run linear-sweep 300 python benchmarks/bench_linear.py --tokens 1 --pdl --sweep --sweep-samples 5 --no-compile
    ;;
  D)  # tuning: the pair kernel's phase 1 in the streaming form, the router's tile; decode at batch 8/32; tp=4 profile
    run hw 90 python -m moelab hw --save
    run sweep-pairs 150 python benchmarks/sweep_moe.py --mode pairs --shapes qwen3 --tokens 1,4 --samples 10
    run sweep-pairs35 60 python benchmarks/sweep_moe.py --mode pairs --shapes qwen35 --tokens 1 --samples 10
    run sweep-router 60 python benchmarks/sweep_router.py
    run decode-b8 120 python benchmarks/bench_decode.py --batch 8,32 --rows moelab
    run profile-tp4 80 python -m moelab profile qwen3.5-35b-a3b --tp 4 --ctx 1024 --samples 10 --impl eager,moelab --save
    ;;
  E)  # the final side-by-side records: the router sweep, the MoE bench, decode with every baseline, GPU tests
    run hw 90 python -m moelab hw --save
    run sweep-router 60 python benchmarks/sweep_router.py
    run bench-moe 170 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    run decode 330 python benchmarks/bench_decode.py --batch 1 --rows moelab,moelab-eager,hf-eager,hf-compile
    run engine-tests 200 python -m pytest tests/engine tests/kernels/test_linear.py -q -x -p no:cacheprovider --tb=short -rf
    ;;
  F)  # the session's last numbers with the router's tuned tile (and the fused router only at T=1)
    run hw 90 python -m moelab hw --save
    run decode 60 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run decode-b8 100 python benchmarks/bench_decode.py --batch 8,32 --rows moelab
    run linear 120 python benchmarks/bench_linear.py --tokens 1 --pdl
    ;;
  G)  # session 4 first call: confirm the counters commit on the GPU; trace the real chained step kernel by kernel
    run hw 90 python -m moelab hw --save
    run moe-gpu-tests 150 python -m pytest tests/kernels/test_moe.py -k gpu_ -q -x -p no:cacheprovider --tb=short -rf
    run trace-b1 120 python benchmarks/trace_decode.py --batch 1 --ctx 1024
    run trace-b8 100 python benchmarks/trace_decode.py --batch 8 --ctx 1024
    run decode 100 python benchmarks/bench_decode.py --batch 1 --rows moelab
    ;;
  H)  # the chained step traced kernel by kernel; qk_norm_rope_kv (the KV append folded into the q/k prologue)
    run trace-b1 120 python benchmarks/trace_decode.py --batch 1 --ctx 1024
    run gpu-tests 200 python -m pytest tests/kernels/test_rope.py tests/kernels/test_kv_cache.py tests/engine/test_parity.py tests/engine/test_generate.py -q -x -p no:cacheprovider --tb=short -rf
    run decode 100 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run trace-b8 100 python benchmarks/trace_decode.py --batch 8 --ctx 1024
    ;;
  I)  # the norms folded into the qkv GEMV / router, attention in one launch: GPU tests, decode, trace, attention bench
    run gpu-tests 200 python -m pytest tests/kernels/test_rope.py tests/kernels/test_linear.py tests/kernels/test_router.py tests/kernels/test_attention.py tests/engine/test_parity.py tests/engine/test_generate.py -q -p no:cacheprovider --tb=short -rf
    run decode 100 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run trace-b1 80 python benchmarks/trace_decode.py --batch 1 --ctx 1024
    run attention 120 python benchmarks/bench_attention.py --no-compile --samples 15
    run decode-b8 100 python benchmarks/bench_decode.py --batch 8,32 --rows moelab
    ;;
  J)  # after reverting the folded norms and the one-launch attention: confirm; the whole-row GEMV tile A/B
      # (MOELAB_LINEAR_WHOLE_ROWS: 2.695 vs 2.707 ms, within the spread; the knob was removed after this run)
    run gpu-tests 150 python -m pytest tests/kernels/test_rope.py tests/engine/test_parity.py tests/engine/test_generate.py -q -p no:cacheprovider --tb=short -rf
    run decode 60 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run decode-whole-rows 60 env MOELAB_LINEAR_WHOLE_ROWS=1 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run attention-sweep 90 python benchmarks/bench_attention.py --no-compile --samples 10 --shapes 1x1024,1x16384 --sweep
    run decode-b8 100 python benchmarks/bench_decode.py --batch 8,32 --rows moelab
    ;;
  K)  # the phase-2 wait with a nanosleep backoff: the pair kernel alone, then end to end
    run spin-sweep 150 python benchmarks/sweep_moe.py --mode pairs --shapes qwen3,qwen35 --tokens 1,2,4 --samples 15 --spin 0,32,128,512,2048
    run decode 60 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run decode-spin128 60 env MOELAB_PAIRS_SPIN_SLEEP=128 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run decode-spin512 60 env MOELAB_PAIRS_SPIN_SLEEP=512 python benchmarks/bench_decode.py --batch 1 --rows moelab
    ;;
  L)  # the session's final records: the T=1 backoff on by default; MoE GPU tests, the MoE bench, decode
    run moe-gpu-tests 120 python -m pytest tests/kernels/test_moe.py -k gpu_ -q -x -p no:cacheprovider --tb=short -rf
    run bench-moe 190 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    run decode 60 python benchmarks/bench_decode.py --batch 1 --rows moelab
    ;;
  M)  # T=32..64: the census decode kernel against the grouped path; batch 32 end to end with the census at T=32
    run sweep-32 150 python benchmarks/sweep_moe.py --mode decode --shapes qwen3 --tokens 32,64 --grouped 32,64 --samples 10
    run decode-b32 60 python benchmarks/bench_decode.py --batch 32 --rows moelab
    run decode-b32-census 60 env MOELAB_DECODE_MAX_PAIRS=256 python benchmarks/bench_decode.py --batch 32 --rows moelab
    # (the census lost end to end, 19.9 vs 18.3 ms; the switch was removed after this run)
    ;;
  N)  # a current profile (qk_norm_rope_kv), and the attention heuristic at 64k and batch 8
    run profile 150 python -m moelab profile qwen3-30b-a3b --batch 1 --ctx 1024 --samples 10 --impl eager,moelab --save
    run attention-sweep 70 python benchmarks/bench_attention.py --no-compile --samples 10 --shapes 1x65536,8x16384 --sweep
    ;;
  O)  # the attention heuristic with long splits on 128-key tiles: GPU tests, then the attention bench
    run attention-tests 80 python -m pytest tests/kernels/test_attention.py -q -x -p no:cacheprovider --tb=short -rf
    run attention 60 python benchmarks/bench_attention.py --no-compile --samples 15
    ;;
  P)  # session 5: q/k norm + RoPE + KV append fused into the split kernel, PDL prefetch of its first K/V tile
    run gpu-tests 200 python -m pytest tests/kernels/test_attention.py tests/kernels/test_rope.py tests/engine/test_parity.py tests/engine/test_generate.py -q -p no:cacheprovider --tb=short -rf
    run decode 60 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run decode-unfused 60 env MOELAB_ATTN_KV=0 python benchmarks/bench_decode.py --batch 1 --rows moelab  # (switch removed since)
    run trace-b1 80 python benchmarks/trace_decode.py --batch 1 --ctx 1024
    run decode-b8 100 python benchmarks/bench_decode.py --batch 8,32 --rows moelab
    ;;
  Q)  # L2 prefetch (cp.async.bulk.prefetch.L2) of o_proj from attention and of the next qkv from the post-attention
      # norm (commit 4afa0a1): a loss (one SM issues ~0.5 TB/s; the norm took 42 µs), reverted in ed38882
    run gpu-tests 150 python -m pytest tests/kernels/test_attention.py tests/kernels/test_rmsnorm.py tests/engine/test_generate.py -q -p no:cacheprovider --tb=short -rf
    run decode 45 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run decode-no-prefetch 45 env MOELAB_PREFETCH=0 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run decode-o-only 45 env MOELAB_PREFETCH_QKV=0 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run decode-unfused 45 env MOELAB_ATTN_KV=0 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run trace-b1 60 python benchmarks/trace_decode.py --batch 1 --ctx 1024
    run trace-b1-no-prefetch 60 env MOELAB_PREFETCH=0 python benchmarks/trace_decode.py --batch 1 --ctx 1024
    run decode-b8 100 python benchmarks/bench_decode.py --batch 8,32 --rows moelab
    ;;
  R)  # the attention split count in the chain: fewer splits skip the combine launch (MOELAB_ATTN_SPLITS)
    run decode 45 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run decode-s1 45 env MOELAB_ATTN_SPLITS=1 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run decode-s2 45 env MOELAB_ATTN_SPLITS=2 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run decode-s3 45 env MOELAB_ATTN_SPLITS=3 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run trace-b1 60 python benchmarks/trace_decode.py --batch 1 --ctx 1024
    run trace-b1-s1 60 env MOELAB_ATTN_SPLITS=1 python benchmarks/trace_decode.py --batch 1 --ctx 1024
    run trace-b1-s4 60 env MOELAB_ATTN_SPLITS=4 python benchmarks/trace_decode.py --batch 1 --ctx 1024
    run decode-b8 60 python benchmarks/bench_decode.py --batch 8 --rows moelab
    run decode-b8-s1 60 env MOELAB_ATTN_SPLITS=1 python benchmarks/bench_decode.py --batch 8 --rows moelab
    # (the heuristic's split count was best everywhere: the switch was removed after this run)
    ;;
  S)  # the fused prologue with the k head in row G of the q tile (one layout: 34 bar.sync against 56, 137 registers
      # against 168 in the sm_90 compile); the session's final decode records
    run gpu-tests 150 python -m pytest tests/kernels/test_attention.py tests/kernels/test_rope.py tests/engine/test_parity.py -q -p no:cacheprovider --tb=short -rf
    run decode 45 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run trace-b1 60 python benchmarks/trace_decode.py --batch 1 --ctx 1024
    run decode-b8 100 python benchmarks/bench_decode.py --batch 8,32 --rows moelab
    # (no change: split advance 7.34 µs at 1k, batch 1 2.714 ms; the barriers were not the cost)
    ;;
  T)  # the prologue's constants (norm weights, cos/sin at the position) computed before gdc_wait
    run gpu-tests 120 python -m pytest tests/kernels/test_attention.py tests/kernels/test_rope.py -q -p no:cacheprovider --tb=short -rf
    run decode 45 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run trace-b1 60 python benchmarks/trace_decode.py --batch 1 --ctx 1024
    ;;
  U)  # router_experts (commit 61cf490): the experts started while the router runs (PDL + the router's flag), A/B in
      # one call; a loss at batch 1 (2.760 vs 2.708 ms), reverted
    run gpu-tests 170 python -m pytest tests/kernels/test_router_experts.py tests/kernels/test_router.py tests/engine/test_generate.py tests/engine/test_parity.py -q -p no:cacheprovider --tb=short -rf
    run decode 45 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run decode-no-early 45 env MOELAB_EARLY_EXPERTS=0 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run trace-b1 45 python benchmarks/trace_decode.py --batch 1 --ctx 1024
    run decode-b8 80 python benchmarks/bench_decode.py --batch 8,32 --rows moelab
    run profile 150 python -m moelab profile qwen3-30b-a3b --batch 1 --ctx 1024 --samples 10 --impl eager,moelab --save
    ;;
  V)  # the session's final records, on the shipped code
    run decode 45 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run decode-b8 80 python benchmarks/bench_decode.py --batch 8,32 --rows moelab
    run profile 100 python -m moelab profile qwen3-30b-a3b --batch 1 --ctx 1024 --samples 10 --impl eager,moelab --save
    run trace-b1 45 python benchmarks/trace_decode.py --batch 1 --ctx 1024
    ;;
  W)  # (outcome: batch 1 2.699 -> 2.483 ms with all four, each one a gain alone; batch 8 +1.2 %)
      # session 6: the launch-chain switches, A/B in one process (ab_chain.py): W = every PDL GEMV requests its whole
      # slice before gdc_wait (o_proj: 32 KB per program, 96 registers, one wave); A = the split kernel releases a
      # PDL-launched combine as it starts, so the o projection streams during the split; N = the norms PDL-launched,
      # the expert kernels release them as they start (the next layer's qkv weights stream in the experts' tail);
      # M = the pair kernel PDL-launched after the router (a hardware wait, no spinning programs)
    ALL="MOELAB_LINEAR_WHOLE_K=1 MOELAB_ATTN_PDL=1 MOELAB_NORM_PDL=1 MOELAB_MOE_PDL=1"
    run gpu-tests 200 env $ALL python -m pytest tests/kernels/test_linear.py tests/kernels/test_attention.py tests/kernels/test_rmsnorm.py tests/kernels/test_moe.py tests/kernels/test_router.py tests/engine/test_parity.py -q -p no:cacheprovider --tb=short -rf
    run ab-b1 240 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,W=MOELAB_LINEAR_WHOLE_K,A=MOELAB_ATTN_PDL,WA=MOELAB_LINEAR_WHOLE_K+MOELAB_ATTN_PDL,N=MOELAB_NORM_PDL,M=MOELAB_MOE_PDL,all=MOELAB_LINEAR_WHOLE_K+MOELAB_ATTN_PDL+MOELAB_NORM_PDL+MOELAB_MOE_PDL
    run trace-all 45 env $ALL python benchmarks/trace_decode.py --batch 1 --ctx 1024
    run ab-b8 120 python benchmarks/ab_chain.py --batch 8 --rounds 2 --variants base,all=MOELAB_LINEAR_WHOLE_K+MOELAB_ATTN_PDL+MOELAB_NORM_PDL+MOELAB_MOE_PDL
    ;;
  X)  # (outcome: batch 1 2.458 ms with the split's release after its prologue, best; the pair kernel's release at
      # its start beat the later one; at batch 8 every link cost 0.5-0.9 %, at 32 all within 0.4 %: kernels.chain_pdl)
      # the trigger points: the split kernel releasing the combine after its prologue (ATTN_PDL=2), the pair kernel's
      # phase 2 releasing the norm once its activations are ready (NORM_PDL=2); which switch costs at batch 8 and 32
    ALL="MOELAB_LINEAR_WHOLE_K=1 MOELAB_ATTN_PDL=2 MOELAB_NORM_PDL=2 MOELAB_MOE_PDL=1"
    run gpu-tests 160 env $ALL python -m pytest tests/kernels/test_moe.py tests/kernels/test_attention.py tests/kernels/test_router.py tests/engine/test_parity.py -k "gpu or graph or parity or router" -q -p no:cacheprovider --tb=short -rf
    W1=MOELAB_LINEAR_WHOLE_K+MOELAB_MOE_PDL
    run ab-b1 200 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,all11=$W1+MOELAB_ATTN_PDL+MOELAB_NORM_PDL,all21=$W1+MOELAB_ATTN_PDL:2+MOELAB_NORM_PDL,all12=$W1+MOELAB_ATTN_PDL+MOELAB_NORM_PDL:2,all22=$W1+MOELAB_ATTN_PDL:2+MOELAB_NORM_PDL:2
    run ab-b8 150 python benchmarks/ab_chain.py --batch 8 --rounds 2 --variants base,A=MOELAB_ATTN_PDL,A2=MOELAB_ATTN_PDL:2,N=MOELAB_NORM_PDL
    run ab-b32 150 python benchmarks/ab_chain.py --batch 32 --rounds 2 --new-tokens 64 --variants base,A2=MOELAB_ATTN_PDL:2,N=MOELAB_NORM_PDL
    ;;
  Y)  # (outcome: GPU tests 90 passed; fill 2.427 against 2.462 ms, shipped; BLOCK_K2=512 2.695, a loss)
      # the chain shipped (kernels.chain_pdl, no switches): its GPU tests; then two small A/Bs in the chain: the
      # whole-K GEMV with as many rows as fill 32 KB (qkv: 8 rows, 640 programs), the pair kernel's phase-2 chunk 512
    run gpu-tests 200 python -m pytest tests/kernels/test_linear.py tests/kernels/test_rmsnorm.py tests/kernels/test_moe.py tests/kernels/test_attention.py tests/kernels/test_router.py tests/engine/test_parity.py tests/engine/test_generate.py -k "gpu or graph or parity or router" -q -p no:cacheprovider --tb=short -rf
    run ab-b1 150 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,fill=MOELAB_WHOLE_K_FILL,k2=MOELAB_PAIRS_K2:512,both=MOELAB_WHOLE_K_FILL+MOELAB_PAIRS_K2:512
    ;;
  Z)  # the session's final records, on the shipped code
    run gpu-linear 60 python -m pytest tests/kernels/test_linear.py -k gpu -q -p no:cacheprovider --tb=short -rf
    run decode 45 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run decode-b8 80 python benchmarks/bench_decode.py --batch 8,32 --rows moelab
    run profile 100 python -m moelab profile qwen3-30b-a3b --batch 1 --ctx 1024 --samples 10 --impl eager,moelab --save
    run trace-b1 45 python benchmarks/trace_decode.py --batch 1 --ctx 1024
    ;;
  AA) # (outcome: every smaller tile lost, 2.50-2.62 against 2.430 ms; the switches are gone)
      # the pair kernel's phase-2 tile in the chain (its registers bound the kernel to 2 programs per SM: 255 at
      # BLOCK_H=32 x BLOCK_K2=256; 219 at 32 x 128 or 16 x 256): MOELAB_PAIRS_K2 / MOELAB_PAIRS_H, A/B at batch 1
    run ab-b1 200 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,k2_128=MOELAB_PAIRS_K2:128,h16=MOELAB_PAIRS_H:16,h16k2_128=MOELAB_PAIRS_H:16+MOELAB_PAIRS_K2:128,h64k2_128=MOELAB_PAIRS_H:64+MOELAB_PAIRS_K2:128
    ;;
  AB) # the review of session 6 on the H200: the launch-flag changes (no PDL after a weight copy; the census kernel's
      # unused release removed), the GPU tests of the kernels they touch, and batch 1 once more
    run gpu-tests 150 python -m pytest tests/kernels/test_rmsnorm.py tests/kernels/test_attention.py tests/kernels/test_moe.py tests/kernels/test_router.py tests/kernels/test_linear.py -k "gpu or graph" -q -p no:cacheprovider --tb=short -rf
    run decode 45 python benchmarks/bench_decode.py --batch 1 --rows moelab
    ;;
  AC) # (outcome: 2 row blocks per program 2.558, 3 blocks 2.683, against 2.432 ms, the same tokens; reverted)
      # phase-1 programs of the pair kernel doing ROWS row blocks each: the expert id and the program start paid once
      # per ROWS blocks (MOELAB_PAIRS_ROWS, now gone), A/B at batch 1
    run ab-b1 150 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,rows2=MOELAB_PAIRS_ROWS:2,rows3=MOELAB_PAIRS_ROWS:3
    ;;
  AD) # session 7's prepared work, first call of a session with a GPU (predictions in docs/worklog.md, session 7):
      # the GPU tests of every kernel file (session 6's two CPU-only commits f6186ad and c61140a never ran on a GPU;
      # the tensor-core linear's bf16 path only runs there); the decode projections at T=1..64, GEMV vs tensor cores vs
      # cuBLAS side by side; then in the batch-8 step the tensor-core linear (MOELAB_LINEAR_DOT_MIN_T) and the router
      # logits on moelab's kernel instead of cuBLAS (MOELAB_ROUTER_DENSE)
    run gpu-tests 170 python -m pytest tests/kernels tests/engine/test_generate.py -k "gpu or graph or match_transformers" -q -p no:cacheprovider --tb=short -rf
    run linear 170 python benchmarks/bench_linear.py --tokens 1,4,8,16,32,64 --no-compile
    run ab-b8 200 python benchmarks/ab_chain.py --batch 8 --rounds 2 --variants base,dot4=MOELAB_LINEAR_DOT_MIN_T:4,dot8=MOELAB_LINEAR_DOT_MIN_T:8,r=MOELAB_ROUTER_DENSE,dot4r=MOELAB_LINEAR_DOT_MIN_T:4+MOELAB_ROUTER_DENSE
    ;;
  AE) # batch 32: the engine's projections on the tensor-core linear instead of cuBLAS (MOELAB_DENSE_MAX_T=64), the
      # grouped path's grouping in one launch instead of ~13 (MOELAB_GROUP_FUSED); the grouped MoE path's tiles at
      # T=32 and 256 with token tiles of 16-32 rows; traces of batch 8 and 1 with the per-place labels
    run ab-b32 200 python benchmarks/ab_chain.py --batch 32 --rounds 2 --new-tokens 64 --variants base,d64=MOELAB_DENSE_MAX_T:64,g=MOELAB_GROUP_FUSED,both=MOELAB_DENSE_MAX_T:64+MOELAB_GROUP_FUSED
    run sweep-grouped 240 python benchmarks/sweep_moe.py --shapes "" --grouped 32,256 --samples 10
    run trace-b8 60 python benchmarks/trace_decode.py --batch 8 --ctx 1024
    run trace-b1 45 python benchmarks/trace_decode.py --batch 1 --ctx 1024
    ;;
  AH) # session 8's records with what AD/AG/AE adopted (the tensor-core linear from T=4, the router logits on dense,
      # greedy_emit): decode at batch 1, 8 and 32, and the engine's GPU tests
    run hw 90 python -m moelab hw --save
    run decode 100 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run decode-b8 160 python benchmarks/bench_decode.py --batch 8,32 --rows moelab
    run gpu-tests 120 python -m pytest tests/kernels/test_moe_custom_op.py tests/engine/test_generate.py -k "match_transformers or graph" -q -p no:cacheprovider --tb=short -rf
    ;;
  AI) # the grouped path's 16-row tiles at ≤ 2 pairs an expert (sweep-grouped at T=32 in AE): decode at batch 8 and
      # 32, the grouped tiles at T=64 and 128 (unmeasured between), the MoE bench for the records, a batch-32 trace
    run decode-b8 100 python benchmarks/bench_decode.py --batch 8,32 --rows moelab
    run sweep-grouped 80 python benchmarks/sweep_moe.py --shapes "" --grouped 64,128 --samples 10
    run bench-moe 170 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    run trace-b32 60 python benchmarks/trace_decode.py --batch 32 --ctx 1024
    ;;
  AJ) # the session's last device minutes: the MoE bench with the 16-row grouped tiles up to 8 pairs an expert; at
      # batch 8 the census kernel's pipeline depth and the tensor-core linear's tiles (AF, trimmed to T=8)
    run bench-moe 80 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    run sweep-census 150 python benchmarks/sweep_moe.py --shapes qwen3 --tokens 8 --stages 2,3,4,5 --samples 10
    run sweep-linear 100 python benchmarks/bench_linear.py --ops qkv_proj,o_proj,lm_head --tokens 8 --no-compile --sweep dot --sweep-samples 5
    ;;
  AK) # session 9's first call: the records of what session 8 adopted from kernel sweeps only (the census tile at T <= 8,
      # qkv's split; predicted batch 8 8.16 -> ~7.7 ms), the grouping by one sort (MOELAB_GROUP_SORT, predicted batch
      # 32 -0.4 to -0.5 ms), the one-launch router at batch 8 now that its last arriver routes all rows at once
      # (predicted ~5 us against ~7, batch 8 -0.1 ms), attention at batch 8/32 and 1k (never swept there: 11.7 us of
      # advance against a 3.6 us floor in the batch-8 trace), the census kernel's phase 2 with its first w2 chunk
      # requested before its wait (MOELAB_CENSUS_PREFETCH, predicted batch 8 -0.1 to -0.2 ms), a batch-8 trace
    run gpu-tests 90 python -m pytest tests/kernels/test_moe.py tests/kernels/test_router.py -k "grouping or grouped or census or decode or router or route or prefetch" -q -p no:cacheprovider --tb=short -rf
    run decode-b8 90 python benchmarks/bench_decode.py --batch 8,32 --rows moelab
    run sweep-router 50 python benchmarks/sweep_router.py --tokens 8 --samples 10
    run ab-b8 140 python benchmarks/ab_chain.py --batch 8 --rounds 2 --variants base,fr8=MOELAB_FUSED_ROUTER_MAX_T:8,pf=MOELAB_CENSUS_PREFETCH,both=MOELAB_FUSED_ROUTER_MAX_T:8+MOELAB_CENSUS_PREFETCH
    run ab-b32 80 python benchmarks/ab_chain.py --batch 32 --rounds 2 --new-tokens 64 --variants base,sort=MOELAB_GROUP_SORT
    run attention 80 python benchmarks/bench_attention.py --shapes 8x1024,32x1024 --no-compile --sweep --samples 15
    run trace-b8 30 python benchmarks/trace_decode.py --batch 8 --ctx 1024
    ;;
  AL) # session 9's second call: the GPU tests AK's time limit cut (MoE, router, the engine's parity), the one-launch
      # router at batch 8 again, now on 4 warps (alone 6.0 us against 8.0 for dense + route; predicted batch 8
      # -0.05 to -0.1 ms, if the chain keeps the kernel's gain), 8 warps in the sweep, and the batch-32 record with
      # the one-sort grouping adopted (15.2 ms in AK's A/B)
    run gpu-tests 200 python -m pytest tests/kernels/test_moe.py tests/kernels/test_router.py tests/engine/test_generate.py -q -p no:cacheprovider --tb=short -rf -x
    run sweep-router 40 python benchmarks/sweep_router.py --tokens 8 --samples 10
    run ab-b8 100 python benchmarks/ab_chain.py --batch 8 --rounds 3 --variants base,fr8=MOELAB_FUSED_ROUTER_MAX_T:8
    run decode-b32 60 python benchmarks/bench_decode.py --batch 32 --rows moelab
    run bench-moe 70 python -m moelab bench moe --tokens 1,8,32,64,256 --samples 10 --save
    ;;
  AM) # session 9's last call: the GPU tests AL's limit cut (the router's [T, E] routing tile and the engine's parity
      # with the router fused up to 8 rows, the census by histogram), the census by one histogram at batch 8
      # (MOELAB_CENSUS_HIST: ~360 fewer instructions before each program's first load; predicted -3 to -6 us of the
      # census kernel's 126, batch 8 -0.15 to -0.3 ms), the records of batch 1 and 8 (8 with and without it), a trace
    run gpu-tests 150 python -m pytest tests/kernels/test_router.py tests/engine/test_generate.py tests/kernels/test_moe.py -k "router or route or match_transformers or graph or group or histogram" -q -p no:cacheprovider --tb=short -rf
    run ab-b8 70 python benchmarks/ab_chain.py --batch 8 --rounds 2 --variants base,hist=MOELAB_CENSUS_HIST
    run decode 70 python benchmarks/bench_decode.py --batch 1,8 --rows moelab
    MOELAB_CENSUS_HIST=1 run decode-hist 45 python benchmarks/bench_decode.py --batch 8 --rows moelab
    run trace-b8 30 python benchmarks/trace_decode.py --batch 8 --ctx 1024
    ;;
  AN) # session 9's last device minutes: the census by histogram as the only form (AM: a tie at batch 8, and bad ids
      # get no slot), its GPU tests, and the MoE bench at every T of the README's table
    run gpu-tests 70 python -m pytest tests/kernels/test_moe.py -k "decode or census or bad_id or many_seeds" -q -p no:cacheprovider --tb=short -rf
    run bench-moe 80 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    ;;
  AO) # for session 10: the census kernel's phase-2 tile (fewer, larger programs; sweep_moe.py --phase2 says the
      # prediction), at T=8 and 16
    run sweep-census 200 python benchmarks/sweep_moe.py --shapes qwen3 --tokens 8,16 --phase2 --samples 10
    ;;
  AP) # session 10's first call: stage AO's sweep at T=2..16, with the pair kernel beside the census at T=2 and 4
      # (PAIRS_MAX_T=4 came from session 3's census, 43 vs 61 us at T=2 and 78 vs 87 at T=4; the census has since
      # gained its 32-row 2-warp 4-stage tile, 135 -> 128 us at T=8: predicted the census now wins at T=4, ~70 against
      # 78 us, and still loses at T=2), and the first hardware counters of this project (Nsight Compute, which
      # KINDS.md saw working on this runtime): the census at T=8, the pair kernel at T=1, qkv and o at T=8,
      # attention at batch 8 / 1k, and the read-ceiling kernel to read them against
    run sweep-census 260 python benchmarks/sweep_moe.py --shapes qwen3 --tokens 2,4,8,16 --phase2 --samples 10
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
    echo "ncu: ${NCU:-none}" >> "$LOG"
    run ncu 200 bash -c "$NCU --clock-control none -k regex:'_moe_decode_kernel|_moe_pairs_kernel|_linear_dot_kernel|_split_kernel|_stream_read_kernel' -c 18 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct,dram__throughput.avg.pct_of_peak_sustained_elapsed python benchmarks/ncu_kernels.py > $OUT/ncu.txt 2>&1"
    ;;
  AQ) # session 10's second call. (1) Stage AP's ncu: the census kernel at 81-84 % of the DRAM peak, the read-ceiling
      # kernel at 97 %; the census reads its weights as 32 x 64 tiles, 128-byte runs 4 KB apart. probe_layout.py reads
      # 268 MB that way and from a blocked layout (each tile one contiguous run). Predicted: row-major 32x64 ~88-90 %
      # of the read ceiling (lm_head's 64x64 tiles reached 89 % of its floor at T=8), blocked ~95 %; if so, repacking
      # the experts at load time is worth building. (2) AP's phase-2 sweep winner in the chain at batch 8
      # (MOELAB_CENSUS_WIDE: BLOCK_H=64 on 4 warps; alone -2.0 us at T=8): predicted 7.94 -> ~7.85 ms
    run probe-layout 90 python benchmarks/probe_layout.py --samples 10
    run ab-b8 150 python benchmarks/ab_chain.py --batch 8 --rounds 3 --variants base,wide=MOELAB_CENSUS_WIDE
    ;;
  AR) # session 10's third call. AQ: the layout changed nothing (blocked vs row-major within 2 %), the tile's size did
      # (32x64 on 2 warps 78 % of the read ceiling, 64x128 on 4 warps 89 %); MOELAB_CENSUS_WIDE won (7.93 -> 7.86 ms at
      # batch 8) and is the default now for T = 2..16. (1) The census phase-1 tiles at 4 warps (sweep_moe.py --phase1;
      # predicted BLOCK_K=128 at 3 stages -3 to -6 us at T=8). (2) The attention split kernel's warps and stages, never
      # swept (4 and 3): ncu at batch 8 / 1k saw 1,400 instructions per warp at 8 cycles each, 7 warps per SM; the
      # engine's form compiles to 216 registers at 4 warps (2 programs per SM), 128 at 8 (sm_90, Triton 3.6).
      # Predicted 8 warps -2 to -3 us of 12.6 at batch 8 / 1k, and batch 8 -0.1 ms in the chain; 2 stages no change.
    run sweep-census 120 python benchmarks/sweep_moe.py --shapes qwen3 --tokens 8,16 --phase1 --samples 10
    run attention 150 python benchmarks/bench_attention.py --shapes 1x1024,8x1024,1x16384 --no-compile --sweep --warps 2,4,8 --stages 2,3 --samples 15
    run ab-b8 170 python benchmarks/ab_chain.py --batch 8 --rounds 2 --variants base,w8=MOELAB_ATTN_WARPS:8,s2=MOELAB_ATTN_STAGES:2,w8s2=MOELAB_ATTN_WARPS:8+MOELAB_ATTN_STAGES:2
    run ab-b1 90 python benchmarks/ab_chain.py --batch 1 --rounds 2 --variants base,w8=MOELAB_ATTN_WARPS:8
    ;;
  AS) # session 10's fourth call. AR: 8 warps for attention lost (batch 8 7.71 -> 7.85, batch 1 2.40 -> 2.50), 2 stages
      # tied; census phase-1 tiles at 4 warps: T=8 a tie, T=16 BLOCK_K=128 -1.6 %. Batch 8 measured 7.71 ms (floor
      # 5.75: 74.6 %). Now the PDL chain at batch 8 (MOELAB_CHAIN_MAX_T:8; session 6 measured it losing 0.5-0.9 %
      # there, with the GEMV at T=8 then): the combine and the norms launch early, and the census kernel joins the
      # chain as the pair kernel does (released by the router, waits in hardware, releases the next norm).
      # Predicted -0.05 to -0.1 ms. GPU tests of the census's new tiles first; a batch-8 record and trace.
    run gpu-tests 100 python -m pytest tests/kernels/test_moe.py -k "decode or census or bad_id or many_seeds" -q -p no:cacheprovider --tb=short -rf
    run ab-b8 130 python benchmarks/ab_chain.py --batch 8 --rounds 3 --variants base,chain8=MOELAB_CHAIN_MAX_T:8
    run decode-b8 60 python benchmarks/bench_decode.py --batch 8 --rows moelab
    run trace-b8 40 python benchmarks/trace_decode.py --batch 8 --ctx 1024
    ;;
  AT) # session 10's fifth call. AS: the PDL chain at batch 8 won (7.86 -> 7.75 ms, the same tokens; predicted -0.05
      # to -0.1 ms): CHAIN_MAX_T is 8 now. (1) The engine's GPU tests (bf16 parity with transformers, graph replay) on
      # the chain at batch 8. (2) Attention's 32-key tiles at batch 8 (the best of two sweeps there, AR 10.8 against
      # 12.5 us, session 9 12.3 against 12.6): predicted -0.05 ms. (3) The records: decode at batch 1, 8, 32 and the
      # MoE bench at every T.
    run gpu-tests 120 python -m pytest tests/engine/test_generate.py tests/kernels/test_moe.py -k "match_transformers or graph or decode or census" -q -p no:cacheprovider --tb=short -rf
    run ab-b8 90 python benchmarks/ab_chain.py --batch 8 --rounds 2 --variants base,bn32=MOELAB_ATTN_BLOCK_N:32
    run decode 110 python benchmarks/bench_decode.py --batch 1,8,32 --rows moelab
    run bench-moe 90 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    ;;
  AU) # session 10's last call. AT: records batch 1 2.41 ms (55.8 %), batch 8 7.71 ms (74.4 %: 0.06 ms short of 75 %),
      # batch 32 15.1 ms (78.6 %); attention's 32-key tiles tied (7.74 vs 7.75). Now the split kernel's last arriver
      # merges up to 16 splits itself (no combine launch; MOELAB_ATTN_MERGE_MAX_SPLITS:0 is the old form). Predicted:
      # attention alone batch 1 / 1k 6.6 -> 5.6-6.0 us (the issue's <= 6), batch 8 / 1k 11.9 -> 10.5-11; in the chain
      # batch 8 -0.03 to -0.07 ms, batch 1 -0.02 to -0.05 ms. GPU tests first, then the records.
    run gpu-tests 120 python -m pytest tests/kernels/test_attention.py tests/engine/test_generate.py -k "not long" -q -p no:cacheprovider --tb=short -rf
    run attention 40 python benchmarks/bench_attention.py --shapes 1x1024,8x1024,1x16384 --no-compile --samples 15
    MOELAB_ATTN_MERGE_MAX_SPLITS=0 run attention-combine 40 python benchmarks/bench_attention.py --shapes 1x1024,8x1024 --no-compile --samples 15
    run ab-b8 90 python benchmarks/ab_chain.py --batch 8 --rounds 2 --variants base,combine=MOELAB_ATTN_MERGE_MAX_SPLITS:0
    run ab-b1 50 python benchmarks/ab_chain.py --batch 1 --rounds 2 --variants base,combine=MOELAB_ATTN_MERGE_MAX_SPLITS:0
    run decode 70 python benchmarks/bench_decode.py --batch 1,8 --rows moelab
    ;;
  AV) # for session 11 (batch 8 is 0.6 % short of 75 %): (1) the census kernel's weight tiles by TMA (MOELAB_CENSUS_TMA:
      # tensor descriptors; 71 registers against 67, the copies by the copy engine, not per-thread cp.async; sm_90
      # Triton 3.6 on the CPU; its GPU tests first): predicted 0 to -5 % of the kernel at T=8, batch 8 0 to -0.25 ms;
      # (2) the counters of the shipped census tiles (stage AP read the old 2-warp ones) and of the router at T=8,
      # with the warp-stall sampling per instruction (SourceCounters); (3) the router's x read in one L2 round trip,
      # not two (sweep_router.py --block-h 2048: predicted -0.5 to -0.8 us of its 6.1 at T=8)
    run gpu-tests-tma 60 python -m pytest tests/kernels/test_moe.py -k "tensor_descriptor" -q -p no:cacheprovider --tb=short -rf
    run gpu-tests 90 python -m pytest tests/kernels/test_moe.py -k "decode or census" -q -p no:cacheprovider --tb=short -rf
    run sweep-census 90 python benchmarks/sweep_moe.py --shapes qwen3 --tokens 8,16 --tma --samples 10
    run ab-b8 90 python benchmarks/ab_chain.py --batch 8 --rounds 2 --variants base,tma=MOELAB_CENSUS_TMA
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
    run ncu 150 bash -c "$NCU --clock-control none -k regex:'_moe_decode_kernel|_router_kernel' -c 4 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SourceCounters python benchmarks/ncu_kernels.py --only census8,router8 > $OUT/ncu.txt 2>&1"
    run sweep-router 60 python benchmarks/sweep_router.py --tokens 8 --samples 10 --block-h 1024,2048
    ;;
  AW) # session 11: (1) the router's x in one chunk at T=8 on 8 warps, now the default (stage AV's sweep: 6.57 against
      # 8.25 us): batch 8 against the old 8K tiles (MOELAB_ROUTER_TILE=8192), predicted -0.05 to -0.08 ms of 7.75;
      # (2) the grouped (prefill) path's options: N_FASTEST (column blocks of one token tile on consecutive programs:
      # the down GEMM's act rows stay in L2 across its 16 column blocks, predicted -5 to -15 % at T=4096), Y_LOWP (y
      # in bf16: 268 MB less written and read at T=4096, predicted ~-60 us of 1,080), TMA (weight and act tiles by
      # tensor descriptor: predicted 0 to -15 %, compute-bound); (3) ncu of the grouped kernels at T=256 and 4096
    run gpu-tests 120 python -m pytest tests/kernels/test_moe.py tests/kernels/test_router.py -k "grouped or router" -q -p no:cacheprovider --tb=short -rf
    run ab-b8 130 python benchmarks/ab_chain.py --batch 8 --rounds 3 --variants base,tile8k=MOELAB_ROUTER_TILE:8192
    run sweep-grouped 200 python benchmarks/sweep_moe.py --shapes "" --grouped 32,256,4096 --grouped-variants --samples 10
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
    run ncu 120 bash -c "$NCU --clock-control none -k regex:'_gate_up_kernel|_down_kernel|_sum_k_kernel' --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis python benchmarks/ncu_kernels.py --only grouped256,grouped4096 > $OUT/ncu.txt 2>&1"
    ;;
  AX) # session 11: the grouped path's options as defaults (grouped_config), the chunked grouping above 1,024 pairs
      # (three launches instead of ~13 torch ops: predicted -60 to -100 us at T=4096), the down GEMM's own tiles;
      # then the records: bench moe (T=4096 predicted ~770-860 us, 47-52 % of the bf16 rate; T=32 ~261, T=256 ~379)
      # and batch 8 / 32 (b8 ~7.71 ms with the router's one chunk; b32 15.1 -> ~14.8 ms with the T=32 options)
    run gpu-tests 120 python -m pytest tests/kernels/test_moe.py -k "grouped or grouping or compiles" -q -p no:cacheprovider --tb=short -rf
    run sweep-grouped 120 python benchmarks/sweep_moe.py --shapes "" --grouped 32,64,128,256,4096 --grouped-variants --samples 10
    run bench-moe 170 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    run decode-b8 110 python benchmarks/bench_decode.py --batch 8,32 --rows moelab
    ;;
  AY) # session 11: why bench moe reads ~40 us slower than the grouped sweep at T=32/64 but ~5 us at T=256
      # (sweep_moe.py's diagnostic rows, since removed: int32 ids, the public fused_moe, 4 weight copies, the route
      # kernel inside: 262 -> 268 us at T=32, 301 -> 300 at T=64, 324 at T=256; the same config timed late in the
      # list ran ~10 % slower)
    run sweep-grouped 150 python benchmarks/sweep_moe.py --shapes "" --grouped 32,64,256 --grouped-variants --samples 10
    ;;
  AZ) # session 11: the grouped options and the chunked grouping re-timed in two passes (forward, then reversed), as
      # the drift AY found is larger than the options' effects; then bench moe at T=32..256 once more (its moelab column
      # after the baselines' load)
    run sweep-grouped 300 python benchmarks/sweep_moe.py --shapes "" --grouped 32,256,4096 --grouped-variants --samples 10
    ;;
  BA) # session 11: the record of batches 1, 8 and 32 on one machine with this session's defaults
    run decode 200 python benchmarks/bench_decode.py --batch 1,8,32 --rows moelab
    ;;
  BB) # session 11: is the bench/sweep gap at T=32/64 the chip's state? The SM clock, power and temperature every
      # 250 ms (nvidia-smi, read only) across bench moe at T=32,64 (moelab timed after the HF loop) and the two-pass
      # grouped sweep; then Nsight Compute of the grouped kernels at T=4096 with this session's defaults
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 250 > "$OUT/clocks.csv" 2>&1 &
    SMI=$!
    date +"bench start %T" >> "$LOG"
    run bench-moe 150 python -m moelab bench moe --tokens 32,64 --samples 10 --no-compile
    date +"sweep start %T" >> "$LOG"
    run sweep-grouped 90 python benchmarks/sweep_moe.py --shapes "" --grouped 32,64 --grouped-variants --samples 10
    date +"sweep end %T" >> "$LOG"
    kill $SMI
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
    run ncu 90 bash -c "$NCU --clock-control none -k regex:'_gate_up_kernel|_down_kernel|_sum_k_kernel|_group_' -c 8 --section SpeedOfLight --section Occupancy --section LaunchStats python benchmarks/ncu_kernels.py --only grouped4096 > $OUT/ncu.txt 2>&1"
    ;;
  BC) # session 11: the graph's call count (1 set, as bench moe captures at T >= 8, against 2 and 8) as the cause of
      # the bench/sweep gap at T=32/64; predicted: if it is, 1 set reads ~30 us slower than 8 at every T
    run probe-sets 150 python benchmarks/probe_sets.py --tokens 8,32,64,256 --sets 1,2,8
    ;;
  BD) # session 11: the grouped path's new defaults at every real shape in bf16 (T=64, 256 and 1024: the prefill tiles
      # and the chunked grouping), and the engine's bf16 parity with transformers (its prefill runs the grouped path)
    IDS=()
    for shp in 128-2048-768-8-0 256-2048-512-8-512 256-2048-128-8-0 32-2880-2880-4-0 64-2048-1408-6-0 60-2048-1408-4-0; do
      for t in 64 256 1024; do IDS+=("tests/kernels/test_moe.py::test_gpu_bf16_real_shapes[$shp-$t]"); done
    done
    run gpu-tests 120 python -m pytest "${IDS[@]}" -q -p no:cacheprovider --tb=short -rf
    run gpu-tests-engine 90 python -m pytest tests/engine/test_parity.py -q -p no:cacheprovider --tb=short -rf
    ;;
  BE) # for session 12: WIDE (prepared in session 11, unmeasured): gate and up as one interleaved [64, 256] operand of
      # one dot, so each x tile is read from shared memory once per K chunk, not twice (254 registers, no spill, the
      # same 147 KB of shared memory as the shipped form's 176-211; sm_90, Triton 3.6). Gate/up is 457 of the 764 us
      # at T=4096: predicted 0 to -10 % of it (the shipped form has its weights by TMA, WIDE by pointers: TMA alone
      # was worth 2.7 %). Its bf16 test first, then the two-pass sweep (the WIDE row against the default)
    run gpu-tests 90 python -m pytest tests/kernels/test_moe.py -k "grouped_variants" -q -p no:cacheprovider --tb=short -rf
    run sweep-grouped 240 python benchmarks/sweep_moe.py --shapes "" --grouped 256,4096 --grouped-variants --samples 10
    ;;
  BF) # session 12. BE: WIDE won at T=4096 (769 -> 747 us, pointer weights), DOWN 256-column tiles too (769 -> 763);
      # both are the T>=1024 default now, WIDE's weights by TMA (one [2, 128, 64] box; 176 registers against the
      # pointer form's 254). New: the loop form, TAIL (small tiles for each expert's remainder: ~20 % of the 128-row
      # tiles' MMA rows are padding at T=4096, ~75 % of the 64-row ones at T=256) and PERSIST (programs per SM
      # walking the tiles; no surplus programs). Predicted at T=4096: WIDE by TMA -5..-15 us, TAIL=32 -3..-7 %,
      # PERSIST 0..-2 %; at T=256 TAIL=16 -5..-15 %. bf16 tests first, then the sweep; the MoE bench at T=256/4096.
    run gpu-tests 150 python -m pytest tests/kernels/test_moe.py -q -p no:cacheprovider --tb=short -rf \
      -k "grouped_loop_form_bf16 or grouped_variants or (gpu_bf16_real_shapes and 1024)"
    run sweep-loop 240 python benchmarks/sweep_moe.py --shapes "" --grouped 256,1024,4096 --loop-variants --samples 10
    ;;  # (ran at 735cdf7: the loop form lost everywhere and is gone, with --loop-variants; docs/worklog.md)
  BG) # session 12: the record with WIDE by TMA and the 256-column down tiles as the T>=1024 default. BF's tests ran
      # out of time (22 passed, none failed): the bf16 ones again with more time; the grouped variants at T=4096 (K
      # chunks of 128 on 2 stages added); bench moe for Qwen3-30B-A3B at every T and for Qwen3.5 (tp 1 and the tp=4
      # shard, last measured in session 2).
    run gpu-tests 220 python -m pytest tests/kernels/test_moe.py -q -p no:cacheprovider --tb=short -rf \
      -k "grouped_variants or (gpu_bf16_real_shapes and 1024)"
    run sweep-grouped 90 python benchmarks/sweep_moe.py --shapes "" --grouped 4096 --grouped-variants --samples 10
    run bench-moe 120 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    run bench-moe-35 80 python -m moelab bench moe --model qwen3.5-35b-a3b --tokens 1,2,4,8,16 --samples 10 --save
    run bench-moe-35tp 80 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --tokens 1,2,4,8 --samples 10 --save
    ;;  # (ran at 284ac42: BLOCK_K2=128 alone 12.79 -> 12.40 us, the 4 x 1024 / 64-output tiles 10.01; adopted at T=1 after it)
  BH) # session 13: the pair kernel's weight tiles by TMA (MOELAB_PAIRS_TMA). Triton 3.6 software-pipelines
      # descriptor loads that feed a reduction (pointer loads it does not): 64 registers and a ring of STAGES - 1 chunks
      # in shared memory per program, against 239 registers and one chunk in registers (2 programs per SM). Predicted:
      # Qwen3-30B-A3B T=1 kernel ~24 -> 21-23 us; batch 1 2.41 -> 2.30-2.37 ms. bf16 tests, the sweep, the chain A/B.
    run gpu-tests 120 python -m pytest tests/kernels/test_moe.py -q -p no:cacheprovider --tb=short -rf \
      -k "pairs_by_tensor_descriptor"
    run sweep-pairs-tma 240 python benchmarks/sweep_moe.py --mode pairs --pairs-tma --shapes qwen3,shard --tokens 1,2,4 --samples 10
    run ab-b1 200 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,tma=MOELAB_PAIRS_TMA
    ;;  # (ran at 1cae037: TMA lost everywhere, T=1 27.2 against 25.3 us, batch 1 2.62 against 2.41 ms; removed)
  BI) # session 13. BH: the pair kernel's TMA form lost (T=1 27.2 against 25.3 us; batch 1 2.62 against 2.41 ms).
      # Before building a persistent pair kernel: does a flattened, persistent TMA GEMV stream 50 MB faster than the
      # pointer form or per-program TMA? Predicted: pointer ~70-75 % of the read ceiling, per-program TMA no better,
      # persistent TMA 85-90 %.
    run probe-gemv 200 python benchmarks/probe_gemv.py --samples 15
    ;;  # (ran at d528438 with --rows 12288, then 6144, 24576 and 49152 by hand: probe-gemv-…T144226/44243/44249/44254)
  BJ) # session 13. BI: every form of one kernel streaming 50 MB (pointer, TMA, persistent TMA, cuBLAS) reached at most 75 %
      # of the read ceiling, 100 MB 87 %, 200 MB 91 %: ~2.8 us of ramp and drain per kernel. The pair kernel streams
      # 50 MB (gate/up) then 25 MB (w2) after it. MOELAB_PAIRS_L2: phase 1 asks L2 for w2 (bulk prefetch), so DRAM
      # streams 75 MB in one go and phase 2 reads L2. Predicted T=1 25.3 -> 22-23 us, batch 1 2.41 -> 2.29-2.33 ms.
    run gpu-tests 150 python -m pytest tests/kernels/test_moe.py -q -p no:cacheprovider --tb=short -rf \
      -k "l2_prefetch or (gpu_bf16_real_shapes and (-1] or -2]))"
    run sweep-l2 200 python benchmarks/sweep_moe.py --mode pairs --l2 0,1,2 --shapes qwen3,qwen35,shard --tokens 1,2,4 --samples 15
    run ab-b1 200 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,l2s=MOELAB_PAIRS_L2:1,l2e=MOELAB_PAIRS_L2:2
    ;;  # (ran at 0ef2ded: a tie at T=1, 24.8 against 24.7 us, losses at T=2..4 and at batch 1, 2.53 and 2.60 against
        # 2.42 ms; removed)
  BK) # session 13: one kernel streaming 25-200 MB, the read-ceiling kernel itself among the forms: the practical floor
      # of a T=1 MoE layer (75.5 MB, Qwen3-30B-A3B) as one stream
    run probe-gemv 200 python benchmarks/probe_gemv.py --rows 6144,12288,18432,24576,49152 --quick --samples 15
    ;;
  BL) # session 13: where a MoE layer's time goes at each T, kernel by kernel (the bench's setup, graph-replayed)
    run trace-moe 200 python benchmarks/trace_moe.py --tokens 1,8,32,64,256,1024,4096
    ;;
  BM) # session 13. BL (trace_moe): at T=32 the layer's kernels span 264 us, where bench moe recorded ~300. bench moe
      # timed one call per CUDA graph from T=8 up (one rotation set is enough against L2 there), so every call paid a
      # graph launch and repeated one routing. Now at least 8 calls per graph (--min-sets). The old harness first, at
      # T=8/32/64 (no compile), then the records. Predicted T=32 300 -> ~265 us, T=8..256 +2..10 points of the floor.
    run bench-moe-1set 90 python -m moelab bench moe --tokens 8,32,64 --samples 10 --min-sets 1 --no-compile
    run bench-moe 240 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    run bench-moe-35 110 python -m moelab bench moe --model qwen3.5-35b-a3b --tokens 1,2,4,8,16 --samples 10 --save
    run bench-moe-35tp 110 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --tokens 1,2,4,8 --samples 10 --save
    ;;
  BN) # session 13. BL: at T=256 the down GEMM streams w2 at 82 % of the read ceiling (gate/up 90 %) and the chunked
      # grouping's three launches take 10.6 us (the one-launch sort 3.6 at T=64). The grouped variants at T=64/256 with
      # the down GEMM's own tiles and the sort in one launch up to 2048/4096 pairs. Predicted T=256 down -5..-11 us,
      # the sort -5 us; T=64 nothing from the sort (already one launch).
    run gpu-tests 60 python -m pytest tests/kernels/test_moe.py -q -p no:cacheprovider --tb=short -rf -k "one_launch_sort"
    run sweep-grouped 300 python benchmarks/sweep_moe.py --shapes "" --grouped 64,256 --grouped-variants --samples 10
    ;;  # (ran at a828a66; the one-launch sort's variant lost and is gone from the sweep)
  BO) # session 13. BN: at T=256 32-row tiles 313 against 318 us (adopted for 8·E < P <= 16·E); the down GEMM's own
      # tiles tied, the one-launch sort at 2048 pairs lost (325). bf16 tests at T=256 (Qwen3-30B-A3B takes the new
      # tiles), then the MoE bench's record on the shipped code.
    run gpu-tests 100 python -m pytest tests/kernels/test_moe.py -q -p no:cacheprovider --tb=short -rf \
      -k "gpu_bf16_real_shapes and -256]"
    run bench-moe 150 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    # Where one call per graph loses its ~38 us at T=32/64 (BM): the GPU idle between replays, or slower kernels?
    run trace-1call 60 python benchmarks/trace_moe.py --tokens 32,64 --calls 1 --no-save
    ;;
  BP) # session 13: why one call per graph timed ~40 us slower at T=32 (BM) while the profiler saw the same kernels (BO).
      # Hypothesis: timing.measure's sample starts from a synchronised, idle GPU, and a 300 us call is above its 200 us
      # minimum sample, so each sample is ONE replay and carries the host's graph-launch latency; T=8 (126 us) takes two
      # replays per sample and hides it. Predicted: one synchronised replay ~305, back to back ~262.
    run probe-graph-calls 120 python benchmarks/probe_graph_calls.py --tokens 8,32 --samples 15
    ;;
  BQ) # session 14: stage BP's probe on the fixed timer (graph samples now start behind one untimed replay, so the
      # GPU is busy when the start event fires). Predicted: "one synchronised replay" ~305 us at T=32 (the old reading),
      # timing.measure at 1, 2 and 8 calls per graph all within ~2 % of the back-to-back replays (~262-271). Then the
      # MoE bench's record on the fixed timer: T=1 -0.3..-0.6 us (a graph of 8 calls, one replay per sample), T=32..4096
      # the launch latency / 8 calls less per call.
    run hw 90 python -m moelab hw --save
    run probe-graph-calls 120 python benchmarks/probe_graph_calls.py --tokens 8,32 --samples 15
    run bench-moe 240 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    # The census grid with the empty slots' programs last (COMPACT, new default) against the old order, alone.
    # Predicted T=16 -1..-3 us (37 % of its programs are on empty slots), T=8 -0.5..-1.5. (Ran at 72fff66: a tie at
    # T=8 and 16, both shapes; COMPACT and --compact removed after it, sweep-moe-census-compact-…T1759.)
    run sweep-compact 90 python benchmarks/sweep_moe.py --mode decode --shapes qwen3,qwen35 --tokens 8,16 --compact --samples 10
    ;;
  BR) # session 14: the tensor-core linear's whole-slice form in the chain (dot_config(whole_k=True): each split one
      # 64 x 256 chunk requested before gdc_wait; qkv 80 x 8, o 32 x 16; 144 registers, 3 programs per SM, so ~12.7 MB
      # of qkv's 21 requested before the wait, against 5.3 MB for the pipelined loop's peeled 8 KB chunks). Predicted:
      # batch 8 -0.1..-0.25 ms per token (qkv 8.5 and o 8.2 us a layer in the trace, floors 4.5 and 3.6); 16 KB chunks
      # (5 programs per SM, 10.6 MB before the wait) about the same. Batch 1 runs the GEMV: untouched.
    run gpu-tests 150 python -m pytest tests/kernels/test_linear.py tests/engine/test_parity.py tests/engine/test_generate.py -q -p no:cacheprovider --tb=short -rf
    run ab-b8 240 python benchmarks/ab_chain.py --batch 8 --rounds 3 --variants base,kb16=MOELAB_DOT_WHOLE_KB:16,loop=MOELAB_DOT_WHOLE_K:0
    run trace-b8 100 python benchmarks/trace_decode.py --batch 8 --ctx 1024
    ;;
  BS) # session 14. BR: the whole-slice form won at batch 8 (7.71 -> 7.63 ms, -1.0 %; 16 KB chunks 7.71), adopted; its GPU
      # tests hit BR's 150 s limit with nothing failed. The tests again, then the records on the shipped code: decode at
      # batches 1, 8 and 32, and the batch-1 profile (its README table was from session 5's code).
    run gpu-tests-linear 90 python -m pytest tests/kernels/test_linear.py -q -p no:cacheprovider --tb=short -rf -k gpu
    run gpu-tests-engine 120 python -m pytest tests/engine/test_parity.py tests/engine/test_generate.py -q -p no:cacheprovider --tb=short -rf -k "gpu or graph or bf16"
    run decode 130 python benchmarks/bench_decode.py --batch 1,8,32 --rows moelab
    run profile 220 python -m moelab profile qwen3-30b-a3b --batch 1 --ctx 1024 --samples 15 --impl eager,compile,moelab --save
    ;;
  BT) # session 14. BS: tests pass; batch 8 7.51 ms, 76.2 % of its floor (batch 1 55.4, batch 32 78.9). The records whose
      # README tables were older than this session's code: the MoE bench (Qwen3-30B-A3B on the shipped code; BQ's ran
      # with the census COMPACT order, a tie, since removed), Qwen3.5 tp1 and the tp=4 shard, and the tp=4 profile.
    run hw 90 python -m moelab hw --save
    run bench-moe 150 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    run bench-moe-35 110 python -m moelab bench moe --model qwen3.5-35b-a3b --tokens 1,2,4,8,16 --samples 10 --save
    run bench-moe-35tp 110 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --tokens 1,2,4,8 --samples 10 --save
    run profile-tp4 120 python -m moelab profile qwen3.5-35b-a3b --tp 4 --ctx 1024 --samples 10 --impl eager,moelab --save
    ;;
  BU) # session 14: a second machine start for BS's decode records (batch 8 read 76.2 % on a start whose measured read
      # bandwidth was 1.7 % below the last record's); attention on the session's timer; the batch-1 step traced.
    run decode 130 python benchmarks/bench_decode.py --batch 1,8,32 --rows moelab
    run attention 150 python benchmarks/bench_attention.py --no-compile --samples 15
    run trace-b1 80 python benchmarks/trace_decode.py --batch 1 --ctx 1024
    ;;
  BV) # session 14: the pair kernel at narrow experts (the tp=4 shard, I=128, with Qwen3.5's shared expert and without).
      # The default phase-2 chunk of 256 columns is half masked at I=128 and sets the registers (239: 2 programs per
      # SM); pairs_config now takes next_pow2(I) = 128 there (the sweep times 256 beside it), and the sweep tries phase 1
      # in one chunk of all H. Predicted the shard -2..-4 us. Then the tp=4 bench on the new default.
    run sweep-narrow 150 python benchmarks/sweep_moe.py --mode pairs --shapes shard35,shard --tokens 1 --narrow --samples 10
    run bench-moe-35tp 80 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --tokens 1,2,4,8 --samples 10 --save
    ;;  # (ran at 284ac42: BLOCK_K2=128 alone 12.79 -> 12.40 us, the 4 x 1024 / 64-output tiles 10.01; adopted at T=1 after it)
  BW) # session 15: the tp=4 bench on BV's narrow tiles (predicted T=1 ~13.7 us with routing); pairs (new tiles) against
      # moe_t1 at the shard without a shared expert, routing counted; the narrow tiles at T=2, 4; a second attention
      # record on the new timer; the batch-1 and batch-8 steps traced with the chain and with MOELAB_PDL=0 (every kernel
      # after the previous one ends: each kernel's own time in the real step, to split the attention split kernel's
      # 9.5 us a layer in the chain into its own work and what the chain adds).
    run hw 90 python -m moelab hw --save
    run bench-moe-35tp 80 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --tokens 1,2,4,8 --samples 10 --save
    run sweep-block-shard 80 python benchmarks/sweep_moe.py --mode block --shapes shard --tokens 1 --samples 10
    run sweep-narrow-t24 100 python benchmarks/sweep_moe.py --mode pairs --shapes shard35 --tokens 2,4 --narrow --samples 10
    run attention 60 python benchmarks/bench_attention.py --no-compile --samples 15
    run trace-b1 60 python benchmarks/trace_decode.py --batch 1 --ctx 1024
    run trace-b1-nopdl 60 env MOELAB_PDL=0 python benchmarks/trace_decode.py --batch 1 --ctx 1024
    run trace-b8 60 python benchmarks/trace_decode.py --batch 8 --ctx 1024
    run trace-b8-nopdl 60 env MOELAB_PDL=0 python benchmarks/trace_decode.py --batch 8 --ctx 1024
    ;;
  BX) # session 15. BW: without PDL the split kernel takes 5.5 us of its own in the batch-1 step, in the chain it advances
      # it by 9.7 (the o projection's 16.8 MB, released by the combine while the split still runs, streams under it;
      # qkv's 640 resident programs keep the split off the SMs until they exit). A/B in the chain at batch 1: the split
      # not releasing the combine early (ATTN_TRIGGER:0; predicted split -3, combine +1, o +2 us: net 0..-1 us a layer),
      # the combine releasing o only after its partials are read (COMBINE_TRIGGER:2; predicted -0.3..-0.5 us a layer),
      # the GEMVs without their whole slice before the wait (WHOLE_K_MAX_T:0; session 6's +35 us a step expected).
      # Then the batch-1 and batch-8 steps traced at the decode bench's context (256), where #5's targets are read.
    run ab-b1 300 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,at0=MOELAB_ATTN_TRIGGER:0,ct2=MOELAB_COMBINE_TRIGGER:2,wk0=MOELAB_WHOLE_K_MAX_T:0
    run trace-b1-256 60 python benchmarks/trace_decode.py --batch 1 --ctx 256
    run trace-b8-256 60 python benchmarks/trace_decode.py --batch 8 --ctx 256
    # BW also measured the pair kernel beating moe_t1 at the shard without a shared expert (13.0 against 15.7 us with
    # routing: moe_t1 removed) and 64-output tiles winning at T=2, 4 (adopted for I <= 128). Their GPU tests and the
    # tp=4 bench on them (predicted T=2 21.5 -> ~18.5 us, T=4 26.8 -> ~23).
    run gpu-tests-moe 150 python -m pytest tests/kernels/test_moe.py -q -p no:cacheprovider --tb=short -rf -k "gpu or bf16"
    run bench-moe-35tp 80 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --tokens 1,2,4,8 --samples 10 --save
    ;;
  BY) # session 15. BX: no attention trigger variant won at batch 1 (base 2.42, ATTN_TRIGGER:0 2.43, COMBINE_TRIGGER:2
      # 2.44, WHOLE_K_MAX_T:0 2.53 ms; removed). tp=4 T=2 17.6 us, T=4 23.5 on the new tiles. At batch 8 and the bench's
      # context (256) the attention split advances the step 5.6 us a layer and the combine 4.6 (7 splits of one 64-key
      # tile, 224 programs, then 256 combine programs). Fewer splits at batch 8: predicted 1 split (no combine launch,
      # 32 programs of 2-6 tiles) -2 us a layer, -0.1 ms per token; 2 splits -0.6 us a layer.
    run ab-b8 300 python benchmarks/ab_chain.py --batch 8 --rounds 3 --variants base,s1=MOELAB_ATTN_SPLITS:1,s1n128=MOELAB_ATTN_SPLITS:1+MOELAB_ATTN_BLOCK_N:128,s2=MOELAB_ATTN_SPLITS:2,s4=MOELAB_ATTN_SPLITS:4
    ;;
  BZ) # session 15. BY: one split of 128-key tiles at batch 8 won, 7.66 -> 7.57 ms per token (predicted -0.1 ms), adopted
      # for B*Hk >= 32 at hints <= 512. Its GPU tests, the decode records at batches 1, 8 and 32, the batch-8 step traced.
    run gpu-tests-attn 120 python -m pytest tests/kernels/test_attention.py -q -p no:cacheprovider --tb=short -rf -k "gpu or graph or bf16"
    run gpu-tests-engine 120 python -m pytest tests/engine/test_parity.py tests/engine/test_generate.py -q -p no:cacheprovider --tb=short -rf -k "gpu or graph or bf16"
    run decode 130 python benchmarks/bench_decode.py --batch 1,8,32 --rows moelab
    run trace-b8-256 60 python benchmarks/trace_decode.py --batch 8 --ctx 256
    ;;
  CA) # session 15. BZ: batch 8 7.40 ms, 75.7 % of its floor (batch 1 54.4, batch 32 80.1); GPU tests pass. The pair
      # kernel's narrow-tile grid at the wide shapes (Qwen3-30B-A3B I=768, Qwen3.5 I=512), T=1, 2, 4: the 64-output
      # phase-2 blocks that won at the shard were never timed there (the T=1 sweeps tried 8-32). Predicted: T=1 a tie
      # (the chain A/B of 64 x 128 lost in session 6), T=2/4 -5..-15 % if the shard's pattern carries.
    run sweep-pairs-wide 240 python benchmarks/sweep_moe.py --mode pairs --shapes qwen3,qwen35 --tokens 1,2,4 --narrow --samples 10
    ;;
  CB) # session 15. CA: the 64-output tiles at the wide shapes tie (Qwen3-30B-A3B T=1 23.5 default best, T=2 40.3 vs 40.4,
      # T=4 73.1 vs 73.7; Qwen3.5 T=1 20.0 vs 20.2-21.6, T=4 55.5 vs 56.9): not adopted. At batch 8 the one-split
      # attention now runs 32 programs (32 of 132 SMs) for 10.6 us a layer: 8 warps per program (predicted -1..-2 us a
      # layer, -0.05..-0.1 ms per token), or 2 splits of 128-key tiles (64 programs + the combine; predicted a tie).
    run ab-b8 240 python benchmarks/ab_chain.py --batch 8 --rounds 3 --variants base,w8=MOELAB_ATTN_WARPS:8,sp2=MOELAB_ATTN_SPLITS:2+MOELAB_ATTN_BLOCK_N:128
    ;;
  CC) # session 15: a second machine start for BZ's decode records (batch 8 read 75.7 %), and the tp=4 profile on the
      # shard's narrow pair tiles (its record, profile-qwen3.5-…T181912, predates them).
    run decode 130 python benchmarks/bench_decode.py --batch 1,8,32 --rows moelab
    run profile-tp4 120 python -m moelab profile qwen3.5-35b-a3b --tp 4 --ctx 1024 --samples 10 --impl eager,moelab --save
    ;;
  CD) # session 16, measure first: per-program timelines (%globaltimer) of the attention split + combine at the
      # issue-4 shapes and of the pair kernel at T=1, 2, 4: where the fixed ~7 µs of attention and the pair kernel's
      # ~3.5 µs over one read stream go. The kernels' GPU tests first (the probe arguments are new).
    run gpu-tests 150 python -m pytest tests/kernels/test_attention.py tests/kernels/test_moe.py -k "attention or split or pairs" -q -p no:cacheprovider --tb=short -rf
    run probe 240 python benchmarks/probe_timeline.py --attention 1x1024,1x16384,1x65536,8x16384 --moe 1,2,4 --calls 8
    ;;
  CE) # session 16, from CD's timelines: (1) the combine's partials loaded with its log-sum-exps (one L2 round trip
      # after the PDL wait, not three in a row; MOELAB_COMBINE_EARLY_O=0 is the old order), probed both ways; (2) phase-2
      # tiles holding a program's whole w2 slice before its wait (CD: T=1 phase 2 streams at ~2 TB/s, two serial
      # chunks after the wait), alone at Qwen3 / Qwen3.5 T=1, 2, probed, and in the batch-1 chain (MOELAB_PAIRS_P2).
    run gpu-tests 100 python -m pytest tests/kernels/test_attention.py -q -p no:cacheprovider --tb=short -rf
    run probe-new 90 python benchmarks/probe_timeline.py --attention 1x1024,1x16384,1x65536,8x16384 --moe ''
    run probe-old 90 env MOELAB_COMBINE_EARLY_O=0 python benchmarks/probe_timeline.py --attention 1x1024,1x16384,1x65536,8x16384 --moe ''
    run sweep-whole2 200 python benchmarks/sweep_moe.py --mode pairs --whole2 --shapes qwen3,qwen35 --tokens 1,2 --samples 10
    run probe-p2 60 env MOELAB_PAIRS_P2=8x1024 python benchmarks/probe_timeline.py --attention '' --moe 1
    run ab-b1 150 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,co0=MOELAB_COMBINE_EARLY_O:0,h8=MOELAB_PAIRS_P2:8x1024,h16=MOELAB_PAIRS_P2:16x1024
    ;;
  CF) # session 16: the records on the combine's early loads: attention (issue 4's lines), its GPU tests, the probe;
      # and long shares split exactly, not in whole tiles (16k over 33 splits: 33 chunks of 497 keys, not 32 of 512;
      # predicted 16k -0.3, 64k -1 us, B=8 16k 0: its 4 splits divide 16k), probed against MOELAB_ATTN_CHUNK_TILES=1
    run gpu-tests 100 python -m pytest tests/kernels/test_attention.py tests/engine -k "attention or match_transformers or graph" -q -p no:cacheprovider --tb=short -rf
    run probe 60 python benchmarks/probe_timeline.py --attention 1x1024,1x16384,1x65536,8x16384 --moe 1
    run probe-tiles 60 env MOELAB_ATTN_CHUNK_TILES=1 python benchmarks/probe_timeline.py --attention 1x16384,1x65536 --moe ''
    run bench-attention 240 python benchmarks/bench_attention.py
    ;;
  CG) # session 16: the records on the final code (CF's bench-attention ran the exact shares, since removed)
    run bench-attention 120 python benchmarks/bench_attention.py
    run decode 130 python benchmarks/bench_decode.py --batch 1,8,32 --rows moelab
    ;;
  CH) # session 16: a second machine start for CG's attention record (16k met by 0.1 µs), and the split kernel's warps
      # and pipeline depth at the long shapes (swept only at 1k before, stage AR): leads for the 64k / B=8 16k lines
    run bench-attention 100 python benchmarks/bench_attention.py
    run sweep-long 200 python benchmarks/bench_attention.py --shapes 1x16384,1x65536,8x16384 --no-compile --sweep --warps 4,8 --stages 2,3,4 --samples 15
    ;;
  CI) # session 17: the prefill GEMMs' tail launches (cfg TAIL: each expert's remainder of <= 64 rows in 64-row tiles
      # of a second launch): bf16 tests, then the default against TAIL variants at T=256/1024/4096 (two passes).
      # Predicted T=4096 -40..-55 us (computed MMA rows 1.24 -> 1.12 x the pairs), T=1024 more (64 pairs an expert).
      # Lost at every T (734 -> 804+ us at 4096): TAIL and --tail are gone (code in 3dd96ea).
    run gpu-tests 150 python -m pytest tests/kernels/test_moe.py -k "tail or grouped_variants or compiles" -q -p no:cacheprovider --tb=short -rf
    run sweep-tail 240 python benchmarks/sweep_moe.py --shapes '' --grouped 256,1024,4096 --tail --samples 10
    ;;
  CJ) # session 17: the split kernel merging its own splits (2-4 splits: B=8-16 at long context), no combine launch.
      # CH's B=8 16k probe: the combine's release + tail ~3.25 us of ~66. Predicted B=8 16k -1.5..-2 us (86.9 -> ~89-90 %).
    run gpu-tests 150 python -m pytest tests/kernels/test_attention.py tests/kernels/test_chain.py tests/engine -k "attention or merge or match_transformers or graph" -q -p no:cacheprovider --tb=short -rf
    run bench-merge 150 python benchmarks/bench_attention.py --shapes 8x16384,8x4096,16x4096,1x16384 --no-compile --merge
    run probe 60 python benchmarks/probe_timeline.py --attention 8x16384,1x16384 --moe ''
    run bench-attention 120 python benchmarks/bench_attention.py
    ;;
  CK) # session 17: at batch 1 the chain's attention runs 7 splits of 64 keys and a combine (~2.4 us a layer in the
      # trace); merged by the split kernel instead (MOELAB_ATTN_MERGE_MAX=8). Predicted -0.5..-1.5 us a layer
      # (-25..-70 us a step of 2.40 ms). The GPU tests of the merge first (bf16 parity and graphs in the engine).
      # Lost (2.41 -> 2.45 ms, ab-chain-...T130023): MOELAB_ATTN_MERGE_MAX is gone.
    run gpu-tests 120 python -m pytest tests/kernels/test_attention.py tests/kernels/test_chain.py -q -p no:cacheprovider --tb=short -rf
    run ab-b1 240 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,m8=MOELAB_ATTN_MERGE_MAX:8
    run gpu-tests-engine 120 env MOELAB_ATTN_MERGE_MAX=8 python -m pytest tests/engine/test_parity.py tests/engine/test_generate.py -q -p no:cacheprovider --tb=short -rf -k "gpu or graph or bf16"
    ;;
  CL) # session 18: the grouped path (T >= 32) PDL-launched: gate/up, down and sum each released by the kernel before
      # it, the down GEMM's first w2 chunk before its wait. Predicted T=32..256 -2..-5 us a layer (the launch gaps and
      # the down GEMM's first wave under gate/up's tail), T=4096 within noise; batch 32 -0.1..-0.2 ms per token.
      # Tied (T=32 260.4 both, 64 293.8 against 295.2, 256 318.2 / 317.9, 4096 noise; batch 32 14.8 ms both,
      # ab-chain-...T135547): the PDL code, cfg PDL, MOELAB_GROUPED_PDL and --grouped-pdl are gone (code in 55d9020).
    run gpu-tests 200 python -m pytest tests/kernels/test_moe.py -k "pdl or grouped_variants or (real_shapes and (64 or 256 or 1024))" -q -p no:cacheprovider --tb=short -rf
    run sweep-pdl 200 python benchmarks/sweep_moe.py --shapes '' --grouped 32,64,256,4096 --grouped-pdl --samples 15
    run ab-b32 150 python benchmarks/ab_chain.py --batch 32 --rounds 3 --new-tokens 64 --variants base,nopdl=MOELAB_GROUPED_PDL:0
    ;;
  CM) # session 18: each grouped-path GEMM alone, moelab's Triton kernels against torch._grouped_mm (CUTLASS: ragged
      # groups, no padding rows) at T=256/1024/4096: whether the library would take either GEMM faster (trace_moe:
      # at T=4096 gate/up 425 us, down 250; the down GEMM ~65 % of the bf16 rate on the rows it computes)
    run probe-grouped-mm 200 python benchmarks/probe_grouped_mm.py --tokens 256,1024,4096
    ;;
  CN) # session 18: reserved tiles in the attention split kernel (decode_attention reserve=R: the last R tiles of each
      # sequence and KV head taken at run time by whichever of its programs finishes first; each tile its own partial
      # slot, so bitwise deterministic). The timelines: B=8 16k durations p50 62.5 / max 65.75 us, 64k 31.5 / 34.
      # Predicted B=8 16k R=4 -1..-2 us (66.3 -> ~65: 90 %), 64k R=16..33 -0.5..-1.5, 16k a tie or worse.
      # Lost at every R and shape (B=8 16k 66.8 -> 69.4 at R=1, 70.0 at R=4; 64k 38.1 -> 38.6-38.9; 16k 13.8 -> 14.5;
      # sweep-attention-reserve-...T140610): reserve is gone (code in 606d4d0).
    run gpu-tests 150 python -m pytest tests/kernels/test_attention.py tests/kernels/test_chain.py -q -p no:cacheprovider --tb=short -rf
    run bench-reserve 300 python benchmarks/bench_attention.py --shapes 8x16384,1x65536,1x16384 --no-compile --reserve 1,2,4,8,16,33
    ;;
  CO) # session 18: what a kernel that only reads attention's bytes reaches (the read-ceiling kernel and the pointer
      # GEMV over 33.5 / 134 / 268 MB: the K and V of B=1 16k, 64k and B=8 16k): the ceiling of the 85 % / 90 % lines
    run probe-stream 200 python benchmarks/probe_gemv.py --rows 8192,32768,65536 --quick
    ;;
  CP) # session 18: CO put a pure read of 134 / 268 MB at 90.5 / 94.3 % of the floor, the split kernel at 75.5 / 86.5:
      # its steady stream (64k -> 128k: 4.33 TB/s) is ~6 % below the read kernel's (4.59). Two DRAM streams per
      # program (K and V in two tensors) against one: the same kernel on K and V interleaved per position (strided
      # views). Predicted, if the access pattern is the cause: 64k -1..-2 us, B=8 16k -2..-3.5; else a tie.
      # A tie at every shape (B=8 16k 67.64 / 67.68 interleaved, 64k 38.15 / 38.04, 16k, 128k within 0.3 us;
      # bench-attention-...T141152): the access pattern is not it; --kv-interleaved is gone (code in 03f0a23).
    run bench-kvi 200 python benchmarks/bench_attention.py --shapes 8x16384,1x65536,1x16384,1x131072 --no-compile --kv-interleaved
    ;;
  CQ) # session 18: Nsight Compute on the split kernel at B=8 16k and 64k beside the read-ceiling kernel: why its steady
      # stream runs ~6 % below a pure read's (CO, CP: neither the tail, the SM count nor the K/V layout explain it)
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
    run ncu 240 bash -c "$NCU --clock-control none -k regex:'_split_kernel|_combine_kernel|_stream_read_kernel' -c 12 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum python benchmarks/ncu_kernels.py --only attn8x16k,attn64k,read > $OUT/ncu.txt 2>&1"
    grep -E "_split_kernel|_combine_kernel|_stream_read|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Stall|Warp Cycles Per Issued|Issued Warp|L2 Hit|Mem Busy|Max Bandwidth|dram__|lts__" $OUT/ncu.txt | head -n 150 >> "$LOG"
    ;;
  CR) # session 18: CQ's ncu: the split kernel at B=8 16k 84-86 % of DRAM peak (read kernel 97 %) with one 4-warp
      # program per SM and 1.00 active warp per scheduler. More K/V in flight per SM: 64-key tiles on 4-7 stages.
      # Predicted: a lead if DRAM throughput follows the bytes requested ahead (B=8 16k -1..-3 us), else a tie.
      # Lost: B=8 16k 67.5 us shipped against 77.1-78.0 on 64-key tiles at every depth; 64k 38.2 against 38.2 (4
      # stages) to 40.2 (probe-attn-depth-...T141721). The bytes ahead are not the limit; per-tile work is.
    run probe-depth 200 python benchmarks/probe_attn_depth.py --shapes 8x16384,1x65536 --stages 3,4,5,6,7
    ;;
  CS) # session 18: the split kernel's K/V tiles by tensor descriptors made in the kernel over [start, kv_end) (TMA
      # zero-fills past kv_end), MOELAB_ATTN_TMA. sm_90 (Triton 3.9): the 128-key loop 527 -> 353 PTX instructions per
      # thread (no cp.async address arithmetic), 179 -> 128 registers. CQ/CR say the per-tile work bounds it.
      # Predicted B=8 16k -2..-5 us, 64k -1..-3, 16k -0.5..-1 (the descriptors' making and fence at the start).
      # Lost everywhere by a fixed ~1.4 us (B=8 16k 67.35 -> 68.68, 64k 38.02 -> 39.65, 16k 13.83 -> 15.20, 128k
      # 68.78 -> 70.33; probe-attn-depth-...T143505), the stream rate unchanged (64k -> 128k 30.8 against 30.7 us):
      # a third fewer loop instructions bought nothing, so the per-tile issue is not the limit either. Removed (code
      # in 35bf64e; its fp32 test needed 335 KB of shared memory on the GPU).
    run gpu-tests 150 python -m pytest tests/kernels/test_attention.py -q -p no:cacheprovider --tb=short -rf
    run probe-tma 200 python benchmarks/probe_attn_depth.py --shapes 8x16384,1x65536,1x16384,1x131072 --tma
    ;;
  CT) # session 19: the pair kernel's phase 2 waiting per 256-row chunk of its slot (MOELAB_PAIRS_CHUNK), phase 1 in
      # row-block-major order (MOELAB_PAIRS_IB), and both. Session 16's timeline: ~4.5 us from the last slot's
      # readiness to the kernel's end. Predicted T=1 -1.5..-2.5 us alone, batch 1 -0.03..-0.08 ms per token.
      # Lost everywhere (sweep-moe-pairs-chunk-...T1743: Qwen3 T=1 24.4 -> 25.7, T=2 40.5 -> 42.3, T=4 74.5 -> 76.3;
      # Qwen3.5 T=1 20.8 -> 22.8; block-major worse still; the shard a tie), batch 1 2.42 -> 2.54 ms (ab-chain-...T174456).
      # Probed: the last slot's phase 1 ended later (17.25 -> 18.75 us), as every earlier phase-2 read did (CE's
      # whole slices). The switches are gone (code in db25593).
    run gpu-tests 90 python -m pytest tests/kernels/test_moe.py -k "chunk_wait or pairs" -q -p no:cacheprovider --tb=short -rf
    run sweep-chunk 200 python benchmarks/sweep_moe.py --mode pairs --chunk --shapes qwen3,qwen35,shard35 --tokens 1,2,4 --samples 10
    run probe 45 python benchmarks/probe_timeline.py --attention '' --moe 1
    run probe-chunk 45 env MOELAB_PAIRS_CHUNK=1 python benchmarks/probe_timeline.py --attention '' --moe 1
    run ab-b1 190 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,ch=MOELAB_PAIRS_CHUNK:1,both=MOELAB_PAIRS_CHUNK:1+MOELAB_PAIRS_IB:1
    ;;
  CU) # session 19: the route kernel releasing the PDL-launched experts' kernel as it starts (MOELAB_ROUTE_TRIGGER; the
      # engine's fused router already does), route + experts graph-replayed both ways, T=1..16 (T=16 also with the
      # chain to 16 rows). Predicted -0.3..-1 us. And the grouped GEMMs alone at T=64 and 256 (probe_grouped_mm.py):
      # where T=64's 32 us over the floor go (T=256: gate/up 92 %, down 85 % of their streams in CM).
    run gpu-tests 90 env MOELAB_ROUTE_TRIGGER=1 python -m pytest tests/kernels/test_moe.py -k "route or block or pairs" -q -p no:cacheprovider --tb=short -rf
    run sweep-trigger 220 python benchmarks/sweep_moe.py --mode block --route-trigger --shapes qwen3,qwen35 --tokens 1,2,4,8,16 --samples 15
    run probe-mm 120 python benchmarks/probe_grouped_mm.py --tokens 64,256
    # Won a little (sweep-moe-block-trigger-...T1818, two passes): Qwen3-30B-A3B T=1 26.27 -> 25.52 us, T=2 42.35 ->
    # 41.94, T=4 a tie, T=8 119.9 -> 119.2; Qwen3.5 T=1 24.22 -> 22.88, T=2 35.4 -> 34.9; T=16 with the chain to 16
    # rows 216.1 -> 214.5 (the trigger alone a tie there). The default since (no switch; sweep_moe.py's --route-trigger
    # is --chain now: T inside and outside the chain). probe-mm: T=64 gate/up 193.9,
    # down 100.4 us (89.5 and 86.5 % of their streams), T=256 199.4 and 106.7.
    ;;
  CV) # session 19: the MoE records with the route kernel's trigger (the default now), and its GPU tests
    run gpu-tests 90 python -m pytest tests/kernels/test_moe.py -k "route or block or pairs" -q -p no:cacheprovider --tb=short -rf
    run bench-moe 150 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    run bench-moe-35 110 python -m moelab bench moe --model qwen3.5-35b-a3b --tokens 1,2,4,8,16 --samples 10 --save
    run bench-moe-35tp 80 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --tokens 1,2,4,8 --samples 10 --save
    ;;
  CW) # session 19: routing and grouping in one program on the grouped path (MOELAB_ROUTE_GROUP, `route_group`; T*k <=
      # 1,024 and a [T, E] tile <= 8,192 logits: T=17..64 at E=128). trace-moe-...T145805 at T=64: route 3.4 + grouping
      # 3.6 us of advance. Predicted T=32/64 -2..-3 us alone, batch 32 -0.1 ms per token (48 layers).
      # Lost (sweep-moe-block-rg-...T1857, two passes): Qwen3 T=32 269.3 -> 277.0 us, T=64 303.9 -> 324.1; Qwen3.5
      # T=32 312.5 -> 320.2 (T=64 outside its tile: the same launches); batch 32 14.8 -> 15.2 ms (ab-chain-...T185825).
      # One program's k arg-max rounds over a [64, 128] tile cost far more than 64 route programs side by side.
      # Removed (code in e9ea685); the gpu-tests step ran out of its 120 s in the engine tests (42 passed, none failed).
    run gpu-tests 120 env MOELAB_ROUTE_GROUP=1 python -m pytest tests/kernels/test_moe.py tests/engine/test_parity.py -k "one_launch or one_program or moe_block or grouped or gpu or bf16" -q -p no:cacheprovider --tb=short -rf
    run sweep-rg 150 python benchmarks/sweep_moe.py --mode block --route-group --shapes qwen3,qwen35 --tokens 32,64 --samples 15
    run ab-b32 200 python benchmarks/ab_chain.py --batch 32 --rounds 3 --new-tokens 64 --variants base,rg=MOELAB_ROUTE_GROUP
    ;;
  CX) # session 19: CU's lead end to end: the step-long PDL chain to 16 rows (MOELAB_CHAIN_MAX_T=16; the census kernel
      # PDL-launched at T=16: -1.6 us a layer alone). Predicted batch 16 -0.05..-0.1 ms per token (48 layers), unless
      # the other links cost what session 6 saw at batch 8 (0.5-0.9 %).
    run ab-b16 200 python benchmarks/ab_chain.py --batch 16 --rounds 3 --new-tokens 64 --variants base,c16=MOELAB_CHAIN_MAX_T:16
    run sweep-chain 100 python benchmarks/sweep_moe.py --mode block --chain --shapes qwen3,qwen35 --tokens 12,16 --samples 15
    # Batch 16 11.19 -> 10.96 ms per token (ab-chain-...T191253), the tokens not the default's (the linear's whole-K
    # split up to chain_max_t rows sums in another order); alone T=12 169.8 -> 168.8, T=16 182.7 -> 181.0 us, Qwen3.5
    # T=12 165.8 -> 158.9, T=16 191.8 -> 190.3 (sweep-moe-block-chain-...T1913).
    ;;
  CY) # session 19: before the chain to 16 rows becomes the default: the engine at batch 16 against transformers (fp32),
      # with and without it, and the kernel tests of the chain's links
    run gpu-tests 200 python -m pytest tests/engine/test_generate.py -k "batch_16 or match_transformers" -q -p no:cacheprovider --tb=short -rf
    run gpu-tests-c16 150 env MOELAB_CHAIN_MAX_T=16 python -m pytest tests/kernels/test_moe.py tests/kernels/test_linear.py -k "pdl or chain or census or decode" -q -p no:cacheprovider --tb=short -rf
    ;;
  CZ) # session 20: what one link of the step costs, a PDL kernel boundary against a counter inside one kernel
      # (benchmarks/probe_links.py: 48 steps, tiny or 8 MB GEMV each; kernels / staged / persistent). Predicted: tiny
      # kernels 1.5-2.0 us a link, staged 1.0-1.5, persistent 0.8-1.2; gemv kernels ~3.5 (check_pdl), persistent 2.3-2.6.
    run hw 90 python -m moelab hw --save
    run gpu-tests 60 python -m pytest tests/bench/test_probe_links.py -q -p no:cacheprovider --tb=short -rf
    run probe-links 200 python benchmarks/probe_links.py --save
    ;;
  DA) # session 20: CZ put packed counters at 15 us a link (staged, 128 pollers a step) against 1.04 for a PDL kernel
      # boundary and 1.74 for a persistent barrier. Do polls sharing a 128-byte line with other counters' atomics cost?
      # The probe with counters 32 int32s apart, then the MoE kernels' counters spread likewise (MOELAB_CNT_STRIDE=32):
      # alone with routing at T=1..16, and batch 1 end to end. Predicted: staged stride-32 a few us a link (if the line
      # was the cost); T=1 -0.5..-2 us, T=8 -1..-3 us; batch 1 -0.02..-0.08 ms per token.
    run gpu-tests 120 python -m pytest tests/bench/test_probe_links.py tests/kernels/test_moe.py -k "probe or counter_stride or pairs_fp32" -q -p no:cacheprovider --tb=short -rf
    run probe-links 90 python benchmarks/probe_links.py --save
    run sweep-cs 200 python benchmarks/sweep_moe.py --mode block --cnt-stride 1,32 --shapes qwen3,qwen35,shard35 --tokens 1,2,8,16 --samples 15
    run ab-b1 170 python benchmarks/ab_chain.py --batch 1 --rounds 3 --new-tokens 128 --variants base,cs32=MOELAB_CNT_STRIDE:32
    ;;
  DB) # session 20: DA's win as the default (COUNTER_STRIDE = 32: T=1 -0.7 us, Qwen3.5 T=1 -1.5, the shard T=1..16
      # -1..-5; Qwen3 T=8/16 a tie; batch 1 2.40 -> 2.37 ms). Batch 8 (the census kernel at T=8 in the chain) end to
      # end against the packed counters (predicted a tie, as alone), the MoE GPU tests, and the records.
    run gpu-tests 150 python -m pytest tests/kernels/test_moe.py tests/kernels/test_moe_custom_op.py -k "route or block or pairs or census or decode or counter" -q -p no:cacheprovider --tb=short -rf
    run ab-b8 120 python benchmarks/ab_chain.py --batch 8 --rounds 3 --new-tokens 64 --variants base,cs1=MOELAB_CNT_STRIDE:1
    run bench-moe 150 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    run bench-moe-35 80 python -m moelab bench moe --model qwen3.5-35b-a3b --tokens 1,2,4,8,16 --samples 10 --save
    run bench-moe-35tp 60 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --tokens 1,2,4,8 --samples 10 --save
    ;;
  DC) # session 20: with the counters on lines of their own, the phase-2 backoff again: the pair kernel (128 ns at T=1,
      # a tight spin at T=2..4, chosen on packed counters) and the census kernel (never had one) at T=8, 16. Predicted:
      # the best backoff moves toward shorter sleeps at T=1 (less contention to avoid), census a tie or -1..-2 us.
      # And the decode records on the new default.
    run sweep-spin-pairs 150 python benchmarks/sweep_moe.py --mode pairs --spin 0,64,128,256 --shapes qwen3,qwen35,shard35 --tokens 1,2,4 --samples 15
    run sweep-spin-census 150 python benchmarks/sweep_moe.py --mode decode --spin 0,64,128,256 --shapes qwen3,qwen35 --tokens 8,16 --samples 15
    run decode 150 python benchmarks/bench_decode.py --batch 1,8,32 --rows moelab
    ;;
  DD) # session 20: the records on the final code (DC: every backoff within noise, the defaults kept; batch 1 2.368 ms):
      # the batch-1 profile (issue 4's per-op sum and chained step), the tp=4 profile, the batch-1 trace at ctx 256
    run profile 300 python -m moelab profile qwen3-30b-a3b --batch 1 --ctx 1024 --samples 10 --impl eager,compile,moelab --save
    run profile-tp4 120 python -m moelab profile qwen3.5-35b-a3b --tp 4 --ctx 1024 --samples 10 --impl eager,moelab --save
    run trace-b1-256 60 python benchmarks/trace_decode.py --batch 1 --ctx 256
    ;;
  DE) # session 20: the attention merge's arrival counters (B*Hk of them, packed) spread as the MoE kernels' now are
      # (counter_stride(), in 0d58fa4, since reverted). Only the merging shapes use them (B=8 16k: 4 splits). Separate
      # processes, alternated. Predicted B=8 16k -0.1..-0.5 us. Measured a tie: packed 66.6 / 66.2 / 66.4 us, spread
      # 66.4 / 66.3 / 66.5 (gpu-session-DE-...T1433.log); the code was reverted, so this stage now times one thing twice.
    for r in 1 2 3; do
      run attn-cs1-$r 60 env MOELAB_CNT_STRIDE=1 python benchmarks/bench_attention.py --shapes 8x16384 --no-compile
      run attn-cs32-$r 60 python benchmarks/bench_attention.py --shapes 8x16384 --no-compile
    done
    ;;
  DF) # session 21: the cooperative attention merge (MERGE=2: the last `mergers` split programs of a (sequence, KV
      # head) each merge a share of its rows, no combine launch; only where all split programs are resident). GPU
      # tests, then per shape the combine / last-arriver / coop in two alternating passes, then batch 1 end to end
      # (contexts 128-384: 7 splits, the combine today) with MOELAB_ATTN_COOP=1. Predicted: 64k -0.3..-1.0 us, 16k
      # -0.3..-0.8, 1k -0.3..-0.6, B=8 16k (coop against the last arriver) -0.2..-0.5; batch 1 -0.02..-0.05 ms a token.
      # Measured (gpu-session-DF-...T1552.log): lost everywhere, 1k 5.63 -> 6.57, 16k 13.8 -> 14.6, 64k 37.9 -> 38.7,
      # B=8 16k 66.6 -> 67.2 us; batch 1 2.36 -> 2.43 ms. The code (c55ee3c) was reverted: this stage no longer runs.
    run gpu-tests 150 python -m pytest tests/kernels/test_attention.py tests/engine/test_generate.py -k "coop or merge or graph or bf16" -q -p no:cacheprovider --tb=short -rf
    run attn-merge 200 python benchmarks/bench_attention.py --shapes 1x1024,1x16384,1x65536,8x16384 --no-compile --merge --samples 25
    run ab-b1 190 python benchmarks/ab_chain.py --batch 1 --rounds 3 --new-tokens 128 --variants base,coop=MOELAB_ATTN_COOP:1
    ;;
  DG) # session 21: DF said a hardware wait beats polled counters again (as CZ did). The pair kernel's phase 2 polls its
      # slot's counter; MOELAB_PAIRS_SPLIT=1 runs the phases as two launches, phase 2 PDL-launched (its first w2 chunk
      # before a hardware wait for the whole of phase 1: no polls, but no per-slot start either). Predicted: route +
      # experts T=1 Qwen3 -0.5..+1.5 us, Qwen3.5 and the shard -1..+1; T=2..4 +0..+3 (slots finish further apart);
      # batch 1 -0.03..+0.03 ms a token.
    run gpu-tests 120 python -m pytest tests/kernels/test_moe.py -k "two_launches or pairs or counter_stride" -q -p no:cacheprovider --tb=short -rf
    run sweep-split 200 python benchmarks/sweep_moe.py --mode block --pairs-split --shapes qwen3,qwen35,shard35 --tokens 1,2,4 --samples 15
    run ab-b1 190 python benchmarks/ab_chain.py --batch 1 --rounds 3 --new-tokens 128 --variants base,split=MOELAB_PAIRS_SPLIT:1
    ;;
  DG) # session 21: DF said a hardware wait beats polled counters again (as CZ did). The pair kernel's phase 2 polls its
      # slot's counter; MOELAB_PAIRS_SPLIT=1 runs the phases as two launches, phase 2 PDL-launched (its first w2 chunk
      # before a hardware wait for the whole of phase 1: no polls, but no per-slot start either). Predicted: route +
      # experts T=1 Qwen3 -0.5..+1.5 us, Qwen3.5 and the shard -1..+1; T=2..4 +0..+3 (slots finish further apart);
      # batch 1 -0.03..+0.03 ms a token. Measured (gpu-session-DG-...T1601.log): lost everywhere, T=1 24.95 -> 25.93,
      # Qwen3.5 T=1 23.05 -> 24.55, the shard 12.11 -> 12.44, T=2/4 +1.3..+2.6 us; batch 1 2.36 -> 2.46 ms. The code
      # (d694091) was reverted: this stage no longer runs.
    run gpu-tests 120 python -m pytest tests/kernels/test_moe.py -k "two_launches or pairs or counter_stride" -q -p no:cacheprovider --tb=short -rf
    run sweep-split 200 python benchmarks/sweep_moe.py --mode block --pairs-split --shapes qwen3,qwen35,shard35 --tokens 1,2,4 --samples 15
    run ab-b1 190 python benchmarks/ab_chain.py --batch 1 --rounds 3 --new-tokens 128 --variants base,split=MOELAB_PAIRS_SPLIT:1
    ;;
  DH) # session 21: the pair kernel compiles both phases into one kernel, so phase 1 runs at phase 2's registers (230 at
      # the T=1 tile, sm_90, Triton 3.6: 2 programs an SM) though alone it needs 96 (5 an SM; phase 2 alone 205).
      # MOELAB_PAIRS_TWO=1: two kernels, each compiled with its own phase; phase 2 PDL-launched once every phase-1
      # program has started, polling the slots' counters as before (DG's hardware wait lost the per-slot start).
      # Phase 1 alone at 8 x 1024 (96 registers), 8 x 2048 (168) and 4 x 1024 (64). Predicted: route + experts T=1
      # Qwen3 -1..-3 us (phase 1's stream with 2.5x the programs in flight), Qwen3.5 likewise, the shard -0.5..-1.5,
      # T=2..4 -1..-4; batch 1 -0.03..-0.10 ms a token. Measured (gpu-session-DH-...T1608.log): T=1 Qwen3 25.04 ->
      # 25.69 (4 x 1024: 25.17), the shard 12.11 -> 12.68; T=2 41.97 -> 41.26, T=4 75.20 -> 74.52, Qwen3.5 T=2 34.72 ->
      # 33.71, T=4 60.04 -> 59.26; batch 1 2.37 -> 2.38 ms. Two kernels are the default from T=2 now (PAIRS_TWO_MIN_T);
      # the phase-1 tile switches (MOELAB_PAIRS_BI/BK) are gone, and --pairs-two now sweeps phase 2's tiles.
    run gpu-tests 120 python -m pytest tests/kernels/test_moe.py -k "two_launches or pairs or counter_stride" -q -p no:cacheprovider --tb=short -rf
    run sweep-two 240 python benchmarks/sweep_moe.py --mode block --pairs-two --shapes qwen3,qwen35,shard35 --tokens 1,2,4 --samples 15
    run ab-b1 200 python benchmarks/ab_chain.py --batch 1 --rounds 3 --new-tokens 128 --variants base,two=MOELAB_PAIRS_TWO:1,two4=MOELAB_PAIRS_TWO:1+MOELAB_PAIRS_BI:4
    ;;
  DI) # session 21: DH's two kernels won a little at T=2..4 (now the default there) and tied or lost at T=1, so phase 1's
      # registers were not what holds T=1 back. With the phases in two kernels, phase 2's tile no longer sets phase 1's
      # registers: phase-2 tiles holding the whole w2 slice before the wait (what lost in one kernel, stage CE, as
      # phase 1 ended later) cut the tail after the last slot's readiness (4.75 us, stage CD: two serial chunks after
      # the wait). Tiles 8 x whole (96 registers), 16 x whole (221), 16 x half (103). Predicted T=1 Qwen3 -1..-2.5 us
      # against one kernel, Qwen3.5 -1..-2, the shard 0..-0.5; batch 1 -0.02..-0.10 ms a token. Measured
      # (gpu-session-DI-...T1617.log): every whole-slice tile lost, T=1 Qwen3 24.85 (one kernel) against 27.4-29.3 us,
      # T=2/4 +4..+20 us, the shard +1.6..+3.7; batch 1 2.36 -> 2.52 / 2.59 ms. The two kernels' default tiles again
      # beat one kernel at T=2..4 (Qwen3 T=2 42.15 -> 41.49, T=4 75.56 -> 74.71). MOELAB_PAIRS_BH/BK2 are gone, and
      # --pairs-two times one kernel against two: this stage's ab-b1 no longer runs.
    run gpu-tests 150 python -m pytest tests/kernels/test_moe.py tests/kernels/test_moe_custom_op.py -k "two or pairs or counter_stride or block" -q -p no:cacheprovider --tb=short -rf
    run sweep-two 240 python benchmarks/sweep_moe.py --mode block --pairs-two --shapes qwen3,qwen35,shard35 --tokens 1,2,4 --samples 15
    run ab-b1 200 python benchmarks/ab_chain.py --batch 1 --rounds 3 --new-tokens 128 --variants base,w8=MOELAB_PAIRS_TWO:1+MOELAB_PAIRS_BH:8+MOELAB_PAIRS_BK2:1024,w16=MOELAB_PAIRS_TWO:1+MOELAB_PAIRS_BH:16+MOELAB_PAIRS_BK2:1024
    ;;
  DJ) # session 21: the census kernel (T=5..16) holds both phases in one kernel as the pair kernel did: phase 1 alone
      # at T=8 needs 56 registers and 30 KB of shared memory (7 programs an SM) against 70 and 41 KB (5) with phase 2's
      # code (sm_90, Triton 3.6). MOELAB_CENSUS_TWO=1: two kernels, as the pair kernel's default from T=2 (DH: -0.7..-1
      # us at T=2..4). Predicted: route + experts T=8 / 16 -0.5..-2 us (Qwen3 and Qwen3.5), batch 8 0..-0.05 ms a token.
      # Measured (gpu-session-DJ-...T1622.log): lost, Qwen3 T=8 116.99 -> 119.94, T=16 199.07 -> 203.41 us, Qwen3.5
      # T=16 a tie; batch 8 7.35 -> 7.46 ms. The code (d5e89e9) was reverted: this stage no longer runs.
    run gpu-tests 120 python -m pytest tests/kernels/test_moe.py -k "census or two or decode" -q -p no:cacheprovider --tb=short -rf
    run sweep-ctwo 150 python benchmarks/sweep_moe.py --mode block --census-two --shapes qwen3,qwen35 --tokens 8,16 --samples 15
    run ab-b8 200 python benchmarks/ab_chain.py --batch 8 --rounds 3 --new-tokens 64 --variants base,ctwo=MOELAB_CENSUS_TWO:1
    ;;
  DK) # session 21: the MoE records on the shipped code (two pair kernels from T=2, PAIRS_TWO_MIN_T)
    run bench-moe 170 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    run bench-moe-35 90 python -m moelab bench moe --model qwen3.5-35b-a3b --tokens 1,2,4,8,16 --samples 10 --save
    run bench-moe-35tp 70 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --tokens 1,2,4,8 --samples 10 --save
    ;;
  DL) # prepared in session 21, not yet run: with the phases in two kernels, phase-1 tiles that fit one wave at T=1 (the
      # default 8 x 1024 makes 768 programs, 1.16 waves at 5 an SM, and the last slot's programs come last): 16 x 512,
      # 16 x 256, 32 x 256 (sweep_moe.py --pairs-two-tiles). Predicted: T=1 -1..+2 us (every slot ready at about the
      # same time, ~12-13 us, then phase 2's 25 MB behind it; the per-slot overlap shrinks).
    run sweep-two-tiles 200 python benchmarks/sweep_moe.py --mode block --pairs-two --pairs-two-tiles --shapes qwen3,qwen35,shard35 --tokens 1,2 --samples 15
    ;;
  DM) # session 22: the grouped path (T >= 32) runs gate/up, then the down GEMM, each waiting for the whole previous
      # kernel: the down GEMM's first programs start only when gate/up's last wave has drained (at T=64 ~1,600 programs
      # of 512 KB, ~4 waves at 4 an SM by shared memory; session 19: the GEMMs ~20 us over their streams). OVERLAP
      # (MOELAB_GROUPED_OVERLAP=1): gate/up counts each token tile's finished column blocks and releases the down GEMM
      # as it starts; the down GEMM, PDL-launched with no hardware wait (as the pair kernel's phase 2), polls its tile's
      # counter, so its early tiles fill the SMs gate/up's last wave leaves idle. Bitwise the plain launches (CPU test).
      # sm_90, Triton 3.6: gate/up 72 -> 80 registers, down 40 -> 56, the same shared memory. Predicted (grouped sweep,
      # two passes): T=32 -2..-6 us, T=64 -3..-8, T=256 -4..-10, T=1024 -3..-10, T=4096 -5..-15; batch 32 -0.05..-0.15
      # ms a token, the same tokens. DL (one minute, prepared in session 21) rides along.
    run gpu-tests 150 python -m pytest tests/kernels/test_moe.py -k "overlap or grouped_variants or grouped_path" -q -p no:cacheprovider --tb=short -rf
    run sweep-overlap 240 python benchmarks/sweep_moe.py --grouped 32,64,256,1024,4096 --grouped-overlap --samples 15 --shapes ""
    run sweep-two-tiles 150 python benchmarks/sweep_moe.py --mode block --pairs-two --pairs-two-tiles --shapes qwen3,qwen35,shard35 --tokens 1,2 --samples 15
    ;;
  DN) # session 22: DM measured OVERLAP (gpu-session-DM-...T1729.log; grouped sweep, two passes): T=32 263.9 -> 260.4 us,
      # T=64 297.2 -> 294.3, T=1024 384.9 -> 381.1 (predicted -2..-10: right), T=256 318.5 -> 322.6 and T=4096 740.6 ->
      # 804.7 (+4, +64: wrong). The down GEMM's act rows came by pointers (a TMA load is another memory proxy than the
      # acquire's); the likely cost where the down GEMM is not only a weight stream (T=4096: 128-row act tiles).
      # OVERLAP_TMA: act by TMA after the acquire and `fence.proxy.async.global`. Predicted: T=4096 back to within
      # -15..+10 us of the plain launches, T=256 -4..+2, T=32/64/1024 as OVERLAP. Then batch 32 end to end (the grouped
      # path at T=32 in every layer): -0.05..-0.15 ms a token with either, the same tokens. Measured
      # (gpu-session-DN-...T1736.log): plain -> OVERLAP -> OVERLAP_TMA T=32 250.2 -> 247.4 -> 245.8, T=64 283.2 -> 279.8
      # -> 278.4, T=256 308.9 -> 313.4 -> 310.1, T=1024 376.3 -> 373.7 -> 370.7, T=4096 726.8 -> 771.4 -> 760.5 us;
      # batch 32 14.41 -> 14.25 -> 14.19 ms, the same tokens. Both on with the 16-row tiles now (GROUPED_OVERLAP).
    run gpu-tests 120 python -m pytest tests/kernels/test_moe.py -k "overlap" -q -p no:cacheprovider --tb=short -rf
    run sweep-overlap 200 python benchmarks/sweep_moe.py --grouped 32,64,256,1024,4096 --grouped-overlap --samples 15 --shapes ""
    run ab-b32 240 python benchmarks/ab_chain.py --batch 32 --rounds 3 --new-tokens 64 --variants base,ov=MOELAB_GROUPED_OVERLAP:1,ovt=MOELAB_GROUPED_OVERLAP:1+MOELAB_GROUPED_OVERLAP_TMA:1
    ;;
  DO) # session 22: at batch 1 the post-attention norm is a launch of its own between the o projection and the router
      # (1.45 us of advance a layer in session 20's trace, DD; the router 3.7). MOELAB_NORM_ROUTER=1: the router's
      # programs normalise the rows themselves (h + residual, 8 KB from L2 each, add_rmsnorm's casting; program 0 stores
      # them and the new residual), so the chain loses one dependent launch per MoE layer (add_rmsnorm_router). Predicted:
      # batch 1 -0.03..-0.06 ms a token (2.37 -> ~2.32), batch 8 -0.02..-0.05; the tokens may differ in bf16 (the sum of
      # squares reduces in another layout than the norm kernel's). Then the tests of this session's defaults. Measured
      # (gpu-session-DO-...T1745.log): batch 1 2.364 -> 2.344 ms, batch 8 7.515 -> 7.550 (lost), the bf16 tokens not the
      # same; the default at batch 1 only now (NORM_ROUTER_MAX_T = 1, MOELAB_NORM_ROUTER_MAX_T), so this A/B's switch
      # is gone: its nr rows would now be MOELAB_NORM_ROUTER_MAX_T:8.
    run ab-b1 200 python benchmarks/ab_chain.py --batch 1 --rounds 3 --new-tokens 128 --variants base,nr0=MOELAB_NORM_ROUTER_MAX_T:0
    run ab-b8 150 python benchmarks/ab_chain.py --batch 8 --rounds 3 --new-tokens 64 --variants base,nr8=MOELAB_NORM_ROUTER_MAX_T:8
    run gpu-tests 200 python -m pytest tests/kernels/test_router.py tests/kernels/test_moe.py tests/engine/test_generate.py -k "norm or router or overlap or pairs_runs or two_launches or match_transformers or graph" -q -p no:cacheprovider --tb=short -rf
    ;;
  DP) # session 22: the records on this session's defaults (OVERLAP with the 16-row grouped tiles; the norm inside the
      # router at batch 1; two pair kernels at T=1 with a wide shared expert). DO measured the norm in the router:
      # batch 1 2.364 -> 2.344 ms a token (predicted -0.03..-0.06), batch 8 7.515 -> 7.550 (lost): batch 1 only.
    run bench-moe 170 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    run bench-moe-35 90 python -m moelab bench moe --model qwen3.5-35b-a3b --tokens 1,2,4,8,16 --samples 10 --save
    run bench-moe-35tp 70 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --tokens 1,2,4,8 --samples 10 --save
    run decode 150 python benchmarks/bench_decode.py --batch 1,8,32 --rows moelab
    ;;
  DQ) # session 22: the batch-1 profile on the final code (the chained step runs the norm inside the router, as the
      # engine), and the profile's GPU tests
    run profile 300 python -m moelab profile qwen3-30b-a3b --batch 1 --ctx 1024 --samples 10 --impl eager,compile,moelab --save
    run gpu-tests 150 python -m pytest tests/profile tests/engine/test_generate.py -q -p no:cacheprovider --tb=short -rf
    ;;
  DR) # session 22: the MoE, router and engine GPU tests on the final code (the grouped path's OVERLAP is the default
      # with the 16-row tiles now, under every grouped test of 17..128 tokens a shape)
    run gpu-tests 420 python -m pytest tests/kernels/test_moe.py tests/kernels/test_moe_custom_op.py tests/kernels/test_router.py tests/engine tests/profile -q -p no:cacheprovider --tb=short -rf -x
    ;;
  DS) # session 22: with OVERLAP the grouped path at T=17..128 is route, grouping, gate/up, down and the top-k sum; the sum
      # (3.0 us of advance at T=64 in session 13's trace) is its own launch after the down GEMM. SUM_FUSED
      # (MOELAB_GROUPED_SUM=1): the down GEMM's programs count each y row's arrival per (token, column block); the last of
      # a token's valid pairs sums its k rows (from L2) into out, bitwise the sum kernel's order; no shared expert, T <=
      # 128. sm_90, Triton 3.6: the down GEMM 46 -> 64 registers. Predicted: T=32/64/128 -1.5..-3 us (the launch and
      # its tail, less the last arrivers' loads), batch 32 -0.05..-0.1 ms a token, the same tokens. Measured
      # (gpu-session-DS-...T1819.log): wrong in direction, T=32 252.7 -> 261.9, T=64 283.0 -> 291.5, T=128 293.6 -> 302.1
      # us; batch 32 14.19 -> 14.66 ms (the same tokens). The code (a98e60e) was reverted: this stage no longer runs.
    run gpu-tests 100 python -m pytest tests/kernels/test_moe.py -k "sum_fused" -q -p no:cacheprovider --tb=short -rf
    run sweep-sum 90 python benchmarks/sweep_moe.py --grouped 32,64,128 --grouped-sum --samples 15 --shapes ""
    run ab-b32 120 python benchmarks/ab_chain.py --batch 32 --rounds 3 --new-tokens 64 --variants base,sum=MOELAB_GROUPED_SUM:1
    ;;
  DT) # session 23: at T >= 1024 each grouped GEMM program holds 147 KB of shared memory, so one fits an SM, and it fills
      # its pipeline (3 stages) and runs its epilogue (SiLU·mul or the routing weight, the scattered stores) with no
      # load in flight. PERSIST=1: a program an SM walking the tiles in the 1-D grid's order; FLATTEN (Triton's
      # tl.range(flatten=True)): one pipelined (tile, K chunk) loop, so the next tile's chunks load during the epilogue.
      # sm_90, Triton 3.6: 255 registers, no spill, 180 KB of shared memory (one-tile kernels 176/192 registers, 147 KB).
      # Predicted: T=4096 761 -> 690..730 us (gate/up -20..-40, down -20..-40: its K is 12 chunks, so fill + epilogue are
      # a larger share), T=1024 -5..-20 us; FLATTEN=False (a loop per tile) within +-10 us of the one-tile kernels.
    run gpu-tests 200 python -m pytest tests/kernels/test_moe.py -k "persist" -q -p no:cacheprovider --tb=short -rf
    run sweep-persist 300 python benchmarks/sweep_moe.py --grouped 1024,4096 --grouped-persist --samples 15 --shapes ""
    ;;
  DU) # session 23: DT measured (gpu-session-DT-...T1857.log) PERSIST: T=1024 376.5 -> 369.3 us (FLATTEN=False 383.4),
      # T=4096 740.6 -> 749.9 (+-20-30 us spreads; FLATTEN=False 755.8): the epilogues are not where T=4096 loses. At
      # T=4096 each expert has ~256 pairs, so its last 128-row tile is on average half padding: ~20 % of the MMA rows.
      # HALF: an expert's last tile with at most 64 rows runs as a 64-row tile in the same launch (both GEMMs; sm_90,
      # Triton 3.6: the same 147 KB of shared memory, 178/193 registers against 176/192, both wgmma paths).
      # Predicted: T=4096 -20..-50 us (compute-bound: ~10 % fewer MMA rows), T=2048 -5..-25, T=1024 within +-5 (the
      # weights' stream bounds it). Bitwise the full tiles (GPU tests at T=1024 and 4096).
    run gpu-tests 200 python -m pytest tests/kernels/test_moe.py -k "persist or half" -q -p no:cacheprovider --tb=short -rf
    run sweep-half 300 python benchmarks/sweep_moe.py --grouped 1024,2048,4096 --grouped-persist --samples 15 --shapes ""
    ;;
  DV) # session 23: DU measured (gpu-session-DU-...T1910.log) HALF with 4 stages in both GEMMs: T=1024 384.3 -> 355.8 us,
      # T=2048 488.9 -> 445.9, T=4096 743.3 -> 729.9 (its passes 700/759 against 720/766: the T=4096 passes drift by
      # 40-60 us, first to second, in every row); HALF on 3 stages 368.6 / 474.3 / 742.5; PERSIST lost at 2048 and 4096
      # again. Which of HALF and the 4th stage won? Predicted: 4 stages alone -15..-30 us at 1024 and 2048, HALF -5..-15
      # more there; T=4096 all within its drift. Then bench moe at 1024/2048/4096 with each switch, as the bench times.
    run sweep-stages 300 python benchmarks/sweep_moe.py --grouped 1024,2048,4096 --grouped-persist --samples 25 --shapes ""
    ;;
  DW) # session 23: DV measured (gpu-session-DV-...T1911.log; 3 stages -> HALF -> 4 stages -> HALF on 4): T=1024 384.8 ->
      # 371.9 -> 369.9 -> 358.4 us, T=2048 490.6 -> 480.6 -> 477.3 -> 457.7, T=4096 748.2 -> 772.9 -> 871.3 -> 744.4
      # (drifting passes). HALF on 4 stages is now the default at P >= 8192; the persistent GEMMs are removed. Here: the
      # GPU tests on the new default, the kernels of one layer at T=1024 and 4096 with HALF on and off (trace_moe), and
      # the bench record. Predicted: trace T=4096 gate/up -20..-40 us with HALF (10 % fewer MMA rows, if compute-bound),
      # down -5..-15; bench T=1024 ~360 us, T=4096 within +-20 us of 761 (session 22's record).
    run gpu-tests 300 python -m pytest tests/kernels/test_moe.py -k "grouped or half" -q -p no:cacheprovider --tb=short -rf
    run trace-half 120 python benchmarks/trace_moe.py --tokens 1024,4096 --calls 4
    MOELAB_GROUPED_HALF=0 run trace-full 120 python benchmarks/trace_moe.py --tokens 1024,4096 --calls 4
    run bench-moe 150 python -m moelab bench moe --tokens 1024,2048,4096 --samples 10 --save
    ;;
  DX) # session 23: DW measured (gpu-session-DW-...T1916.log) HALF in the trace: T=4096 688.4 -> 661.7 us a layer (gate/up
      # 396 -> 376, down 236 -> 227: as predicted), T=1024 363.1 -> 353.2; bench moe T=1024 349.6, 2048 430.4, T=4096
      # 732.2 us (53.4 %, IQR 61 us; 761 in session 22's record). Its GPU tests: the T=4096 OVERLAP test met the default's
      # HALF under $MOELAB_GROUPED_OVERLAP (fixed: the default's HALF is "auto"). Here: those tests again; the grouping's
      # chunks (the place step sorts a 1024-pair chunk in one program: 6.3-6.7 us). Predicted: chunks of 256 at T=256
      # -2..-4 us; at T=64 the chunked form loses to the one-launch sort (+1..+3); T=1024 -1..-3.
    run gpu-tests 300 python -m pytest tests/kernels/test_moe.py -k "overlap_is_bitwise or half" -q -p no:cacheprovider --tb=short -rf
    run trace 90 python benchmarks/trace_moe.py --tokens 64,256 --calls 4
    run sweep-chunk 200 python benchmarks/sweep_moe.py --grouped 64,256,1024 --grouped-chunk --samples 15 --shapes ""
    ;;
  DY) # session 24: why the bench's T=4096 (53.4 %, IQR 61 us) sits below the back-to-back trace (59 %), and what a
      # host-launched layer costs the CPU (bench: 152 us a call at T=1 against 24 graph-replayed, 696 against 311 at T=256).
      # The SM clock, power and temperature are logged every 250 ms beside the stage (clocks.csv; the log's step lines carry
      # the time). Predicted: the 8192^3 matmul rate falls from ~790 TFLOP/s cold to ~700 after 20 s of matmuls, the SM
      # clock from ~1980 to ~1700 MHz; the MoE layer's share of the rate measured in the same window stays within +-2
      # points of ~59 %; the bench's T=4096 row runs at a lower clock than `moelab hw` saw. Host: ~40-60 us of Python a
      # Triton launch, most of it in Triton's launcher (argument binding, descriptors), not in moelab's own code.
      # The bench's moelab row now runs moe_block, which no longer checks its own route kernel's ids on the host (a sync
      # a call): host-launched T=1 152 -> 60-90 us, T=256 696 -> 350-450, T=4096 within 10 % of graph-replayed.
    (nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
       --format=csv -lms 250 > "$OUT/clocks.csv" 2>&1 &) 
    run probe-host 150 python benchmarks/probe_host.py --calls 40
    run probe-clocks 240 python benchmarks/probe_clocks.py --windows 30 --heat 0,20
    run bench-moe 240 python -m moelab bench moe --tokens 1,256,4096 --samples 10 --save
    pkill -f "nvidia-smi --query-gpu" || true
    ;;
  DZ) # session 25: the ceiling's matmul rate as the best of 3 rounds (DY's fresh ceiling said 702 TFLOP/s while
      # probe-clocks measured a median of 794 minutes later), the bench's T=4096 floor against the rate measured beside
      # moelab's samples, and why the bench times T=4096 at 736 us where probe-clocks times 672 (probe_gap.py).
      # Predicted: hw bf16 780-800 with the three rounds within 15 %; bench T=4096 floor_bf16_tflops ~790, so 736 us
      # reads ~53 %, not DY's 59.8; probe_gap: measure and probe agree within 2 %, the gap sits in bench.run's order.
    run hw 120 python -m moelab hw --save
    run probe-gap 240 python benchmarks/probe_gap.py --rounds 2
    run bench-moe 300 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    ;;
  EA) # session 26 (no GPU that session): the route kernel PDL-launched (MOELAB_ROUTE_PDL). In `moelab bench moe`'s
      # graphs (and the engine's dense + route at T=9..16) the route kernel is a plain launch: it starts only once the
      # previous layer's experts' kernel has ended, and the experts' kernel it releases becomes resident only then.
      # PDL-launched, it is resident during that kernel's tail and waits in hardware; it still reads nothing before.
      # Predicted: Qwen3-30B-A3B T=1 -0.5..-1.5 us (24.6 -> ~23.5), T=2..16 -0.3..-1; Qwen3.5 and its shard likewise.
      # The GPU tests first: eight chained layers in one graph must give the plain eager chain's bits either way.
    run gpu-tests 240 python -m pytest tests/kernels/test_moe.py -k "graph or route or block" -q -p no:cacheprovider --tb=short -rf
    run sweep-route-pdl 300 python benchmarks/sweep_moe.py --mode block --route-pdl --shapes qwen3,qwen35,shard35 --tokens 1,2,4,8,16 --samples 10
    ;;
  EB) # session 26 (no GPU that session): the Gated DeltaNet decode kernels (kernels/gdn.py: conv, recurrence, gated
      # norm, one launch each), tested on the CPU and compiled for sm_90, never run on a GPU. Predicted at Qwen3.5's tp=4
      # shard, batch 1: conv 14.7 -> 2-3 us, recurrence 61 -> 2.5-4, gated norm 20.5 -> 2-3 (each a latency-bound
      # launch: the recurrence streams 1 MB of fp32 state, 0.23 us of bandwidth); the profile's moelab sum 4.81 ->
      # ~2.2 ms a step, and its chained step 3.83 -> 1.2-1.5 ms.
    run gpu-tests 240 python -m pytest tests/kernels/test_gdn.py tests/profile -q -p no:cacheprovider --tb=short -rf
    run profile-tp4 240 python -m moelab profile qwen3.5-35b-a3b --tp 4 --ctx 1024 --samples 10 --impl eager,compile,moelab --save
    ;;
  EC) # session 26 (no GPU that session): Qwen3.5 in the decode engine (Gated DeltaNet layers, gated attention with
      # partial RoPE, (1 + w) norms). CPU parity with transformers in fp32; never run on a GPU. The GPU tests first
      # (bf16 parity, graph replay restoring the Gated DeltaNet states after the warm-up, the kernels), then the decode
      # bench on random weights (64.6 GiB of bf16: fits an H100 with ~10 GiB to spare, comfortably an H200).
      # Predicted: batch 1 ~2.3-2.8 ms a token against a ~1.3 ms floor (45-55 %: the experts at T=1 reach 55 % alone,
      # and each Gated DeltaNet layer adds 3 small launches to the chain), batch 8 ~60-70 %.
    run gpu-tests 300 python -m pytest tests/engine tests/kernels/test_gdn.py tests/kernels/test_gate.py -k "qwen3_5 or qwen3_next or gdn or gate or graph_replay or bf16" -q -p no:cacheprovider --tb=short -rf
    run decode-qwen35 240 python benchmarks/bench_decode.py --model qwen3.5-35b-a3b --batch 1,8 --rows moelab
    ;;
  ED) # after EC: Qwen3.5 side by side with transformers eager (its Gated DeltaNet on torch fallbacks: no fla or
      # causal-conv1d kernels on the device machine) and its static-cache + torch.compile generate, batch 1.
    run decode-qwen35-hf 540 python benchmarks/bench_decode.py --model qwen3.5-35b-a3b --batch 1 --rows moelab,moelab-eager,hf-eager,hf-compile --hf-eager-new-tokens 16
    ;;
  EE) # after EC: the Gated DeltaNet kernels in the step's PDL chain (MOELAB_GDN_PDL: each releases the next kernel as
      # it starts and waits in hardware before reading an earlier kernel's output, so the output projection's 16.8 MB
      # weight streams while conv, recurrence and gated norm run). Correctness first, with the switch on.
      # Predicted: Qwen3.5 batch 1 -0.05..-0.12 ms a token (up to 3.6 us of weight stream hidden in each of 30 layers).
    run gpu-tests-pdl 240 env MOELAB_GDN_PDL=1 python -m pytest tests/engine tests/kernels/test_gdn.py -k "qwen3_5 or gdn" -q -p no:cacheprovider --tb=short -rf
    run ab-qwen35 300 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants base,P=MOELAB_GDN_PDL
    ;;
  EF) # session 27: EC/EE measured (gpu-session-EC/EE-...T0046/T0054.log). Four GPU tests failed on the tests, not the
      # kernels: transformers 5.17's recurrent rule wants q/k repeated to the value heads; the hybrids' bf16 logits are
      # 4-55 % off transformers' own fp32 ones on the tiny random checkpoints, so a direct 2e-2 bf16 parity is
      # ill-posed (now: as accurate as transformers' bf16 against fp32); the route-PDL chain decayed to zeros (a SwiGLU
      # chain of its own output, now routed on it only). MOELAB_GDN_PDL won its A/B (2.45 -> 2.36 ms) and is the
      # default; the profile's Gated DeltaNet in/out projections now run the engine's dense kernel in the moelab column.
      # Predicted: the tests pass; tp=4 profile gdn.in_proj 6.55 -> ~4.8 us, gdn.out_proj 4.71 -> ~3.0 (as qkv/o_proj),
      # moelab Σ 2.08 -> ~1.98 ms, chained step 1.50 -> ~1.40; decode Qwen3.5 batch 1 2.45 -> ~2.36 ms, batch 8 6.89 -> ~6.8.
    run gpu-tests 240 python -m pytest tests/engine/test_parity.py tests/kernels/test_gdn.py tests/profile "tests/kernels/test_moe.py::test_gpu_moe_block_layers_in_one_graph" -q -p no:cacheprovider --tb=short -rf
    run decode-qwen35 150 python benchmarks/bench_decode.py --model qwen3.5-35b-a3b --batch 1,8 --rows moelab
    run profile-tp4 200 python -m moelab profile qwen3.5-35b-a3b --tp 4 --ctx 1024 --samples 10 --impl eager,compile,moelab --save
    run profile-tp1 150 python -m moelab profile qwen3.5-35b-a3b --ctx 1024 --samples 10 --impl eager,moelab --save
    ;;
  EG) # session 27 (after EF): where Qwen3.5's batch-1 step goes, kernel by kernel (2.36 ms against a 1.32 ms floor).
      # Bytes a step: 30 Gated DeltaNet layers of 125 MB (in_proj 50.6, out_proj 16.8, 9 experts 56.6, router 1), 10
      # attention layers of 112 MB (q + gate, k, v 37.7; o 16.8; experts 56.6), lm_head 1,017 MB. Predicted advances:
      # a Gated DeltaNet layer ~50 us (floor 27.4: in_proj ~12, conv + recurrence + gated norm ~4-6 together, out_proj
      # ~4, router ~4, experts ~22), an attention layer ~48 us (floor 24.5), lm_head ~240 us (floor 222).
    run trace-qwen35 200 python benchmarks/trace_decode.py --model qwen3.5-35b-a3b --batch 1 --ctx 1024
    ;;
  EH) # session 28: the pair kernel against the census at T=8 and 16, at every shape (measured only at Qwen3-30B-A3B
      # T=2/4 before, stage AP). The tp=4 shard's T=8 is 60 us against 21.7 at T=4 and a 20 us floor: its census runs
      # 65 slots × 4 phase-1 blocks (I=128) = 260 phase-1 programs on 132 SMs. Predicted: shard35 T=8 pairs ~35-40 us
      # against the census's ~58 (its 16-row phase-1 tiles ~45); T=16 pairs ~60 against ~90; Qwen3.5 T=8 a tie
      # (pairs re-read ~11 % more bytes); Qwen3-30B-A3B the census ahead at both.
    run sweep-census-pairs 300 python benchmarks/sweep_moe.py --mode decode --shapes shard35,qwen35,qwen3 --tokens 8,16 --samples 10
    ;;
  EI) # session 28, measured on an H100 only (no H200 came): the pair kernel up to pairs_max_t(I) tokens (16 at I <= 128,
      # 8 at I <= 512), and narrower state blocks for the Gated DeltaNet recurrence (its tp=1 call 8.2 us for 1.3 us of
      # bandwidth: 128 programs of 16 KB). H100: the shard T=8 39.8 against 65.2 us (census), T=16 73.6 against 100.3;
      # Qwen3.5 T=8 137.4 against 152.4; Qwen3.5 batch 8 8.74 -> 8.50 ms a token (ab-chain-…T040945).
      # Predicted on the H200: bench moe tp=4 T=8 60.4 -> ~37 us, Qwen3.5 T=8 113 -> ~104; Qwen3.5 batch 8 6.89 ->
      # ~6.7 ms; MOELAB_GDN_BLOCK_V 16 / 8: batch 1 -0.05..-0.12 ms (30 layers × 2-4 us). Session 29: bench_gdn times
      # the recurrence alone at block widths 32..4 (H100 trace at 32: 8.2 us a call in the chain; predicted at tp=1
      # batch 1, widths 8 or 4: 3-5 us against 1.1 of bytes; at tp=4 (32 programs at width 32) a larger relative gain).
    run bench-gdn 120 python benchmarks/bench_gdn.py --tp 1,4 --batch 1,8 --block-v 32,16,8,4 --samples 15 --no-compile
    run bench-moe-35 90 python -m moelab bench moe --model qwen3.5-35b-a3b --tokens 1,2,4,8,16 --samples 10 --save
    run bench-moe-35tp 80 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --tokens 1,2,4,8,16 --samples 10 --save
    run gpu-tests 200 python -m pytest tests/kernels/test_moe.py tests/kernels/test_gdn.py -q -p no:cacheprovider --tb=short -rf
    ;;
  EJ) # session 29: EI's end-to-end A/Bs (EI with them passed one call's 10 minutes). Predicted as in EI; the block
      # width that bench-gdn (EI) finds best at tp=1 batch 1 should be the one that wins here, if any does.
    run ab-b8 120 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 8 --rounds 2 --variants base,p4=MOELAB_PAIRS_MAX_T:4
    run ab-bv 150 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants base,bv16=MOELAB_GDN_BLOCK_V:16,bv8=MOELAB_GDN_BLOCK_V:8
    ;;
  EK) # session 29: EI's bench_gdn found the recurrence latency-bound (tp=1 batch 1 4.49 us for 0.92 of bytes; 16/8/4
      # columns 4.41/4.86/5.57). Two latency levers: the ONE_PASS form (o from the undecayed state's two reductions side
      # by side: one cross-warp reduction level on o's path, not two) and fewer warps a program (reductions inside a
      # warp). Also 64/128 columns (one program a head, which a fused gated norm would need). Predicted at tp=1 batch 1:
      # ONE_PASS 4.49 -> ~4.0 us, 1-2 warps -0.3..-0.8; 128 columns within 1 us of 32. End to end at batch 1:
      # -0.01..-0.03 ms a token for the best.
    run bench-gdn 150 python benchmarks/bench_gdn.py --tp 1,4 --batch 1,8 --block-v 32,32o,16x2,16x2o,8x1,8x1o,32x2o,64,128x8,128x8o --samples 15 --no-compile
    run ab-op 200 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants base,op=MOELAB_GDN_ONE_PASS,op16w2=MOELAB_GDN_ONE_PASS+MOELAB_GDN_BLOCK_V:16+MOELAB_GDN_WARPS:2,op8w1=MOELAB_GDN_ONE_PASS+MOELAB_GDN_BLOCK_V:8+MOELAB_GDN_WARPS:1
    run gpu-tests 150 python -m pytest tests/kernels/test_gdn.py tests/bench/test_bench_gdn.py -q -p no:cacheprovider --tb=short -rf
    # The T=1 layer with no phase hand-over (benchmarks/probe_rows.py): predicted within 1-2 µs of a pure read of its
    # bytes (Qwen3-30B-A3B ~19-21 µs against the shipped 24.5) if the w2 column runs (32-64 B) read at full rate.
    run probe-rows 120 bash -c "cd benchmarks && python probe_rows.py --shapes qwen3,qwen35 --samples 15"
    ;;
  EL) # session 29: EK's probe_rows lost by 40 % (Qwen3-30B-A3B T=1 32.2-36.8 us against the shipped 22.8), its configs at
      # 237-255 registers on Triton 3.6, some spilling (1-2 programs an SM). Now configs of 39-121 registers. Which part:
      # each config's rows kernel alone (/alone), and alone reading w2's bytes as contiguous rows (/rows, the
      # transposed layout). Predicted: the low-register configs 23-27 us (from 32), /alone ~1-2 us under the layer
      # (the sum kernel), /rows 1-3 us under /alone if the 16-B column runs still cost. And bench_gdn with its
      # torch.compile column (the README's table).
    run probe-rows 120 bash -c "cd benchmarks && python probe_rows.py --shapes qwen3,qwen35 --configs 8x4c64k512,8x8c64k512,8x4c256k256,8x8c128k512,16x8c64k128,16x4p --diagnose --samples 10"
    run bench-gdn 150 python benchmarks/bench_gdn.py --tp 1 --batch 1,8 --block-v "" --samples 15
    # The pair kernel as two kernels with a phase 2 of fewer registers (ptxas, specialised: 127 at the default 32 × 256
    # tile, 48 at 16 × 256): predicted T=1 -0.5..-1.5 us (sweep_moe.py's comment). With it session 21's phase-1 tiles
    # that fit one wave at T=1 (--pairs-two-tiles, prepared then, never run).
    run sweep-two-p2 240 python benchmarks/sweep_moe.py --mode block --shapes qwen3,qwen35 --tokens 1,2,4 --pairs-two --pairs-two-p2 --pairs-two-tiles --samples 10
    ;;
  EM) # session 29 (prepared, not run): the Gated DeltaNet's conv inside its input projection's launch at decode
      # (linear(conv=...), MOELAB_GDN_CONV_IN_PROJ): one launch fewer a linear-attention layer, 30 a Qwen3.5 step. The
      # conv alone is 1.37 us at tp=1 batch 1 (bench-gdn-…T051000); in the H100 chain it advanced the step 2.6 us a
      # call. Predicted: batch 1 -0.03..-0.06 ms a token (2.30 ms), batch 8 -0.02..-0.05 (6.55); the same tokens
      # (the epilogue rounds as the conv kernel does).
      # Also the routing rounds as one int64 max each (MOELAB_ROUTE_PACKED): the router's last arriver at T=1 runs 8
      # rounds of two dependent warp reductions (packed: one deep, though Triton 3.6 emits 101 shuffles against 61).
      # Predicted: the router 4.1 -> 3.5-3.8 us alone, batch 1 -0.015..-0.03 ms a token; the same tokens.
    run gpu-tests 200 python -m pytest tests/kernels/test_linear.py tests/kernels/test_router.py tests/engine/test_generate.py -k "conv or gdn or packed" -q -p no:cacheprovider --tb=short -rf
    run router 60 python benchmarks/sweep_router.py --model qwen3.5-35b-a3b --tokens 1,8 --packed
    run in-proj-conv 90 python benchmarks/bench_gdn.py --ops gdn.in_proj+conv --tp 1,4 --batch 1,8 --block-v "" --no-compile --samples 15
    run ab-b1 200 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants base,ci=MOELAB_GDN_CONV_IN_PROJ,rp=MOELAB_ROUTE_PACKED
    run ab-b8 120 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 8 --rounds 2 --variants base,ci=MOELAB_GDN_CONV_IN_PROJ
    ;;
  EN) # session 30: phase 1 of the pair kernel persistent (P1_PROGS / MOELAB_PAIRS_P1_PER_SM), walking its blocks slot by
      # slot so slots become ready in turn and resident phase-2 programs stream ready slots' w2 during phase 1 (EG's
      # H100 trace: Qwen3.5 T=1 phase 2 advanced 10.8 us after phase 1's 18.4, for ~6 us of bytes). Predicted: Qwen3.5
      # T=1 -2..-5 us, Qwen3 T=1 -1..-3 against its one kernel; batch 1 -0.05..-0.2 ms a token. With it the conv in the
      # input projection at batch 1 once more (EM on the H100: -0.02 ms, inside the base's 1 % spread).
    run gpu-tests 150 python -m pytest tests/kernels/test_moe.py -k "pairs" -q -p no:cacheprovider --tb=short -rf
    run sweep-persist 200 python benchmarks/sweep_moe.py --mode block --shapes qwen3,qwen35 --tokens 1,2,4 --pairs-two --pairs-persist --samples 10
    run ab-b1 150 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants base,p1=MOELAB_PAIRS_P1_PER_SM:1,p2=MOELAB_PAIRS_P1_PER_SM:2,ci=MOELAB_GDN_CONV_IN_PROJ
    run ab-q3 120 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,two=MOELAB_PAIRS_TWO:1,p1=MOELAB_PAIRS_TWO:1+MOELAB_PAIRS_P1_PER_SM:1,p2=MOELAB_PAIRS_TWO:1+MOELAB_PAIRS_P1_PER_SM:2
    ;;
  EO) # session 30: the conv in the input projection adopted at one row (GDN_CONV_IN_PROJ_MAX_T; EN: 2.35 -> 2.32 ms). The
      # records the README shows for Qwen3.5 (predicted batch 1 ~2.27-2.30 ms, from 2.30) and the GPU tests of it.
      # First the router at 2-8 rows: EM's H100 sweep had Qwen3.5 T=8 at 8.47 us for the one-launch router (the engine's
      # form up to FUSED_ROUTER_MAX_T = 8, chosen at Qwen3-30B-A3B in session 9) against 5.93 for dense + route.
      # Predicted: Qwen3.5 batch 8 -0.04..-0.1 ms a token with MOELAB_FUSED_ROUTER_MAX_T:1 (6.55).
    run sweep-router 90 bash -c "python benchmarks/sweep_router.py --model qwen3.5-35b-a3b --tokens 2,4,8 --samples 10 && python benchmarks/sweep_router.py --model qwen3-30b-a3b --tokens 4,8 --samples 10"
    run ab-b8 120 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 8 --rounds 2 --variants base,fr1=MOELAB_FUSED_ROUTER_MAX_T:1
    run ab-b8-q3 120 python benchmarks/ab_chain.py --batch 8 --rounds 2 --variants base,fr1=MOELAB_FUSED_ROUTER_MAX_T:1
    run gpu-tests 200 python -m pytest tests/engine/test_generate.py -k "conv or gdn or qwen3_5" -q -p no:cacheprovider --tb=short -rf
    run decode-qwen35 150 python benchmarks/bench_decode.py --model qwen3.5-35b-a3b --batch 1,8 --rows moelab
    ;;
  EQ) # (session 31: still to run; its decode records now also carry the bitonic route and the shared expert's L2
      # prefetch, both measured on an H100 only.) session 30 (for an H200): the README's Qwen3.5 records after the conv in the input projection (batch 1) and the
      # router rule (one launch at one row only above 128 experts; batch 8 8.36 -> 8.32 ms on the H100), that rule's
      # A/B on the H200 (fr8 = the earlier 8 rows), and the tp=1 profile the README shows.
    run ab-b8 150 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 8 --rounds 3 --variants base,fr8=MOELAB_FUSED_ROUTER_MAX_T:8
    run decode-qwen35 150 python benchmarks/bench_decode.py --model qwen3.5-35b-a3b --batch 1,8 --rows moelab
    run profile-tp1 150 python -m moelab profile qwen3.5-35b-a3b --ctx 1024 --samples 10 --impl eager,moelab --save
    ;;
  ER) # session 30 (prepared; run in session 31 on an H100, see ES): the routing as one bitonic top-k of int64 keys (MOELAB_ROUTE_BITONIC), no K rounds.
      # PTX (Triton 3.6, the router's last arriver at T=1 on one warp): after the softmax the rounds are 8 reductions of
      # 5 dependent shuffle levels; the top-k 9 levels of 8 independent shuffles, its compare-swaps in-thread. Session
      # 29's packed rounds (one reduction a round, 64-bit) lost, so this is a guess: the router alone -0.2..-0.8 us at
      # T=1 (4.1-4.75), batch 1 -0.01..-0.04 ms a token; the same tokens (bitwise the same choices in the CPU tests).
    run gpu-tests 120 python -m pytest tests/kernels/test_router.py -k "bitonic or matches" -q -p no:cacheprovider --tb=short -rf
    run router 120 bash -c "python benchmarks/sweep_router.py --model qwen3.5-35b-a3b --tokens 1,8 --bitonic --samples 10 && python benchmarks/sweep_router.py --tokens 1 --bitonic --samples 10"
    run ab-b1 150 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,bt=MOELAB_ROUTE_BITONIC
    run ab-b1-35 150 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants base,bt=MOELAB_ROUTE_BITONIC
    ;;
  ES) # session 31, after ER (H100): the bitonic top-k cut route alone 3.50 -> 2.16 us (Qwen3.5, T=1) but the one-launch
      # router only 4.88 -> 4.79 (its last arriver routes on one warp), and the chains tied. dense + route was 4.82 with
      # the rounds, so with the bitonic route it should be about 3.5 us: guess -1.3 us a layer at T=1, -0.03..-0.05 ms a
      # token for Qwen3.5 (40 layers) with the one-launch router off (nofr = MOELAB_FUSED_ROUTER_MAX_T:0).
    run router 120 bash -c "python benchmarks/sweep_router.py --model qwen3.5-35b-a3b --tokens 1,8 --bitonic --samples 10 && python benchmarks/sweep_router.py --tokens 1,8 --bitonic --samples 10"
    run ab-b1-35 200 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants base,bt=MOELAB_ROUTE_BITONIC,btd=MOELAB_ROUTE_BITONIC+MOELAB_FUSED_ROUTER_MAX_T:0,d=MOELAB_FUSED_ROUTER_MAX_T:0
    run ab-b1 150 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,btd=MOELAB_ROUTE_BITONIC+MOELAB_FUSED_ROUTER_MAX_T:0
    run ab-b8-35 150 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 8 --rounds 3 --variants base,bt=MOELAB_ROUTE_BITONIC
    ;;
  ET) # session 31, after ES: the bitonic top-k on in the route kernel (ROUTE_BITONIC = 1), off in the router's last
      # arriver (ROUTER_BITONIC = 0). ES had Qwen3.5 batch 8 8.31 -> 8.24 ms with it (3 rounds); five rounds here, and
      # Qwen3-30B at batch 32 (route after the dense GEMV above 8 rows; route alone 2.38 -> 2.00 us at T=8): a guess of
      # -0.01..-0.02 ms a token. old = the K rounds everywhere.
    run ab-b8-35 200 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 8 --rounds 5 --variants base,old=MOELAB_ROUTE_BITONIC:0
    run ab-b32 200 python benchmarks/ab_chain.py --batch 32 --rounds 3 --variants base,old=MOELAB_ROUTE_BITONIC:0
    run gpu-tests 120 python -m pytest tests/kernels/test_router.py -k "bitonic or matches" -q -p no:cacheprovider --tb=short -rf -x
    ;;
  EU) # session 31: the shared expert's weights before the PDL wait (MOELAB_PAIRS_SHARED_PF: its phase-1 blocks bulk-
      # prefetch its gate/up rows and a share of its w2 into L2 while the router runs; MOELAB_PAIRS_SHARED_FIRST: those
      # blocks first in the grid). Predicted Qwen3.5 batch 1 -0.04..-0.08 ms a token (-1..-2 us a layer; 4.2 + 2.1 MB
      # at ~3 TB/s), the same tokens; PF costs 10 registers (80 -> 90, 6 -> 5 programs an SM; still one wave of 576).
    run gpu-tests 150 python -m pytest tests/kernels/test_moe.py -k "shared_first or two_launches or pairs_runs" -q -p no:cacheprovider --tb=short -rf -x
    run ab-b1-35 220 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants base,sf=MOELAB_PAIRS_SHARED_FIRST,pf=MOELAB_PAIRS_SHARED_PF,both=MOELAB_PAIRS_SHARED_FIRST+MOELAB_PAIRS_SHARED_PF
    ;;
  EW) # session 31 (lost; the switch is gone): the recurrence asks L2 for the output projection's weight (MOELAB_GDN_PREFETCH = the most rows;
      # 128 programs a 1/128 share each, behind their own loads). Predicted Qwen3.5 batch 1 -0.03..-0.09 ms a token.
    run gpu-tests 100 python -m pytest tests/kernels/test_gdn.py -k "prefetch or matches or pdl" -q -p no:cacheprovider --tb=short -rf -x
    run ab-b1-35 120 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants base,gp=MOELAB_GDN_PREFETCH:1
    run ab-b8-35 150 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 8 --rounds 2 --variants base,gp=MOELAB_GDN_PREFETCH:8
    ;;
  EX) # session 31, for the next device session (any Hopper; an H200 for the README): the shared expert's L2 prefetch
      # against its dry control (MOELAB_PAIRS_SHARED_PF_DRY: the same kernel, 90 registers, every size 0) and off
      # (MOELAB_PAIRS_SHARED_PF:0: 80 registers). On the H100 base 2.72 against off 2.83 ms; if dry ties base, the
      # registers (6 -> 5 phase-1 programs an SM) bought it, not the prefetch, and the comment must say so.
    run gpu-tests 120 python -m pytest tests/kernels/test_moe.py -k "shared_first or two_launches" -q -p no:cacheprovider --tb=short -rf -x
    run ab-b1-35 200 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 5 --variants base,dry=MOELAB_PAIRS_SHARED_PF_DRY,off=MOELAB_PAIRS_SHARED_PF:0
    ;;
  EY) # session 31 (prepared, not run): the next kernel's weight asked of L2 by the pair kernel's first blocks (one an
      # SM) while they wait for the router (MOELAB_PAIRS_NEXT_PF = MB, _LAST = with an evict-last policy). Predicted
      # Qwen3-30B-A3B batch 1 with 8 MB: -0.05..-0.1 ms a token if the lines outlive the MoE's evict-first stream,
      # nothing (or +0.01) if not; Qwen3.5 likewise with its input projection (50 MB) behind 30 of its 40 MoE layers.
      # Registers (Triton 3.6): Qwen3-30B's one kernel 230 -> 223, Qwen3.5's phase 1 90 -> 90: no occupancy change.
    run gpu-tests 150 python -m pytest tests/kernels/test_moe.py tests/engine/test_generate.py -k "next_weight or shared_first or match_transformers" -q -p no:cacheprovider --tb=short -rf -x
      # self = MOELAB_PAIRS_SELF_PF: each phase-1 block asks L2 for its own 64 KB gate/up tile as soon as it knows its
      # expert (session 7's one 64 KB register chunk lost 6 % on its 248 registers; this holds none: 222 and 88).
      # Predicted -0.02..-0.05 ms a token if phase 1 is bound by bytes in flight, a tie or a loss if by HBM itself.
    run ab-b1 240 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,n4=MOELAB_PAIRS_NEXT_PF:4,n8=MOELAB_PAIRS_NEXT_PF:8,n8l=MOELAB_PAIRS_NEXT_PF:8+MOELAB_PAIRS_NEXT_PF_LAST,self=MOELAB_PAIRS_SELF_PF
    run ab-b1-35 220 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants base,n4=MOELAB_PAIRS_NEXT_PF:4,n8l=MOELAB_PAIRS_NEXT_PF:8+MOELAB_PAIRS_NEXT_PF_LAST,self=MOELAB_PAIRS_SELF_PF
    ;;
  EZ) # session 32: every ab_chain record shows the base variant's first round 1.5-3 % faster than its later rounds
      # (2.791 then 2.832 ms four times), the other variants flat. Clocks after idle, or where a capture's buffers lie?
      # probe_round1 tells them apart (see its docstring); the reversed A/B says whether the first variant of round 1
      # is fast whatever it is. EY had n4 (the next weight's first 4 MB) -1.6 % at both models against the later
      # rounds of base, but Qwen3.5's base round 1 (2.694) beat n4 (2.705).
    run probe 240 python benchmarks/probe_round1.py --model qwen3.5-35b-a3b
    run ab-rev 200 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants n4=MOELAB_PAIRS_NEXT_PF:4,base
    ;;
  FA) # session 32, after EZ: the first capture is 2 % faster at steady clocks (2.698 against 2.750 ms, every run;
      # nvidia-smi: 1,980 MHz, 51 C in both), a re-capture slow whether the first graph is freed or kept, and n4 first
      # in round 1 ran 2.655 (2.705 after). Where the buffers lie, then? If so, captures after 1 MB shifts spread
      # between 2.70 and 2.75, and 8 MB allocated before the first capture may make it slow.
    run probe 200 python benchmarks/probe_round1.py --model qwen3.5-35b-a3b --pause 1 --shifts 10
    run probe-s8 150 python benchmarks/probe_round1.py --model qwen3.5-35b-a3b --pause 1 --shift-first 8
    ;;   # (the 1 MB shifts shared one 20 MB allocator segment, so only the first moved anything: see FG)
  FG) # session 32 (prepared): FA again with shifts that move the capture's segments (each (16 + 32 i) MB, a segment of
      # its own) and a 2 GB gap before the first capture; and a second Engine in the same process (bench_decode builds
      # one per batch: is batch 2's capture a "first"?). Predicted, if placement: the 2 GB gap makes the first capture
      # slow (~2.75) or some shifted re-captures fast (~2.70); if not placement, nothing moves.
    run probe 200 python benchmarks/probe_round1.py --model qwen3.5-35b-a3b --pause 1 --shifts 6
    run probe-gap 150 python benchmarks/probe_round1.py --model qwen3.5-35b-a3b --pause 1 --shift-first 2048
    run decode-two 150 python benchmarks/bench_decode.py --model qwen3.5-35b-a3b --batch 1,1 --rows moelab --no-save
    ;;
  FB) # session 32, after FA: not where the buffers lie, as far as FA could move them (ten 1 MB shifts all 2.747-2.753 ms; 8 MB before the first
      # capture still 2.700): the first capture of a process is fast, every later one slow. Which kernels differ?
      # The same trace of the first capture and of a re-capture. (It ran with a --dump-graph option too, which wrote
      # no file: CUDAGraph.debug_dump under torch 2.11; the option is gone.)
    run trace-first 150 python benchmarks/trace_decode.py --model qwen3.5-35b-a3b --ctx 128 --steps 6
    run trace-recap 150 python benchmarks/trace_decode.py --model qwen3.5-35b-a3b --ctx 128 --steps 6 --recapture
    ;;
  FC) # session 32, after EX/EY/EZ: NEXT_PF on at 4 MB (the default), SELF_PF and the evict-last form removed. The GPU
      # tests of the pair kernel and the engine, and the batch-1 decode records of both models (first captures: the
      # numbers a user of `moelab decode` gets; EZ/FA: a re-capture in the same process runs ~2 % slower).
      # Predicted: Qwen3-30B-A3B 2.70 -> ~2.66 ms, Qwen3.5 2.70 -> ~2.66 (H100, first captures).
    run gpu-tests 200 python -m pytest tests/kernels/test_moe.py tests/engine/test_generate.py -k "next_weight or shared_first or pairs or match_transformers or graph" -q -p no:cacheprovider --tb=short -rf
    run decode 150 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run decode-qwen35 150 python benchmarks/bench_decode.py --model qwen3.5-35b-a3b --batch 1 --rows moelab
    ;;
  FD) # session 32, after FC: NEXT_PF off against on, each the first capture of its own process (EZ: a re-capture runs
      # ~2 % slower, so A/Bs in one process compare re-captures). Records carry the switch (env.moelab_env).
    for m in qwen3-30b-a3b qwen3.5-35b-a3b; do for v in 0 4; do
      MOELAB_PAIRS_NEXT_PF=$v run decode-$m-$v 120 python benchmarks/bench_decode.py --model $m --batch 1 --rows moelab
    done; done
    ;;
  FE) # session 32 (ran at 4bd5c8b, when the default was 1; since then it is 8, so n2 and n8 time the default): the next
      # layer's weight asked of L2 above T=1 (MOELAB_PAIRS_NEXT_PF_MAX_T). From T=2 phase 1
      # is a kernel of its own whose blocks wait for the routing (at batch 8 Qwen3.5 routes with dense + route, two
      # launches, so the wait is longer). Predicted: Qwen3.5 batch 2 -0.5..-1.5 %, batch 8 -0.3..-1 %, if those blocks
      # idle as T=1's do; a loss like the shared prefetch's at T=2 (3.64 -> 3.68 ms) if they are on the critical path.
    run ab-b2-35 120 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 2 --rounds 3 --variants base,n2=MOELAB_PAIRS_NEXT_PF_MAX_T:2
    run ab-b8-35 150 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 8 --rounds 3 --variants base,n8=MOELAB_PAIRS_NEXT_PF_MAX_T:8
    ;;
  FF) # session 32 (prepared): (1) the census kernel asking L2 for the next layer's weight while it waits for the router
      # (MOELAB_CENSUS_NEXT_PF = MB, off; Qwen3-30B-A3B batches 8 and 16 run it in the chain), with its dry control
      # (the NEXT_PF form compiles to 64 registers, not 67: 8 programs an SM, not 7). Predicted batch 8 -0.3..-1 %
      # (Qwen3.5's pair kernel at batch 8: -0.4 %), dry a tie. (2) the pair kernel's prefetch above T=1 at the other
      # width: Qwen3-30B-A3B batches 2 and 4 against MOELAB_PAIRS_NEXT_PF_MAX_T:1 (adopted up to 8 on Qwen3.5 alone).
    run gpu-tests 150 python -m pytest tests/kernels/test_moe.py -k "census_next or next_weight or launcher" -q -p no:cacheprovider --tb=short -rf
    run ab-b8 200 python benchmarks/ab_chain.py --batch 8 --rounds 3 --variants base,c4=MOELAB_CENSUS_NEXT_PF:4,dry=MOELAB_CENSUS_NEXT_PF:4+MOELAB_CENSUS_NEXT_PF_DRY
    run ab-b2 120 python benchmarks/ab_chain.py --batch 2 --rounds 3 --variants base,t1=MOELAB_PAIRS_NEXT_PF_MAX_T:1
    run ab-b4 120 python benchmarks/ab_chain.py --batch 4 --rounds 3 --variants base,t1=MOELAB_PAIRS_NEXT_PF_MAX_T:1
    ;;
  FH) # session 33 (prepared): phase 2's programs asking L2 for more of the next layer's first weight as they end
      # (MOELAB_PAIRS_TAIL_PF = MB after NEXT_PF's 4, off), with its dry control (227 registers against 223: still 2
      # programs an SM). Predicted batch 1 -1..-3 % if the kernel's tail has HBM to spare, a loss if it delays the
      # last slot's w2.
    run gpu-tests 100 python -m pytest tests/kernels/test_moe.py -k "tail" -q -p no:cacheprovider --tb=short -rf
    run ab-b1 200 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,tp8=MOELAB_PAIRS_TAIL_PF:8,tp16=MOELAB_PAIRS_TAIL_PF:16,dry=MOELAB_PAIRS_TAIL_PF:8+MOELAB_PAIRS_TAIL_PF_DRY
    run ab-35 200 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants base,tp8=MOELAB_PAIRS_TAIL_PF:8,tp16=MOELAB_PAIRS_TAIL_PF:16
    ;;
  FI) # session 33: FH and FF's census A/B in one call (the device was scarce): the priorities first, the tests last.
    run ab-b1 170 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,tp8=MOELAB_PAIRS_TAIL_PF:8,tp16=MOELAB_PAIRS_TAIL_PF:16,dry=MOELAB_PAIRS_TAIL_PF:8+MOELAB_PAIRS_TAIL_PF_DRY
    run ab-35 130 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants base,tp8=MOELAB_PAIRS_TAIL_PF:8,tp16=MOELAB_PAIRS_TAIL_PF:16
    run ab-b8 150 python benchmarks/ab_chain.py --batch 8 --rounds 3 --variants base,c4=MOELAB_CENSUS_NEXT_PF:4,dry=MOELAB_CENSUS_NEXT_PF:4+MOELAB_CENSUS_NEXT_PF_DRY
    run gpu-tests 100 python -m pytest tests/kernels/test_moe.py -k "tail or census_next or next_weight or launcher" -q -p no:cacheprovider --tb=short -rf
    ;;
  FJ) # session 33 (prepared): the re-capture question with an eager prefill between the capture and the timing, as
      # engine.run.measure_run does (bench_decode's two engines ran at the re-captures' 2.73 ms where the probe's first
      # capture gave 2.68, session 33). Predicted, if the prefill is it: "after a prefill" at ~2.73, the first capture
      # and the pause at ~2.68.
    run probe 200 python benchmarks/probe_round1.py --model qwen3.5-35b-a3b --pause 1
    ;;
  FK) # session 34 (prepared): the linear releasing the next kernel as each program starts, not after its sum
      # (MOELAB_LINEAR_EARLY_RELEASE; never A/B'd since session 6 put the release after the loop). At batch 1 the
      # attention split kernel advances the step 8.3 us a layer and starts only as qkv ends (its duration 8.58 against
      # that advance, trace-decode-...T143150); Qwen3.5's recurrence likewise (H100: 5.39 against 5.40). Predicted
      # batch 1 -1..-3 % (the split's launch and first tile under qkv; the norm after o likewise), batch 8 a tie or a
      # loss (the crowding session 6's early releases paid there). With it, Qwen3.5's recurrence reading its state
      # before the wait (MOELAB_GDN_STATE_EARLY:1): predicted -0.5..-1 % more at batch 1, a tie without the release.
    run ab-b1 130 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,er=MOELAB_LINEAR_EARLY_RELEASE
    run ab-35 160 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants base,er=MOELAB_LINEAR_EARLY_RELEASE,se=MOELAB_GDN_STATE_EARLY,erse=MOELAB_LINEAR_EARLY_RELEASE+MOELAB_GDN_STATE_EARLY
    run ab-b8 170 python benchmarks/ab_chain.py --batch 8 --rounds 2 --variants base,er=MOELAB_LINEAR_EARLY_RELEASE
    run gpu-tests 100 env MOELAB_LINEAR_EARLY_RELEASE=1 MOELAB_GDN_STATE_EARLY=1 python -m pytest tests/kernels/test_linear.py tests/kernels/test_gdn.py -q -p no:cacheprovider --tb=short -rf
    ;;
  FL) # session 34, after FK (H100: Qwen3-30B-A3B batch 1 2.82 -> 2.86 ms, Qwen3.5 2.71 -> 2.63, with the state early
      # 2.61; batch 8 9.73 -> 9.79): which link gains and which loses. MOELAB_LINEAR_EARLY_RELEASE 1 every linear, 2 the
      # conv form only (Qwen3.5's input projection -> the recurrence), 3 K > N only (o -> the norm), 4 K <= N (qkv ->
      # the split). Predicted: 2 keeps Qwen3.5's gain; one of 3 and 4 carries Qwen3-30B-A3B's loss.
    run ab-b1 110 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,e1=MOELAB_LINEAR_EARLY_RELEASE:1,e3=MOELAB_LINEAR_EARLY_RELEASE:3,e4=MOELAB_LINEAR_EARLY_RELEASE:4
    run ab-35 130 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants base,e1se=MOELAB_LINEAR_EARLY_RELEASE:1+MOELAB_GDN_STATE_EARLY,e2se=MOELAB_LINEAR_EARLY_RELEASE:2+MOELAB_GDN_STATE_EARLY,e2=MOELAB_LINEAR_EARLY_RELEASE:2
    ;;
  FM) # session 34, after FL: the adopted rule (o and the Gated DeltaNet projections release early at one row, qkv not;
      # the recurrence's state before its wait at one row) against both off. Predicted: Qwen3-30B-A3B -0.4 % (FL's o
      # alone), Qwen3.5 -1.5..-3 %.
    run ab-b1 80 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,off=MOELAB_EARLY_RELEASE_MAX_T:0
    run ab-35 90 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants base,off=MOELAB_EARLY_RELEASE_MAX_T:0+MOELAB_GDN_STATE_EARLY_MAX_T:0
    run gpu-tests 90 python -m pytest tests/engine/test_generate.py tests/kernels/test_gdn.py -q -p no:cacheprovider --tb=short -rf -x
    ;;
  FN) # session 34 (prepared): the early release and the recurrence's state before its wait above one row (adopted at
      # one row only: FM, Qwen3.5 batch 1 -3.7 %). FK's every-linear form (qkv included) lost 0.6 % at Qwen3-30B-A3B
      # batch 8. Predicted: Qwen3.5 batch 2 -1..-3 %, batch 8 -0.5..+0.5 %; Qwen3-30B-A3B a tie at both.
    run ab-35-b2 110 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 2 --rounds 3 --variants base,x=MOELAB_EARLY_RELEASE_MAX_T:8,xs=MOELAB_EARLY_RELEASE_MAX_T:8+MOELAB_GDN_STATE_EARLY_MAX_T:8
    run ab-35-b8 150 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 8 --rounds 3 --variants base,x=MOELAB_EARLY_RELEASE_MAX_T:8,xs=MOELAB_EARLY_RELEASE_MAX_T:8+MOELAB_GDN_STATE_EARLY_MAX_T:8
    run ab-b8 150 python benchmarks/ab_chain.py --batch 8 --rounds 3 --variants base,x=MOELAB_EARLY_RELEASE_MAX_T:8
    run gpu-tests 120 python -m pytest tests/engine/test_generate.py -q -p no:cacheprovider --tb=short -rf
    ;;
  FO) # session 34 (prepared): why qkv releasing the attention split early loses (FL: Qwen3-30B-A3B batch 1 2.85 ->
      # 2.90 ms) when every qkv program is resident at the release. The trace says which kernel's advance grows: if
      # the split's, its early residency costs it; if the o projection's or the experts', the split's CTAs crowd them.
    run trace-base 120 python benchmarks/trace_decode.py --batch 1 --ctx 256
    run trace-qkv 120 env MOELAB_QKV_EARLY_RELEASE=1 python benchmarks/trace_decode.py --batch 1 --ctx 256
    run ab-b1 90 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,q=MOELAB_QKV_EARLY_RELEASE
    ;;
  FR) # session 35 (for an H200, ~7 min): the README's decode records with session 34's early release (batch 1 only;
      # predicted from the H100's A/B: Qwen3.5 batch 1 -3..-4 %, Qwen3-30B-A3B a tie, batches 8 and 32 unchanged).
      # bench_decode measures the ceilings itself when none are cached.
    run decode-30b 250 python benchmarks/bench_decode.py --batch 1,8,32 --rows moelab
    run decode-qwen35 170 python benchmarks/bench_decode.py --model qwen3.5-35b-a3b --batch 1,8 --rows moelab
    ;;
  FS) # session 35 (ran, H100): batch 1 records carrying session 34's early release; that release and the state read
      # early above one row on Qwen3.5 batch 2 (predicted -1..-3 %); the engine's GPU tests (the early-release test's
      # fixed form had not run on a GPU). (Batch 8's A/Bs ran by hand after it: ab-b8-…T1635.log.)
    run decode-30b 70 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run decode-qwen35 70 python benchmarks/bench_decode.py --model qwen3.5-35b-a3b --batch 1 --rows moelab
    run ab-35-b2 110 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 2 --rounds 3 --variants base,x=MOELAB_EARLY_RELEASE_MAX_T:8,xs=MOELAB_EARLY_RELEASE_MAX_T:8+MOELAB_GDN_STATE_EARLY_MAX_T:8
    run gpu-tests 110 python -m pytest tests/engine/test_generate.py -q -p no:cacheprovider --tb=short -rf
    ;;
  FT) # session 35 (prepared, any Hopper, ~6 min): why qkv's early release loses. FO's traces (h100/trace-decode-…T163256
      # against …T163305) put it in the attention split (advance 9.3 -> 11.1 us a layer, the experts unchanged). Guess:
      # released early, the split's 24 programs are placed as qkv's programs leave, two to an SM (67.6 KB of shared
      # memory and 242 registers each allow two), where a late launch spreads them one an SM. At 5 stages a program
      # holds 133 KB, one an SM. Predicted if so: q5 at or below base (-0..-1.5 %), s5 = base; if not, q5 = q.
      # m4: at most 4 splits, so the split kernel merges them and the combine launch goes (2.1 us of advance a layer on
      # the H100, FO); predicted -0.5..+0.5 % (fewer, longer programs and the last arriver's merge on the path).
    run ab-b1 240 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,q=MOELAB_QKV_EARLY_RELEASE,q5=MOELAB_QKV_EARLY_RELEASE+MOELAB_ATTN_SPLIT_STAGES:5,s5=MOELAB_ATTN_SPLIT_STAGES:5,m4=MOELAB_ATTN_MAX_SPLITS:4
    run trace-q5 100 env MOELAB_QKV_EARLY_RELEASE=1 MOELAB_ATTN_SPLIT_STAGES=5 python benchmarks/trace_decode.py --batch 1 --ctx 256
    # The early release at two rows (Qwen3.5 batch 2 gained 0.4 % in FS; Qwen3-30B-A3B batch 2 unmeasured).
    run ab-b2 120 python benchmarks/ab_chain.py --batch 2 --rounds 3 --variants base,x2=MOELAB_EARLY_RELEASE_MAX_T:2
    ;;
  FU) # session 35 (prepared, any Hopper, ~3 min): is FS's Qwen3.5 batch 1 record (2.73 ms, against 2.68 in session 32
      # and session 34's A/B at 2.61) the machine or the code? The record and the early release's A/B on one machine.
    run decode-qwen35 80 python benchmarks/bench_decode.py --model qwen3.5-35b-a3b --batch 1 --rows moelab
    run ab-35-b1 100 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants base,off=MOELAB_EARLY_RELEASE_MAX_T:0+MOELAB_GDN_STATE_EARLY_MAX_T:0
    ;;
  FV) # session 37 (any Hopper, ~5 min): q5 (qkv released as it starts + the split at 5 stages; FT, H100: -0.3..-0.4 %
      # at Qwen3-30B-A3B batch 1, context 392) beyond that one point. Qwen3.5's 10 full-attention layers take the
      # release too (predicted -0..-0.5 %). At 4k the split takes 64-key tiles and 66 splits, 264 programs: two an SM
      # at 3 stages (70 KB), but at 5 stages (133 KB) one an SM, so two waves (predicted: q5 loses there, by 1-3 %).
      # At 16k it takes 128-key tiles and 33 splits, 132 programs already one an SM (135 KB), and 5 stages are capped to
      # 4 (201 KB): if placement is the whole story, q (the release alone) ties or gains there. bench_attention times
      # the split alone at 3 and 4 stages.
    run ab-35-b1 150 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants base,q5=MOELAB_QKV_EARLY_RELEASE+MOELAB_ATTN_SPLIT_STAGES:5
    run ab-30-b1 120 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,q5=MOELAB_QKV_EARLY_RELEASE+MOELAB_ATTN_SPLIT_STAGES:5
    run ab-30-4k 120 python benchmarks/ab_chain.py --batch 1 --prompt-len 4096 --new-tokens 128 --rounds 2 --variants base,q=MOELAB_QKV_EARLY_RELEASE,q5=MOELAB_QKV_EARLY_RELEASE+MOELAB_ATTN_SPLIT_STAGES:5
    run ab-30-16k 150 python benchmarks/ab_chain.py --batch 1 --prompt-len 16000 --new-tokens 128 --rounds 2 --variants base,q=MOELAB_QKV_EARLY_RELEASE,q5=MOELAB_QKV_EARLY_RELEASE+MOELAB_ATTN_SPLIT_STAGES:5
    run attn-stages 100 python benchmarks/bench_attention.py --shapes 1x1024,1x4096,1x16384 --no-compile --sweep --warps 4 --stages 3,4 --samples 15
    ;;
  FZ) # session 39, after GA and GB (~6 min): context 2k (128 programs: 5 stages, one an SM), Qwen3-30B-A3B
      # at 392, 16k, and probe_round1 on Qwen3.5 (whether its record gap is the re-capture effect).
    run ab-30-2k 90 python benchmarks/ab_chain.py --batch 1 --prompt-len 1912 --new-tokens 128 --rounds 3 --variants base,off=MOELAB_QKV_EARLY_RELEASE:0
    run ab-30-b1 110 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,off=MOELAB_QKV_EARLY_RELEASE:0
    run ab-30-16k 100 python benchmarks/ab_chain.py --batch 1 --prompt-len 16000 --new-tokens 128 --rounds 2 --variants base,off=MOELAB_QKV_EARLY_RELEASE:0
    run probe-35 120 python benchmarks/probe_round1.py --pause 5
    ;;
  GA) # session 39 (~5 min): the committed default's GPU tests (qkv's early release with `early_release_stages`); the
      # one context class never measured (3k: 192 programs, the release alone at 3 stages, some SMs taking two:
      # predicted a tie or a loss, as FW's comment said; a loss beyond the spread narrows `early_release_stages`);
      # issue 3's shard line as the issue states it (E=256, H=2048, I=128, k=8, no shared expert: predicted
      # 10.5-11.5 µs at T=1; every record since session 1's 15.9 µs carried the shared expert, 12.0 µs). The shard
      # is the call's first step to need the ceilings (~1 minute more to measure them).
    run gpu-tests 120 python -m pytest tests/kernels/test_attention.py tests/engine/test_generate.py -k "gpu or early_release or graph" -q -p no:cacheprovider --tb=short -rf
    run ab-30-3k 90 python benchmarks/ab_chain.py --batch 1 --prompt-len 2936 --new-tokens 128 --rounds 3 --variants base,off=MOELAB_QKV_EARLY_RELEASE:0
    run bench-shard 210 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --no-shared --tokens 1,2,4,8,16 --samples 10 --save
    ;;
  GB) # session 39 (~4 min): Qwen3.5's A/B at 392, then both batch-1 records (FR's Qwen3.5 record sat 3.7 % above
      # its A/B's base: does that repeat beside this one?).
    run ab-35-b1 100 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 2 --variants base,off=MOELAB_QKV_EARLY_RELEASE:0
    run decode-qwen35 70 python benchmarks/bench_decode.py --model qwen3.5-35b-a3b --batch 1 --rows moelab
    run decode-30b 70 python benchmarks/bench_decode.py --batch 1 --rows moelab
    ;;
  GC) # session 41, after FZ's probe on the H200 (Qwen3.5: first capture 2.28 ms, every re-capture 2.16; the H100's
      # sign is the other way, 2.65 against 2.71): is the odd graph the process's first CUDA graph (--before graph: a
      # one-kernel graph captured first; predicted, if so, a first capture at 2.16), or the capture whose warm-up
      # compiles every kernel (--before eager: 4 eager decode steps first; then 2.16)? Then Qwen3-30B-A3B, control and
      # the likelier of the two. Between them, where the tp=4 shard's 10.6 µs go (GA: T=1 with routing, no shared
      # expert): the route kernel's and the pair kernel's advances, and the pair kernel's phases.
    run probe-35 85 python benchmarks/probe_round1.py --pause 1
    run probe-35-graph 85 python benchmarks/probe_round1.py --pause 1 --before graph
    run probe-35-eager 85 python benchmarks/probe_round1.py --pause 1 --before eager
    run trace-shard 60 python benchmarks/trace_moe.py --shape shard --tokens 1,2 --calls 8
    run timeline-shard 60 python benchmarks/probe_timeline.py --attention '' --moe 1 --moe-shape shard
    run probe-30 85 python benchmarks/probe_round1.py --pause 1 --model qwen3-30b-a3b
    run probe-30-graph 85 python benchmarks/probe_round1.py --pause 1 --model qwen3-30b-a3b --before graph
    ;;
  GD) # session 41: GC without its Qwen3-30B-A3B probes (~5 minutes), for a budget too small for all of GC.
    run probe-35 85 python benchmarks/probe_round1.py --pause 1
    run probe-35-graph 85 python benchmarks/probe_round1.py --pause 1 --before graph
    run probe-35-eager 85 python benchmarks/probe_round1.py --pause 1 --before eager
    run trace-shard 60 python benchmarks/trace_moe.py --shape shard --tokens 1,2 --calls 8
    run timeline-shard 60 python benchmarks/probe_timeline.py --attention '' --moe 1 --moe-shape shard
    ;;
  GE) # session 41: GD's three probes alone (~3.5 minutes), for what is left of the budget.
    run probe-35 80 python benchmarks/probe_round1.py --pause 1
    run probe-35-graph 80 python benchmarks/probe_round1.py --pause 1 --before graph
    run probe-35-eager 80 python benchmarks/probe_round1.py --pause 1 --before eager
    ;;
  GF) # session 41: the control and the one-kernel graph first (~2.3 minutes), the least that answers GC's question.
    run probe-35 75 python benchmarks/probe_round1.py --pause 1
    run probe-35-graph 75 python benchmarks/probe_round1.py --pause 1 --before graph
    ;;
  GL) # session 43: GK (which never ran: no machine came) with DIRECT in column chunks for wide experts first. The MoE GPU
      # tests before any timing (the DIRECT phase 2 was rewritten: chunks of BLOCK_C columns), then the wide sweep
      # (Qwen3-30B-A3B, its tp=4 shard, Qwen3.5; predicted Qwen3-30B-A3B T=1 −1..−2 µs of 24.4), then GK's A/Bs and
      # the shard's record. ~8 minutes.
    run gpu-tests 150 python -m pytest tests/kernels/test_moe.py tests/kernels/test_moe_custom_op.py -q -p no:cacheprovider --tb=short -rf
    run sweep-wide 150 python benchmarks/sweep_moe.py --mode block --shapes qwen3,shard30,qwen35 --tokens 1 --direct --samples 15
    run sweep-direct 110 python benchmarks/sweep_moe.py --mode block --shapes shard,shard35 --tokens 1 --direct --samples 15
    run bench-shard 80 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --no-shared --tokens 1,2,4 --samples 10 --save
    ;;
  GN) # session 43: GL cut to ~5 minutes for a short budget (the device time went to failed starts): the DIRECT tests
      # on the GPU, the wide sweep without Qwen3.5, GK's sweeps, the shard's record.
    run gpu-tests 90 python -m pytest tests/kernels/test_moe.py -q -p no:cacheprovider --tb=short -rf -k "direct or pairs or route"
    run sweep-wide 100 python benchmarks/sweep_moe.py --mode block --shapes qwen3,shard30 --tokens 1 --direct --samples 15
    run sweep-direct 110 python benchmarks/sweep_moe.py --mode block --shapes shard,shard35 --tokens 1 --direct --samples 15
    run bench-shard 80 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --no-shared --tokens 1,2,4 --samples 10 --save
    ;;
  GO) # session 44: for one machine start in a scarce pool, what GN and GM ask in one ~9-minute call, in the order of
      # what matters if it is cut short: the DIRECT GPU tests (the default at the shard was rewritten and has not run
      # on a GPU), the shard's record, the wide sweep, the batch-1 chain A/B at Qwen3-30B-A3B's width, GK's sweeps.
    run gpu-tests 90 python -m pytest tests/kernels/test_moe.py -q -p no:cacheprovider --tb=short -rf -k "direct or pairs or route"
    run bench-shard 70 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --no-shared --tokens 1,2,4 --samples 10 --save
    run sweep-wide 100 python benchmarks/sweep_moe.py --mode block --shapes qwen3,shard30 --tokens 1 --direct --samples 15
    run ab-30-dw 120 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,dw=MOELAB_PAIRS_DIRECT_MAX_I:768
    run sweep-direct 110 python benchmarks/sweep_moe.py --mode block --shapes shard,shard35 --tokens 1 --direct --samples 15
    ;;
  GP) # session 44: GO's sweep won for ROUTE_IN and DIRECT with the shared expert at the shard (H100), now the default.
      # The GPU tests of those paths, then issue 3's shard line as the issue states it (without and with Qwen3.5's
      # shared expert; predicted 10.6 -> ~10.1 and ~12.1 -> ~11.3 µs on this H100). ~2.5 minutes.
    run gpu-tests 90 python -m pytest tests/kernels/test_moe.py tests/kernels/test_moe_custom_op.py -q -p no:cacheprovider --tb=short -rf -k "direct or route or block"
    run bench-shard 70 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --no-shared --tokens 1,2,4 --samples 10 --save
    run bench-shard35 70 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --tokens 1,2,4 --samples 10 --save
    ;;
  GX) # session 48: stage GW on an H200 (the per-op profile of Qwen3-30B-A3B on today's code; predictions in GW), then
      # the full bench moe sweep of Qwen3-30B-A3B on today's code (the README's table is session 26's, 133bc7a:
      # T=1 24.6 µs 67.3 %, T=2..16 77.9-86.2 %, T=32 89.1, T=64 88.6, T=256 83.6; predicted the same within 1-2 %:
      # nothing on the Qwen3-30B-A3B path changed since but the shard's routing and phase 2). ~6 minutes.
      # Ran on an H100 (session 48, h100/gpu-session-GX-…T0046.log: T=1 77.5 %, T=16-64 90.8-92.5 %; the profile's
      # experts unit 35.0 µs against bench moe's 30.2 with routing). Since then the kernels read int64 ids without a
      # cast (session 48): the probe first (the unit with int64 and int32 ids, 8 sets, moe_block; a tie of the first
      # two predicted, the unit −1..−4 µs against session 48's profile).
    run probe-experts 120 python benchmarks/probe_profile_experts.py --samples 15
    run hw 90 python -m moelab hw --save
    run profile 150 python -m moelab profile qwen3-30b-a3b --batch 1 --ctx 1024 --samples 10 --impl eager,compile,moelab --save
    run bench-moe 200 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    run trace 60 python benchmarks/trace_decode.py --batch 1 --ctx 256
    ;;
  GW) # session 47: the per-op profile and the step's trace on today's code (the H200's profile of Qwen3-30B-A3B is
      # session 22's, d986ff1: per-op Σ 2.57 ms, 52 % of the step floor, MoE 26.5 µs a layer; its trace of 2026-12-04).
      # Predicted: the MoE op ~24.6 µs (bench-moe-…T005314), Σ 2.57 -> ~2.47 ms (~54 %), the chained graph 2.40 ->
      # ~2.33 ms. ~3 minutes. Ran on an H100 (session 47, h100/gpu-session-GW-…T2317.log), so the H200 prediction is
      # untested: per-op Σ 3.06 ms, 63 % of the H100's 1.92 ms floor, the chained graph 2.84 ms; the MoE op 31.6 µs a
      # layer (74.3 %). The traces: h100/trace-decode-…T231918 (Qwen3-30B-A3B), …T231950 (Qwen3.5-35B-A3B).
    run hw 90 python -m moelab hw --save
    run profile 150 python -m moelab profile qwen3-30b-a3b --batch 1 --ctx 1024 --samples 10 --impl eager,compile,moelab --save
    run trace 60 python benchmarks/trace_decode.py --batch 1 --ctx 256
    run trace-qwen35 60 python benchmarks/trace_decode.py --model qwen3.5-35b-a3b --ctx 128
    ;;
  GV) # session 46: where routing inside costs the shard's phase 1 its ~1.5 µs (H200, probe-timeline-…T195926): phase 1
      # now stamps the moment it knows its expert (p1_id_p50), routed from the logits or loaded. The GPU tests (bf16),
      # the timelines with the ids ready, routing inside, and routing in phase 1 only (ROUTE_P1: phase 2 reads program
      # 0's ids after its flag); the block sweep of ROUTE_P1, then issue 3's shard line with it. Predicted the shard T=1
      # on the H200 8.71 -> 8.2-8.4 µs, a tie if one program's latency, not the SM's shared issue, is the cost. ~3 minutes.
      # Ran on an H100 (session 47, h100/gpu-session-GV-…T2236.log): ROUTE_P1 lost (the sweep 9.89 -> 10.15 µs, the
      # bench 9.88 -> 10.2); phase 1 knows its expert 0.25 µs in with the ids ready, 1.75 routing, 1.5 with ROUTE_P1.
      # ROUTE_P1 and sweep_moe's --route-p1 are gone (moe_pairs.py says why).
    run gpu-tests 120 python -m pytest tests/kernels/test_probe.py tests/kernels/test_moe.py -k "probe or routing_inside or direct" -q -p no:cacheprovider --tb=short -rf
    run timeline-direct 60 python benchmarks/probe_timeline.py --attention '' --moe 1 --moe-shape shard --moe-direct 16
    run timeline-route-in 60 python benchmarks/probe_timeline.py --attention '' --moe 1 --moe-shape shard --moe-direct 16 --moe-route-in
    MOELAB_PAIRS_ROUTE_P1=1 run timeline-route-p1 60 python benchmarks/probe_timeline.py --attention '' --moe 1 --moe-shape shard --moe-direct 16 --moe-route-in
    run sweep-route-p1 100 python benchmarks/sweep_moe.py --mode block --shapes shard --tokens 1 --route-p1 --samples 15
    run bench-shard 70 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --no-shared --tokens 1 --samples 10 --save
    MOELAB_PAIRS_ROUTE_P1=1 run bench-shard-p1 70 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --no-shared --tokens 1 --samples 10 --save
    ;;
  GU) # session 46: the renormalised softmax routed as the top-k of the logits (route.ROUTE_LOGIT_ORDER: no max,
      # exponentials or sum over all E; the shard's routing inside the pair kernel 31 -> 25 bar.sync, sm_90). Its GPU
      # tests (bf16), issue 3's shard line without and with it (predicted -0.2..-0.6 us on the H100's 9.97), and batch 1
      # in the chain (the router's last arriver; predicted a tie, -0.1..-0.4 %). ~4 minutes. Ran on an H100 after GT
      # (gpu-session-GT-GU-…T1935.log): the shard 9.90 -> 9.86 us, batch 1 2.80 -> 2.79 ms (a tie, the tokens not the
      # same); the switch is gone (route.py says why).
    run gpu-tests 100 python -m pytest tests/kernels/test_moe.py tests/kernels/test_router.py -k "logit or ranked or routing_inside" -q -p no:cacheprovider --tb=short -rf
    run bench-shard 70 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --no-shared --tokens 1 --samples 10 --save
    MOELAB_ROUTE_LOGIT_ORDER=1 run bench-shard-lo 70 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --no-shared --tokens 1 --samples 10 --save
    run ab-30-lo 120 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,lo=MOELAB_ROUTE_LOGIT_ORDER:1
    ;;
  GT) # session 45: GS lost (the shard 9.95 -> 11.57 µs with WORDS), its words read by scalar volatile loads. The same
      # with the words' first read as the activations' is (`.cg` vector loads), volatile only while one is missing: is it
      # the loads or the handover? ~2 minutes. Ran on an H100 (session 46, gpu-session-GT-GU-…T1935.log): 9.87 -> 10.00
      # µs routing inside, 10.56 -> 10.60 after the route kernel: lost, and WORDS is gone (moe_pairs.py says why).
    run gpu-tests 100 python -m pytest tests/kernels/test_moe.py -k "fence" -q -p no:cacheprovider --tb=short -rf
    run sweep-words 100 python benchmarks/sweep_moe.py --mode block --shapes shard --tokens 1 --words --samples 15
    ;;
  GS) # session 45: phase 1's release without a fence at the shard (moe_pairs.PAIRS_WORDS: the activations as words that
      # say they were written, the count a hint; GR's timeline put the fence at ~0.75 µs of every phase-1 program). Its
      # GPU tests (bf16), the block sweep (routing inside and after the route kernel), issue 3's shard line as shipped
      # and with it. Predicted the shard T=1 −0.4..−0.8 µs. ~3 minutes.
    run gpu-tests 150 python -m pytest tests/kernels/test_moe.py -k "fence or direct or route" -q -p no:cacheprovider --tb=short -rf
    run sweep-words 100 python benchmarks/sweep_moe.py --mode block --shapes shard --tokens 1 --words --samples 15
    run bench-shard 70 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --no-shared --tokens 1 --samples 10 --save
    MOELAB_PAIRS_WORDS=1 run bench-shard-words 70 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --no-shared --tokens 1 --samples 10 --save
    ;;
  GR) # session 45: the mailbox (moe_pairs.MBOX: phase 1's activations as self-flagging words phase 2 polls; no release
      # fence, no counter, no load after the wait; in the partials form a column chunk at a time). Its GPU tests (bf16),
      # the block sweep at the shard with and without its shared expert (routing inside and after the route kernel,
      # 16- and 8-output blocks), then Qwen3-30B-A3B T=1,2,4 and Qwen3.5 T=1 (the partials form), the shard's timeline
      # with and without it, batch 1 in the chain, and issue 3's shard line as shipped and with it. Predicted the shard
      # T=1 −0.6..−1.2 µs, Qwen3-30B-A3B T=1 −0.5..−1.5. ~5 minutes. Ran on an H100 (gpu-session-GR-…T1705.log): lost
      # everywhere (the shard 10.29 -> 13.71 µs), and MBOX, `--mailbox` and `--moe-mbox` are gone (moe_pairs.py says
      # why); the stage stays as the record of what ran.
    run gpu-tests 150 python -m pytest tests/kernels/test_moe.py -k "mailbox or direct or route or two_launches" -q -p no:cacheprovider --tb=short -rf
    run sweep-mbox 100 python benchmarks/sweep_moe.py --mode block --shapes shard,shard35 --tokens 1 --mailbox --samples 15
    run sweep-mbox-wide 120 python benchmarks/sweep_moe.py --mode block --shapes qwen3,qwen35 --tokens 1,2,4 --mailbox --samples 15
    run timeline-mbox 90 python benchmarks/probe_timeline.py --attention '' --moe 1 --moe-shape shard --moe-direct 16 --moe-route-in --moe-mbox 0,1
    run ab-30-mb 120 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,mb=MOELAB_PAIRS_MAILBOX:1
    run bench-shard 70 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --no-shared --tokens 1,2,4 --samples 10 --save
    MOELAB_PAIRS_MAILBOX=1 run bench-shard-mbox 70 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --no-shared --tokens 1 --samples 10 --save
    ;;
  GQ) # session 44 (prepared for an H200): issue 3's shard line on the H200 with routing inside the pair kernel and
      # the shared expert under DIRECT (H100 9.91 and 11.1 µs; predicted on the H200 ~9.3-9.6 without the shared
      # expert), then the kernel's timeline with and without ROUTE_IN (is the routing prologue or phase 1 the longer
      # part of the 8 µs target's gap?). ~3 minutes. Then GG (~7).
    run bench-shard 70 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --no-shared --tokens 1,2,4 --samples 10 --save
    run bench-shard35 70 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --tokens 1,2,4 --samples 10 --save
    run timeline-direct 60 python benchmarks/probe_timeline.py --attention '' --moe 1 --moe-shape shard --moe-direct 16
    run timeline-route-in 60 python benchmarks/probe_timeline.py --attention '' --moe 1 --moe-shape shard --moe-direct 16 --moe-route-in
    ;;
  GM) # session 43: if GL's sweep wins at Qwen3-30B-A3B's width, DIRECT in column chunks in the batch-1 chain (the
      # engine's MoE at T=1 with the router in its own launch, NEXT_PF before the wait), and Qwen3.5 with its shared
      # expert. ~4 minutes.
    run ab-30-dw 120 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,dw=MOELAB_PAIRS_DIRECT_MAX_I:768
    run ab-35-dw 110 python benchmarks/ab_chain.py --model qwen3.5-35b-a3b --batch 1 --rounds 3 --variants base,dw=MOELAB_PAIRS_DIRECT_MAX_I:512+MOELAB_PAIRS_DIRECT_SHARED
    ;;
  GG) # session 41 (prepared): the engine now captures a one-kernel graph before its first (timing.prime_graphs), since
      # the process's first graph ran slower (H100, GF: Qwen3.5 batch 1 2.739 ms first capture against 2.590 with a
      # graph captured first). The H200 confirmation, each variant a process of its own (only a first capture can
      # tell): Qwen3.5 and Qwen3-30B-A3B batch 1 records with and without it (predicted 2.28 -> ~2.16 and 2.40 ->
      # ~2.34 ms, the re-captures' speed), and the probe's control (MOELAB_PRIME_GRAPH=0: its first capture slow, its
      # re-captures fast) beside the default (every phase at one speed).
    run decode-35 70 python benchmarks/bench_decode.py --model qwen3.5-35b-a3b --batch 1 --rows moelab
    MOELAB_PRIME_GRAPH=0 run decode-35-off 70 python benchmarks/bench_decode.py --model qwen3.5-35b-a3b --batch 1 --rows moelab
    run decode-30 70 python benchmarks/bench_decode.py --batch 1 --rows moelab
    MOELAB_PRIME_GRAPH=0 run decode-30-off 70 python benchmarks/bench_decode.py --batch 1 --rows moelab
    run probe-35 85 python benchmarks/probe_round1.py --pause 1
    MOELAB_PRIME_GRAPH=0 run probe-35-off 85 python benchmarks/probe_round1.py --pause 1
    ;;
  GH) # session 42: the tp=4 shard's phase 2 without partials (DIRECT; the timeline, H100 …T092214: 2.5-3 µs from the
      # slots' readiness to the end). GPU tests (bf16), the block sweep with routing (default, DIRECT 8/16/32), the
      # timeline of each. Predicted the shard T=1 -1..-1.5 µs. ~3 minutes.
    run gpu-tests 120 python -m pytest tests/kernels/test_moe.py -k "direct or pairs" -q -p no:cacheprovider --tb=short -rf
    run sweep-direct 150 python benchmarks/sweep_moe.py --mode block --shapes shard --tokens 1 --direct --samples 15
    run timeline-direct 120 python benchmarks/probe_timeline.py --attention '' --moe 1 --moe-shape shard --moe-direct 0,8,16
    ;;
  GI) # session 42: DIRECT on by default (the shard T=1 12.03 -> 10.58 µs on an H100). The MoE GPU tests (bf16, 100
      # seeds a shape, the custom op, the chain), then issue 3's shard line as the issue states it (predicted on an
      # H200 10.6 -> ~9.3 µs, on an H100 ~10.6), then DIRECT against its switch in the block sweep. ~4 minutes.
    run gpu-tests 200 python -m pytest tests/kernels/test_moe.py tests/kernels/test_moe_custom_op.py tests/kernels/test_chain.py -q -p no:cacheprovider --tb=short -rf -x
    run bench-shard 120 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --no-shared --tokens 1 --samples 10 --save
    run sweep-direct 150 python benchmarks/sweep_moe.py --mode block --shapes shard --tokens 1 --direct --samples 15
    ;;
  GK) # session 42 (prepared for an H200; the session's device time ran out before GJ): issue 3's shard line with DIRECT
      # (H100 10.5 µs; predicted on the H200 10.6 -> ~9.3), the block sweep with ROUTE_IN (GJ's, unmeasured) and DIRECT
      # with the shared expert (shard35, unmeasured), the MoE GPU tests in bf16 on the H200 (DIRECT with a shared
      # expert and ROUTE_IN have never run on a GPU). ~5 minutes. Then GG (~7) if the budget allows.
    run bench-shard 120 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --no-shared --tokens 1,2,4 --samples 10 --save
    run sweep-direct 150 python benchmarks/sweep_moe.py --mode block --shapes shard,shard35 --tokens 1 --direct --samples 15
    run gpu-tests 240 python -m pytest tests/kernels/test_moe.py tests/kernels/test_moe_custom_op.py -q -p no:cacheprovider --tb=short -rf
    ;;
  AF) # batch 8-16: the census MoE kernel's pipeline depth and K chunks of 32 (never swept: num_stages was always
      # Triton's 3, and chunks of 64 beat 128 by 25-30 %); the tensor-core linear's tiles at T=8
    run sweep-census 300 python benchmarks/sweep_moe.py --shapes qwen3 --tokens 8,16 --stages 2,3,4,5 --samples 10
    run sweep-linear 240 python benchmarks/bench_linear.py --ops qkv_proj,o_proj,lm_head --tokens 8 --no-compile --sweep dot --sweep-samples 5
    ;;
  AG) # batch 1: the greedy step's end in one launch (greedy_emit: argmax + token write-back, MOELAB_GREEDY_EMIT), and
      # the pair kernel's phase 1 with all of H in one chunk (MOELAB_PAIRS_K=2048: 64 KB in flight per program, not
      # two serial 32 KB chunks; 248 registers, no spill, Triton 3.6); greedy_emit at batch 8 too
    run gpu-tests 90 python -m pytest tests/kernels/test_sample.py tests/kernels/test_moe_custom_op.py tests/engine/test_generate.py -k "sample or emit or match_transformers or graph" -q -p no:cacheprovider --tb=short -rf
    run bench 90 python benchmarks/bench_sample.py --batch 1,8,32
    run ab-b1 200 python benchmarks/ab_chain.py --batch 1 --rounds 3 --variants base,ge=MOELAB_GREEDY_EMIT,k2048=MOELAB_PAIRS_K:2048,both=MOELAB_GREEDY_EMIT+MOELAB_PAIRS_K:2048
    run ab-b8 120 python benchmarks/ab_chain.py --batch 8 --rounds 2 --variants base,ge=MOELAB_GREEDY_EMIT
    ;;
esac
grep -E "PASS|FAIL|saved|exit|Error|error" "$LOG" | tail -n 40
