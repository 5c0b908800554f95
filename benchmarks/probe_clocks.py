"""Is a compute-bound MoE layer's share of the matmul rate stable while the GPU's clocks move?

    python benchmarks/probe_clocks.py [--tokens 4096] [--windows 40] [--heat 0,20]

Why: at T=4096 `moelab bench moe` measured 53.4 % of the bf16 rate (IQR 61 µs) while the back-to-back trace of the
same layer said 59 % (session 23). The bench divides by a rate that `moelab hw` measured minutes earlier, in a short
burst. This probe alternates, window by window in one process: a graph of 8192³ bf16 matmuls (the `moelab hw`
ceiling's kernel) and a graph of MoE layers (route + `fused_moe`, Qwen3-30B-A3B shapes, weights rotating over layer
copies, fresh routing per call: the bench's setup), and reads the SM clock, power and temperature (nvidia-smi) after
each window. `--heat` runs that many seconds of back-to-back matmuls first, for each entry (a cold and a hot start).
It changes nothing on the card; it only reads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess

import torch

from moelab import hardware, ops, timing
from moelab.kernels.moe import fused_moe


def smi() -> dict:
    q = "clocks.sm,power.draw,temperature.gpu"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits"], capture_output=True,
                             text=True, timeout=5).stdout.strip().split("\n")[0]
        sm, pw, tmp = (float(v) for v in out.split(","))
        return {"sm_mhz": sm, "power_w": pw, "temp_c": tmp}
    except Exception as e:  # no nvidia-smi, or a field this driver does not know: say so, keep timing
        return {"smi_error": f"{type(e).__name__}: {str(e)[:80]}"}


def graph_of(fn, sets):
    for s in sets:
        fn(*s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for s in sets:
            fn(*s)
    g.replay()
    torch.cuda.synchronize()
    return g


def timed(g, reps):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    g.replay()  # the bench's preroll: the start event fires on a busy GPU
    a.record()
    for _ in range(reps):
        g.replay()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) * 1e3 / reps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--windows", type=int, default=40)
    ap.add_argument("--heat", default="0,20", help="seconds of back-to-back matmuls before each run of windows")
    ap.add_argument("--no-save", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("probe_clocks needs a CUDA GPU")
    E, H, I, k, T = 128, 2048, 768, 8, a.tokens
    ceil = hardware.ceilings()
    n = 8192
    mm = [tuple(torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(3))]
    g_mm = graph_of(lambda x, y, z: torch.matmul(x, y, out=z), mm)
    layers = [((torch.randn(E, 2 * I, H, device="cuda") * H ** -0.5).bfloat16(),
               (torch.randn(E, H, I, device="cuda") * I ** -0.5).bfloat16()) for _ in range(4)]
    route = ops.get("route", "moelab")
    sets = [(torch.randn(T, H, device="cuda").bfloat16(), *layers[i % 4], torch.randn(T, E, device="cuda"))
            for i in range(8)]

    def layer(x, w13, w2, lg):
        w, ids = route(lg, k)
        return fused_moe(x, w13, w2, w, ids)

    g_moe = graph_of(layer, sets)
    flops_moe = 2 * T * k * 3 * H * I
    runs = []
    for heat in [float(h) for h in a.heat.split(",") if h.strip()]:
        one = timed(g_mm, 3)
        for _ in range(int(heat * 1e6 / one)):
            g_mm.replay()
        torch.cuda.synchronize()
        rows = []
        for w in range(a.windows):
            mm_us = timed(g_mm, 5)
            moe_us = timed(g_moe, 4) / len(sets)
            rate = 2 * n**3 / (mm_us * 1e-6) / 1e12
            rows.append({"window": w, "mm_tflops": rate, "moe_us": moe_us,
                         "pct_of_window_rate": 100 * flops_moe / (moe_us * 1e-6) / 1e12 / rate,
                         "pct_of_hw_rate": 100 * flops_moe / (moe_us * 1e-6) / 1e12 / ceil.bf16_tflops, **smi()})
        runs.append({"heat_s": heat, "windows": rows})
        print(f"heat {heat:.0f} s: window  sm MHz  power W  temp C  matmul TFLOP/s  MoE us  % of window rate  % of hw rate")
        for r in rows:
            print(f"  {r['window']:3d}  {r.get('sm_mhz', 0):6.0f}  {r.get('power_w', 0):7.0f}  {r.get('temp_c', 0):6.0f}"
                  f"  {r['mm_tflops']:14.0f}  {r['moe_us']:6.1f}  {r['pct_of_window_rate']:16.1f}  {r['pct_of_hw_rate']:12.1f}")
        for key in ("mm_tflops", "moe_us", "pct_of_window_rate", "pct_of_hw_rate"):
            v = [r[key] for r in rows]
            q = statistics.quantiles(v, n=4)
            print(f"  {key}: median {statistics.median(v):.1f}, IQR {q[2] - q[0]:.1f}, min {min(v):.1f}, max {max(v):.1f}")
    payload = {"tokens": T, "hw_bf16_tflops": ceil.bf16_tflops, "hw_source": ceil.source, "runs": runs}
    if not a.no_save:
        print(f"saved {timing.save_result('probe-clocks', payload)}")
    else:
        print(json.dumps(payload)[:200])


if __name__ == "__main__":
    main()
