"""Why does `moelab bench moe` time the T=4096 layer ~10 % slower than probe_clocks.py does?

    python benchmarks/probe_gap.py [--tokens 4096] [--rounds 3]

Why: session 24's stage DY measured, minutes apart on one H200, the Qwen3-30B-A3B layer at T=4096 at 736 µs in
`moelab bench moe` (SM clock 1980 MHz, ~290 W) and at 672 µs (IQR 7) in probe_clocks.py (route + fused_moe in a
graph of 8 sets, 1600-1890 MHz, 400-690 W); session 23's trace of back-to-back layers said 662. Both run the same
kernels on the same shapes. This runs, in one process and alternating round by round, each difference on its own:
  bench      the bench's own row (`moelab.bench.moe.run`, no compile baselines) at T alone
  bench+pre  the same after T=1 and T=256 rows, as `--tokens 1,256,4096` runs it
  measure    the bench's moelab function on the bench's sets, timed by `timing.measure` (graph)
  probe      probe_clocks.py's function (route + fused_moe) on the same sets, by `timing.measure`
  replay4    probe_clocks.py's own timer (4 replays after one untimed) on the bench function's graph
and the 8192³ bf16 matmul rate in between (the ceiling's kernel), so every row has a same-window rate beside it.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from moelab import hardware, ops, timing
from moelab.bench import moe as bm
from moelab.kernels.moe import fused_moe
from moelab.models import load_spec
from probe_clocks import graph_of, timed  # benchmarks/, on sys.path when run as a script


def replay_timed(fn, sets, reps=4) -> float:
    """probe_clocks.py's own capture and timer (one untimed replay, then `reps`), per call, median of 5."""
    g = graph_of(fn, sets)
    return statistics.median(timed(g, reps) for _ in range(5)) / len(sets)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-save", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("probe_gap needs a CUDA GPU")
    T = a.tokens
    shape = bm.shape_from_spec(load_spec("qwen3-30b-a3b"))
    ceil = hardware.ceilings()

    def mm_rate() -> float:  # the ceiling's kernel, as the bench measures it beside moelab's samples
        return hardware.matmul_rate(samples=10)["rate_per_s"] / 1e12

    gen = torch.Generator(device="cuda").manual_seed(0)
    dt = torch.bfloat16
    layers = [((torch.randn(shape.E, 2 * shape.I, shape.H, device="cuda", generator=gen) * shape.H ** -0.5).to(dt),
               (torch.randn(shape.E, shape.H, shape.I, device="cuda", generator=gen) * shape.I ** -0.5).to(dt))
              for _ in range(4)]
    sets = [(torch.randn(T, shape.H, device="cuda", generator=gen).to(dt), torch.randn(T, shape.E, device="cuda",
             generator=gen), *layers[i % 4], None) for i in range(bm.MIN_SETS)]
    bench_fn = bm.make_impls(shape)["moelab"]
    route = ops.get("route", "moelab")

    def probe_fn(x, lg, w13, w2, sh):
        w, ids = route(lg, shape.k)
        return fused_moe(x, w13, w2, w, ids)

    flops = shape.flops(T)
    rows = []
    for r in range(a.rounds):
        for name in ("bench", "bench+pre", "measure", "probe", "replay4"):
            before = mm_rate()
            if name.startswith("bench"):
                Ts = [1, 256, T] if name == "bench+pre" else [T]
                row = bm.run(shape, Ts, read_gbps=ceil.read_gbps, bf16_tflops=ceil.bf16_tflops, samples=10,
                             compile_baselines=False)[-1]
                us = row["moelab_graph_us"]
            elif name == "replay4":
                us = replay_timed(bench_fn, sets)
            else:
                us = timing.measure(bench_fn if name == "measure" else probe_fn, sets, samples=10).median_us
            after = mm_rate()
            rate = (before + after) / 2
            rows.append({"round": r, "how": name, "moe_us": us, "mm_tflops_before": before, "mm_tflops_after": after,
                         "pct_of_window_rate": 100 * flops / (us * 1e-6) / 1e12 / rate,
                         "pct_of_hw_rate": 100 * flops / (us * 1e-6) / 1e12 / ceil.bf16_tflops})
            x = rows[-1]
            print(f"round {r} {name:10s} {us:7.1f} us  matmul {before:5.0f}/{after:5.0f} TFLOP/s  "
                  f"{x['pct_of_window_rate']:5.1f} % of window rate  {x['pct_of_hw_rate']:5.1f} % of hw "
                  f"({ceil.bf16_tflops:.0f})", flush=True)
    print("how         median us   % window rate")
    for name in ("bench", "bench+pre", "measure", "probe", "replay4"):
        v = [x for x in rows if x["how"] == name]
        print(f"{name:10s}  {statistics.median(x['moe_us'] for x in v):9.1f}   "
              f"{statistics.median(x['pct_of_window_rate'] for x in v):5.1f}")
    payload = {"tokens": T, "hw_bf16_tflops": ceil.bf16_tflops, "hw_source": ceil.source, "rows": rows}
    if not a.no_save:
        print(f"saved {timing.save_result('probe-gap', payload)}")


if __name__ == "__main__":
    main()
