#!/usr/bin/env bash
# The next GPU session's runs, in stages that each fit one 10-minute device call:
#   bash benchmarks/gpu_session.sh 1|2|3|4|5    (on the device machine, from the repo root); a session's
#   30 device-minutes fit about three: take them in the order the open issues need
# Logs and JSON records land in $OUT (copy the records into benchmarks/results/ afterwards, then
# `moelab report --readme README.md`). Set MOELAB_COMMIT to the sha the tree was sent at.
# Keep $OUT to a few files: the device tool returns only so many (session 2 lost three logs that way).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 MOELAB_RESULTS_DIR=${OUT:?set OUT} COLUMNS=200
run() {  # run NAME SECONDS CMD...: a step with its own time limit and log; a failure does not stop the stage
  local name=$1 secs=$2; shift 2
  echo "== $name"; timeout "$secs" "$@" > "$OUT/$name.log" 2>&1; echo "   exit $? ($name)"; tail -n 4 "$OUT/$name.log"
}
case "${1:?stage 1 to 5}" in
  1)  # issue 5: end-to-end decode (never measured yet: session 2's run spent its time on the baselines).
      # The record is rewritten after every row, moelab rows first.
    run fp32-fence 90 python benchmarks/check_moe_fp32.py   # the fp32 pair-kernel bug: the fence hypothesis
    run engine-tests 120 python -m pytest tests/engine -q -p no:cacheprovider --tb=short -rf
    run decode 380 python benchmarks/bench_decode.py --batch 1 --rows moelab,moelab-eager,hf-compile
    ;;
  2)  # issue 4: the profiler on the GPU, and batch 8/32 decode
    run profile 200 python -m moelab profile qwen3-30b-a3b --batch 1 --ctx 1024 --save
    run profile-tp4 120 python -m moelab profile qwen3.5-35b-a3b --tp 4 --ctx 1024 --save
    run decode-b8 250 python benchmarks/bench_decode.py --batch 8,32 --rows moelab,moelab-eager
    ;;
  3)  # issue 3: T=1 on tensor cores (the census kernel's dot form: its loads are software-pipelined, the GEMV's
      # are not) against the pair kernel, one process; then the MoE bench with whatever wins as the default
    run sweep-t1 150 python benchmarks/sweep_moe.py --mode decode --shapes qwen3,shard,qwen35 --tokens 1 --samples 10
    run bench-moe 220 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    run bench-shard 60 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --tokens 1 --no-shared --samples 10 --save
    ;;
  4)  # prefill: the Triton grouped GEMMs against torch._grouped_mm (CUTLASS), never measured; then the kernel tests
      # at every real shape (~5 min on the GPU; whatever does not fit is for the call after)
    run grouped 140 python benchmarks/sweep_moe.py --shapes "" --grouped 4096 --samples 10
    run kernel-tests 420 python -m pytest tests/kernels -q -p no:cacheprovider --tb=short -rf
    ;;
  5)  # issue 4: decode attention's (num_splits, BLOCK_N) neighbourhood (the targets are unmet at 1k, 16k, 64k)
    run attention 240 python benchmarks/bench_attention.py --sweep --no-compile
    ;;
esac
