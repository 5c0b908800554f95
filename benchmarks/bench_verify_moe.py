"""The second worklog's MoE comparison, judged by `moelab verify`: eager, torch.compile and moelab's fused
MoE on the three MoE SwiGLU problems (8, 32, 64 experts), plus the Qwen3-30B-A3B decode shapes on request.

Each problem goes through the full harness (float64 oracle, fresh secret inputs, static and runtime
checks, interleaved timing with rotated inputs, roofline floor, profiler), so a number only appears next
to a PASS or a FAIL with its reasons. Results: benchmarks/results/verify-moe-<device>-<date>.json.

    python benchmarks/bench_verify_moe.py                      # moe, moe2, moe3 at their fp32 precision
    python benchmarks/bench_verify_moe.py --problems moe3 --precision bf16
    python benchmarks/bench_verify_moe.py --problems moe_decode_t1 moe_decode_t8
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from moelab import timing
from moelab.report import table
from moelab.verify import verify

CANDIDATE = Path(__file__).resolve().parent.parent / "tests" / "verify" / "candidates" / "moelab_fused_moe.py"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", nargs="+", default=["moe", "moe2", "moe3"])
    ap.add_argument("--precision", choices=["fp32", "fp16", "bf16"], default=None,
                    help="task precision (default: each problem's own)")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--samples", type=int, default=15, help="timed samples per implementation")
    ap.add_argument("--timeout", type=float, default=540.0, help="seconds per problem's worker")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    ap.add_argument("--candidate", type=Path, default=CANDIDATE)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_verify_moe needs a CUDA GPU (the harness itself runs on CPU: see tests/verify)")

    rows, verdicts = [], []
    for name in args.problems:
        v = verify(args.candidate, name, precision=args.precision, trials=args.trials, timeout_s=args.timeout,
                   samples=args.samples, compile=not args.no_compile)
        verdicts.append(v.to_dict())
        t = v.times
        rows.append({"problem": name, "precision": v.precision, "verdict": "PASS" if v.passed else "FAIL",
                     "eager µs": t["eager_us"], "compile µs": t["compile_us"], "moelab µs": t["candidate_us"],
                     "vs eager": t["speedup_vs_eager"], "vs compile": t["speedup_vs_compile"],
                     "floor µs": t["floor_us"], "% of floor": t["pct_of_floor"],
                     "spread %": (v.timing.get("candidate") or {}).get("iqr_us", 0.0)
                     / max((v.timing.get("candidate") or {}).get("median_us", 1.0), 1e-9) * 100,
                     "max rel err": max(v.errors.values()) if v.errors else None})
        for r in v.reasons:
            print(f"{name}: {r.code}: {r.message}")
    table(rows, title="MoE SwiGLU: eager vs torch.compile vs moelab fused MoE (moelab verify)",
          caption="times: median per call, host-launched, inputs rotated past L2; floor = hit experts' "
                  "weights at the measured read bandwidth (or FLOPs at the matmul rate)")
    path = timing.save_result("verify-moe", {"candidate": str(args.candidate), "rows": rows, "verdicts": verdicts})
    print(f"saved {path}")


if __name__ == "__main__":
    main()
