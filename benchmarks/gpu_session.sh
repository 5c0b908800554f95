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
case "${1:?stage A, 1, 2 or 3}" in
  A)  # session 2, first call: GPU correctness for issues 3-7 and the issue-4/6 numbers (~9 min worst case)
    run kernel-tests 170 python -m pytest tests/kernels tests/profile tests/engine tests/test_timing.py -q -p no:cacheprovider
    run verify-tests 170 python -m pytest tests/verify tests/mine -q -p no:cacheprovider
    run verify-moe 80 python benchmarks/bench_verify_moe.py --problems moe3 --trials 2 --samples 10
    run norm 60 python benchmarks/bench_norm.py
    run attention 100 python benchmarks/bench_attention.py
    ;;
  B)  # session 2, second call: the split-over-I kernel against the pair kernel, races first (~8 min worst case)
    run moe-tests 70 python -m pytest tests/kernels/test_moe.py -q -p no:cacheprovider --tb=short -rf \
        -k "(fused_moe_matches_reference and dtype0) or shared_expert or skewed or split_path or 60-2048-1408-4-0-8"
    run sync 130 python benchmarks/check_moe_sync.py
    run block 330 python benchmarks/sweep_moe.py --mode block --shapes qwen3,shard,qwen35 --tokens 1,2,4 --samples 10
    ;;
  C)  # session 2, third call: issues 6 and 7 on the GPU — the verify and mine suites in 4 parallel shards (each
      # adversarial case spawns a worker that compiles; serially they overran 170 s), then the MoE comparison
    python -m pytest tests/verify tests/mine --collect-only -q -p no:cacheprovider | grep "::" > "$OUT/ids.txt"
    for i in 0 1 2 3; do
      awk -v i=$i 'NR % 4 == i' "$OUT/ids.txt" > "$OUT/ids$i.txt"
      timeout 330 python -c "import pytest, sys; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '--tb=short', '-rfs'] + open(sys.argv[1]).read().splitlines()))" "$OUT/ids$i.txt" > "$OUT/verify-shard$i.log" 2>&1 &
    done
    wait
    for i in 0 1 2 3; do echo "== shard $i"; tail -n 3 "$OUT/verify-shard$i.log"; done
    run verify-moe 200 python benchmarks/bench_verify_moe.py --trials 2 --samples 10
    ;;
  D)  # session 2, fourth call: the simplified MoE defaults on the GPU, engine parity, decode numbers (issue 5)
    run moe-tests 70 python -m pytest tests/kernels/test_moe.py -q -p no:cacheprovider --tb=short -rf \
        -k "fp32_small_t or shared_expert or skewed or deterministic or many_seeds or bad_id or moe_block or t1_path"
    run engine-tests 110 python -m pytest tests/engine -q -p no:cacheprovider --tb=short -rf
    run bench-shard 60 python -m moelab bench moe --model qwen3.5-35b-a3b --tp 4 --tokens 1 --samples 10 --save
    run decode 240 python benchmarks/bench_decode.py --batch 1 --rows hf-eager,moelab-eager,moelab
    ;;
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
