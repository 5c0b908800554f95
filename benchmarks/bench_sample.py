"""The greedy end of a decode step (`greedy_emit`: argmax + the token written back): eager (the engine's torch ops),
torch.compile of them, moelab's one launch, and the floor — side by side in one process, graph-replayed.

    python benchmarks/bench_sample.py [--vocab 151936] [--batch 1,8,32] [--samples 25] [--read-gbps G] [--json]

bytes = B·V·2 (bf16 logits; the writes are a few int64s); floor = bytes / measured read bandwidth. The logits rotate
over `timing.sets_for_l2` sets; every impl and mode gets fresh token state, with room for every call the timer makes.
moelab is checked against the reference (tokens, out, step, pos equal) and its launches counted (must be 1).
Saved with `timing.save_result("bench-sample", ...)`.
"""

from __future__ import annotations

import argparse

import torch

from moelab import ops, report, timing
from moelab.bench import floor_read_gbps

ROOM = 8192  # columns of `out`: more than the calls one measurement makes (≥ 200 µs per sample × 25 samples)


def state(B: int, dev: str):
    return (torch.zeros(B, dtype=torch.long, device=dev), torch.zeros(B, ROOM, dtype=torch.long, device=dev),
            torch.zeros((), dtype=torch.long, device=dev), torch.zeros(B, dtype=torch.long, device=dev))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--batch", default="1,8,32")
    ap.add_argument("--samples", type=int, default=25)
    ap.add_argument("--read-gbps", type=float, default=None)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_sample: needs a CUDA GPU")
    gbps, source = floor_read_gbps(a.read_gbps)
    ref, kernel = ops.get("greedy_emit", "eager"), ops.get("greedy_emit", "moelab")
    impls = {"eager": ref, "compile": torch.compile(ref, dynamic=False), "moelab": kernel}
    rows, meta = [], {}
    for B in [int(b) for b in a.batch.split(",")]:
        nbytes = B * a.vocab * 2
        floor_us = nbytes / (gbps * 1e3)
        logits = [torch.randn(B, a.vocab, device="cuda").bfloat16()
                  for _ in range(timing.sets_for_l2(nbytes, timing.l2_bytes()))]
        got, want = state(B, "cuda"), state(B, "cuda")
        kernel(logits[0], *got)
        ref(logits[0], *want)
        if not all(torch.equal(g, w) for g, w in zip(got, want)):
            raise SystemExit(f"bench_sample: moelab differs from the reference at B={B}; not timing it")
        meta[B] = {"launches": timing.count_launches(kernel, (logits[0], *state(B, "cuda"))),
                   "eager_launches": timing.count_launches(ref, (logits[0], *state(B, "cuda"))),
                   "rotation_sets": len(logits)}
        times = {}
        for mode in ("graph", "host"):
            for name, fn in impls.items():
                st = state(B, "cuda")
                m = timing.measure(fn, [(lg, *st) for lg in logits], mode=mode, samples=a.samples)
                times[(name, mode)] = m.median_us
                rows.append({"B": B, "V": a.vocab, "impl": name, "mode": mode, "median_us": m.median_us,
                             "iqr_us": m.iqr_us, "floor_us": floor_us, "pct_floor": 100 * floor_us / m.median_us,
                             "measurement": m.to_dict()})
        for r in rows:
            if r["B"] == B:
                r["x_vs_eager"] = times[("eager", r["mode"])] / r["median_us"]
                r["x_vs_compile"] = times[("compile", r["mode"])] / r["median_us"]
    payload = {"vocab": a.vocab, "dtype": "bfloat16", "read_gbps": gbps, "read_gbps_source": source, "moelab": meta,
               "rows": rows}
    path = timing.save_result("bench-sample", payload)
    if a.json:
        report.emit_json(payload)
        return
    report.table(rows, ["B", "V", "impl", "mode", "median_us", "iqr_us", "floor_us", "pct_floor", "x_vs_eager",
                        "x_vs_compile"], title="greedy_emit: argmax + token write-back, bf16 logits",
                 caption=f"floor at {gbps:.0f} GB/s ({source}); saved {path}")
    report.table([{"B": b, **m} for b, m in meta.items()], title="launches per call")


if __name__ == "__main__":
    main()
