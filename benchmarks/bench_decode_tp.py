"""Tensor-parallel decode: per-step time of a model at several batch sizes, with and without overlap, and
the all-reduce share of the step, on the GPUs torchrun starts (one rank per GPU).

For each batch and overlap setting: `engine.run.measure_run` (warm-up generate, then the decode loop timed
`--repeats` times, CUDA graphs, random bf16 weights seeded alike on every tp so all tp see one model) gives
decode ms per step. The all-reduce share is measured by ablation: the same engine with its all-reduces
replaced by the identity (its numbers are wrong; its time is the step without them), graph re-captured:
share = 1 − t_without / t_with. "Hidden by overlap" = (t_no_overlap − t_overlap) / (t_no_overlap −
t_without), the fraction of the all-reduce time the overlap took off the step.

    torchrun --nproc-per-node 1 benchmarks/bench_decode_tp.py --batches 1,32      # tp=1 baseline
    torchrun --nproc-per-node 2 benchmarks/bench_decode_tp.py --batches 1,32
    torchrun --nproc-per-node 4 benchmarks/bench_decode_tp.py --batches 1,32 [--oneshot-max-bytes N]

Targets (issue 8): tp=2 batch-1 step <= 0.75 × tp=1; overlap hides >= half of the all-reduce time.
Rank 0 saves `timing.save_result("bench-decode-tp", ...)`.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist

from moelab import report, timing
from moelab.engine import Sampling
from moelab.engine.comm import Comm, Pending, env_world
from moelab.engine.run import measure_run
from moelab.engine.tp import build_tp, init_distributed


def _no_allreduce(t: torch.Tensor, *, async_op: bool = False):
    return Pending(t) if async_op else t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen3-30b-a3b")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--oneshot-max-bytes", type=int, default=0)
    ap.add_argument("--impl", default="moelab")
    args = ap.parse_args()
    world = env_world()
    if world is None or not torch.cuda.is_available():
        raise SystemExit("run under torchrun on CUDA GPUs (see the docstring)")
    rank, size, local = world
    dev = init_distributed(rank, size, local)
    rows = []
    for b in (int(v) for v in args.batches.split(",")):
        step_ms = {}
        for overlap in ([False, True] if size > 1 else [False]):
            comm = Comm(device=dev, oneshot_max_bytes=args.oneshot_max_bytes)
            eng = build_tp(args.model, comm=comm, random=True, batch=b, max_len=args.prompt_len + args.new_tokens,
                           impl=args.impl, sampling=Sampling(), overlap=overlap)
            prompt = torch.randint(0, eng.cfg.vocab, (b, args.prompt_len),
                                   generator=torch.Generator().manual_seed(0)).to(dev)  # alike on every rank
            tokens, s = measure_run(eng, prompt, args.new_tokens, repeats=args.repeats)
            step_ms[overlap] = s["decode_ms_per_token"]
            row = {"tp": size, "batch": b, "overlap": overlap, "decode_ms_per_step": s["decode_ms_per_token"],
                   "spread_pct": s["decode_spread_pct"], "tokens_per_s": s["tokens_per_s"],
                   "pct_of_floor": s.get("pct_of_floor"), "summary": s}
            if size > 1:
                comm.all_reduce = _no_allreduce  # ablation: the step without its all-reduces
                eng._graph = None  # re-capture without them
                _, s0 = measure_run(eng, prompt, args.new_tokens, repeats=args.repeats)
                t0 = s0["decode_ms_per_token"]
                row.update(no_allreduce_ms=t0, allreduce_share=1.0 - t0 / s["decode_ms_per_token"])
                step_ms[("none", overlap)] = t0
            rows.append(row)
            del eng
            torch.cuda.empty_cache()
        if size > 1 and b >= 2:
            ar = step_ms[False] - step_ms[("none", False)]
            rows[-1]["hidden_by_overlap"] = (step_ms[False] - step_ms[True]) / ar if ar > 0 else None
    if rank == 0:
        report.table(rows, ["tp", "batch", "overlap", "decode_ms_per_step", "spread_pct", "tokens_per_s",
                            "pct_of_floor", "no_allreduce_ms", "allreduce_share", "hidden_by_overlap"],
                     title=f"{args.model}: decode step on {size} GPU(s)")
        path = timing.save_result("bench-decode-tp", {"model": args.model, "tp": size, "rows": rows,
                                                      "args": vars(args)})
        print(f"saved {path}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
