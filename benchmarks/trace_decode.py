"""Where one graph-replayed decode step spends its time, kernel by kernel, as the GPU ran it (torch profiler / CUPTI).

    python benchmarks/trace_decode.py [--model qwen3-30b-a3b] [--batch 1] [--ctx 1024] [--steps 5]

`moelab profile` times every op alone; this traces the real chained step, where programmatic dependent launch
lets a kernel start before the previous one ends. Per kernel it reports:
  dur      its own start-to-end time (under PDL this includes time spent waiting for its predecessor);
  advance  how far it moves the end of the step: its end minus the latest end of any kernel before it.
The advances sum exactly to the step's span (first start to last end), so they say where the step's time goes,
including the launch gaps a per-op profile cannot see. Rows are kernels grouped by name, with calls per step; a
kernel that runs several times per layer gets a row per place in the layer (`label_calls`: `_linear_kernel[0]` is
the qkv projection, `[1]` the o projection, `[end]` the lm_head; from batch 2 `[2]` is the router's logits, and from
batch 4 (DOT_MIN_T) the same rows are `_linear_dot_kernel`'s).
Random bf16 weights at the model's real shapes; a prompt of --ctx tokens fills the cache first.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import torch

from moelab import report, timing
from moelab.engine import build


def kernel_events(prof) -> list[tuple[str, float, float]]:
    """(name, start µs, end µs) of every GPU kernel in the trace, by start time."""
    out = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.elapsed_us() >= 0:
            name = e.name
            if name.startswith(("Memcpy", "Memset")):
                continue
            out.append((name, float(e.time_range.start), float(e.time_range.end)))
    return sorted(out, key=lambda r: r[1])


def split_steps(events, n_steps: int) -> list[list]:
    """Cut the kernel list into n_steps equal runs (each graph replay launches the same kernels)."""
    per = len(events) // n_steps
    if per * n_steps != len(events):
        raise SystemExit(f"{len(events)} kernels do not split into {n_steps} equal steps: the trace is incomplete")
    return [events[i * per:(i + 1) * per] for i in range(n_steps)]


def short(name: str) -> str:
    name = name.split("(")[0]
    return name[:60]


def label_calls(step: list[tuple[str, float, float]], layers: int) -> list[str]:
    """A label per kernel of one step: its short name, and where a kernel runs m times per layer (calls = m·layers
    + r), its place in the layer, `name[j]` for j < m, or `name[end]` for the r calls after the last layer's.
    So the qkv and o projections, or the norm before attention and the one after it, get rows of their own (they
    share a kernel): the step runs the same kernels in the same order in every layer."""
    names = [short(n) for n, _, _ in step]
    total: dict[str, int] = defaultdict(int)
    for n in names:
        total[n] += 1
    seen: dict[str, int] = defaultdict(int)
    out = []
    for n in names:
        i = seen[n]
        seen[n] += 1
        m = total[n] // layers
        if m >= 2:
            out.append(f"{n}[{i % m}]" if i < m * layers else f"{n}[end]")
        else:
            out.append(n)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen3-30b-a3b")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--recapture", action="store_true",
                    help="drop the first capture and trace a second one (session 32: a re-capture ran 2 %% slower)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("trace_decode needs a CUDA GPU")
    eng = build(args.model, random=True, batch=args.batch, max_len=args.ctx + args.steps + 8)
    prompt = torch.randint(0, eng.cfg.vocab, (args.batch, args.ctx), generator=torch.Generator().manual_seed(0))
    prompt = prompt.to(eng.device)
    first = eng.prefill(prompt).argmax(-1)
    eng.decode(first, args.steps)  # captures the graph
    if args.recapture:
        eng._graph = None
        eng.decode(first, args.steps)
    replay = eng._graph.replay

    def rewind():  # back to the first decode position: the replays below stay inside the cache
        eng.pos.fill_(args.ctx)
        eng._stepi.zero_()

    def run_steps():
        rewind()
        for _ in range(args.steps):
            replay()

    # Untraced time per step, to check that tracing did not change the step.
    t = timing.measure(run_steps, mode="host", warmup=1, samples=5)
    untraced_us = t.median_us / args.steps
    from torch.profiler import ProfilerActivity, profile

    rewind()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            replay()
        torch.cuda.synchronize()
    steps = split_steps(kernel_events(prof), args.steps)[1:]  # the first replay may pay a cold start
    rows: dict[str, dict] = defaultdict(lambda: {"calls": 0, "dur": 0.0, "advance": 0.0})
    spans = []
    for ev in steps:
        spans.append(ev[-1][2] - ev[0][1])
        latest = ev[0][1]
        for label, (name, s, e) in zip(label_calls(ev, eng.cfg.layers), ev):
            r = rows[label]
            r["calls"] += 1
            r["dur"] += e - s
            r["advance"] += max(0.0, e - latest)
            latest = max(latest, e)
    n = len(steps)
    span = sum(spans) / n
    table = []
    for name, r in sorted(rows.items(), key=lambda kv: -kv[1]["advance"]):
        table.append({"kernel": name, "calls_per_step": r["calls"] // n, "dur_us": r["dur"] / r["calls"],
                      "advance_us": r["advance"] / r["calls"], "step_us": r["advance"] / n,
                      "share_pct": 100 * r["advance"] / n / span})
    report.table(table, ["kernel", "calls_per_step", "dur_us", "advance_us", "step_us", "share_pct"],
                 title=f"decode step trace, {args.model}, batch {args.batch}, ctx {args.ctx}: span {span:.1f} µs "
                       f"traced, {untraced_us:.1f} µs untraced")
    if not args.no_save:
        path = timing.save_result("trace-decode", {"model": args.model, "batch": args.batch, "ctx": args.ctx,
                                                   "recapture": args.recapture,
                                                   "steps_traced": n, "span_us": span, "untraced_step_us": untraced_us,
                                                   "kernels_per_step": len(steps[0]), "rows": table})
        print(f"saved {path}")


if __name__ == "__main__":
    with torch.inference_mode():  # the engine's buffers are inference tensors
        main()
