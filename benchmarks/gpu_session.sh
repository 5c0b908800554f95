#!/usr/bin/env bash
# The next GPU session's runs, in three stages that each fit one 10-minute device call:
#   bash benchmarks/gpu_session.sh 1|2|3        (on the device machine, from the repo root)
# Logs and JSON records land in $OUT (copy the records into benchmarks/results/ afterwards, then
# `moelab report --readme README.md`). Set MOELAB_COMMIT to the sha the tree was sent at.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 MOELAB_RESULTS_DIR=${OUT:?set OUT} COLUMNS=200
run() {  # run NAME SECONDS CMD...: a step with its own time limit and log; a failure does not stop the stage
  local name=$1 secs=$2; shift 2
  echo "== $name"; timeout "$secs" "$@" > "$OUT/$name.log" 2>&1; echo "   exit $? ($name)"; tail -n 4 "$OUT/$name.log"
}
case "${1:?stage 1, 2 or 3}" in
  1)  # correctness first, then the decisive T=1 comparison (docs/worklog.md has the predictions)
    run sync 120 python benchmarks/check_moe_sync.py
    run block 200 python benchmarks/sweep_moe.py --mode block --shapes qwen3,shard,qwen35 --tokens 1,2,4 --samples 10
    run verify-tests 260 python -m pytest tests/verify tests/mine -q -p no:cacheprovider
    ;;
  2)  # issue 4 and 5 numbers
    run kernel-tests 150 python -m pytest tests/kernels tests/profile tests/engine tests/test_timing.py -q -p no:cacheprovider
    run norm 90 python benchmarks/bench_norm.py
    run attention 120 python benchmarks/bench_attention.py
    run profile 180 python -m moelab profile qwen3-30b-a3b --batch 1 --ctx 1024 --json
    ;;
  3)
    run bench-moe 240 python -m moelab bench moe --tokens 1,2,4,8,16,32,64,256,4096 --samples 10 --save
    run decode 200 python benchmarks/bench_decode.py
    run verify-moe 120 python benchmarks/bench_verify_moe.py --problems moe3 --trials 2 --samples 10
    ;;
esac
