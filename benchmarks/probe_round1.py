"""Why is the first round of `ab_chain.py` faster than the rest? A probe of the decode step's run-to-run state.

    python benchmarks/probe_round1.py [--model qwen3.5-35b-a3b] [--batch 1]

Every ab_chain record of session 31 shows the base variant's first round 1.5-3 % faster than its later rounds (for
example 2.791 then 2.832 ms four times), while the other variants are flat. Two explanations predict different
things here:
- the GPU's state (clocks, temperature, power) after an idle stretch: then the same graph replayed again and again
  slows down over the first runs, and a pause brings the fast runs back;
- where the graph's buffers lie (a re-capture allocates its activations elsewhere): then the same graph stays at one
  speed, a re-capture moves it, and a pause changes nothing.
The script times the same captured graph several times in a row, again after an idle pause, again after one eager
prefill (session 33: bench_decode, which times the prefill between the capture and the decode, gave two Engines
2.734 and 2.737 ms on the machine where this script's first capture gave 2.678 and its re-captures 2.727), then
after a re-capture that frees the first graph and after one that keeps it (so the new buffers must lie elsewhere).
`nvidia-smi` logs the SM clock, the memory clock, the temperature and the power every 100 ms; each timed run reports
their means.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import tempfile
import time

import torch

from moelab import report, timing
from moelab.engine import build


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen3.5-35b-a3b")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--pause", type=float, default=15.0, help="idle seconds before the 'after pause' runs")
    ap.add_argument("--shift-first", type=int, default=0,
                    help="MB allocated (and kept) before the first capture: moves where its buffers lie")
    ap.add_argument("--shifts", type=int, default=0,
                    help="then this many more captures, the i-th after keeping (16 + 32·i) MB more and the earlier graphs")
    ap.add_argument("--before", choices=("none", "graph", "eager"), default="none",
                    help="before the engine's first capture: capture and replay a one-kernel graph of its own "
                         "(is the process's first CUDA graph the odd one?), or run 4 eager decode steps (every "
                         "kernel compiled and loaded before the capture's warm-up, not during it). Since session 41 "
                         "the engine primes a graph itself (timing.prime_graphs): MOELAB_PRIME_GRAPH=0 for the "
                         "control")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("probe_round1 needs a CUDA GPU")
    log = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False).name
    gpu = f"GPU-{torch.cuda.get_device_properties(torch.cuda.current_device()).uuid}"  # this GPU only
    smi = subprocess.Popen(["nvidia-smi", "-i", gpu,
                            "--query-gpu=timestamp,clocks.sm,clocks.mem,temperature.gpu,power.draw",
                            "--format=csv,noheader,nounits", "-lms", "100", "-f", log])
    try:
        rows = _runs(args)
    finally:
        smi.terminate()
        smi.wait()
        samples = _read_log(log)
        os.unlink(log)
    for r in rows:
        inside = [s for s in samples if r["t0"] <= s[0] <= r["t1"]]
        for j, key in enumerate(["sm_mhz", "mem_mhz", "temp_c", "power_w"], start=1):
            r[key] = sum(s[j] for s in inside) / len(inside) if inside else float("nan")
        del r["t0"], r["t1"]
    report.table(rows, ["phase", "run", "ms_per_token", "sm_mhz", "mem_mhz", "temp_c", "power_w"],
                 title=f"probe_round1, {args.model}, batch {args.batch}")
    path = timing.save_result("probe-round1", {"model": args.model, "batch": args.batch, "pause_s": args.pause,
                                               "shift_first_mb": args.shift_first, "shifts": args.shifts,
                                               "before": args.before,
                                               "rows": rows})
    print(f"saved {path}")


def _read_log(log: str) -> list[tuple[float, ...]]:
    """(epoch seconds, SM MHz, memory MHz, °C, W) per nvidia-smi sample (its timestamps are local time)."""
    samples = []
    with open(log) as f:
        for rec in csv.reader(f):
            try:
                stamp, frac = rec[0].strip().split(".")
                ts = time.mktime(time.strptime(stamp, "%Y/%m/%d %H:%M:%S")) + float("0." + frac)
                samples.append((ts, *map(float, rec[1:5])))
            except (ValueError, IndexError):
                continue
    return samples


def _runs(args) -> list[dict]:
    """Every timed run: phase, run, ms per token, and its wall-clock window (t0, t1)."""
    eng = build(args.model, random=True, batch=args.batch, max_len=128 + 256 + 8)
    prompt = torch.randint(0, eng.cfg.vocab, (args.batch, 128), generator=torch.Generator().manual_seed(0))
    prompt = prompt.to(eng.device)
    steps = 255
    rows, kept = [], []

    kept.append(torch.empty(args.shift_first << 20, dtype=torch.uint8, device=eng.device))
    if args.before == "graph":  # moelab's own primer, asked for even under MOELAB_PRIME_GRAPH=0
        idx = eng.device.index if eng.device.index is not None else torch.cuda.current_device()
        kept += timing.one_kernel_graph(idx)
    elif args.before == "eager":
        eng.use_graphs = False
        eng.generate(prompt, 4)
        eng.use_graphs = True
    torch.cuda.synchronize()
    first = eng.generate(prompt, 256)[:, 0].clone()  # greedy: the same first token at every capture

    def timed(label: str, n: int, recapture: bool = False, prefill: bool = False) -> None:
        if prefill:  # an eager prefill, the same graph kept: what bench_decode runs between capture and timing
            eng.prefill(prompt)
            torch.cuda.synchronize()
        if recapture:
            eng._graph = None  # freed, unless the caller kept a reference to it
            torch.cuda.empty_cache()
            eng.generate(prompt, 256)
        for i in range(n):
            t0 = time.time()
            t = timing.measure(lambda: eng.decode(first, steps), mode="host", warmup=1, samples=3)
            rows.append({"phase": label, "run": i, "ms_per_token": t.median_us / 1e3 / steps,
                         "t0": t0, "t1": time.time()})
            print(f"{label:>16} {i}: {rows[-1]['ms_per_token']:.4f} ms", flush=True)

    timed("first capture", 5)
    time.sleep(args.pause)
    timed("after pause", 3)
    timed("after a prefill", 3, prefill=True)
    timed("recapture", 3, recapture=True)
    kept.append(eng._graph)  # the old graph's buffers stay taken: the next capture's lie elsewhere
    timed("recapture, kept", 3, recapture=True)
    time.sleep(args.pause)
    timed("kept, paused", 2)
    for i in range(args.shifts):
        # Above 10 MB the caching allocator gives a tensor a segment of its own (a cudaMalloc), so each of these moves
        # where the next capture's segments lie. (Until session 32's review this kept 1 MB tensors, which share one
        # 20 MB segment: only the first moved anything.)
        kept += [eng._graph, torch.empty((16 + 32 * i) << 20, dtype=torch.uint8, device=eng.device)]
        timed(f"shift {i + 1}", 1, recapture=True)
    return rows


if __name__ == "__main__":
    with torch.inference_mode():
        main()
