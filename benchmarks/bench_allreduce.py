"""All-reduce latency per call at decode message sizes, on the engine's two paths, on 2-8 GPUs of one host:

  dist     `torch.distributed.all_reduce` (NCCL)
  oneshot  one-shot all-reduce over P2P symmetric memory (`torch.ops.symm_mem.one_shot_all_reduce_copy`)

through `moelab.engine.comm.Comm`, the very code the engine calls. Message = batch × hidden × 2 bytes (bf16;
Qwen3-30B-A3B hidden 2048: 4 KiB at batch 1, 128 KiB at batch 32). Each path is timed graph-replayed
(what a decode step pays inside its CUDA graph) and host-launched, 32 calls per sample on 32 distinct
buffers, 25 samples, median and spread; every rank makes the same calls (no per-rank calibration).
Before timing, each path's sum is checked against the exact one. Rank 0 prints the table and saves it
with `timing.save_result("bench-allreduce", ...)`; the crossover (largest size where oneshot wins, graph
mode) is what `--oneshot-max-bytes` should be set to.

    torchrun --nproc-per-node 4 benchmarks/bench_allreduce.py [--hidden 2048] [--batches 1,2,4,8,16,32,64,128]

Leave NVLink multicast as the machine sets it (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1).
Target (issue 8): oneshot, 4 KiB, 4 GPUs: <= 8 µs per call.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist

from moelab import report, timing
from moelab.engine.comm import Comm, env_world
from moelab.engine.tp import init_distributed

CALLS_PER_SAMPLE = 32


def check_sum(comm: Comm, numel: int, dtype: torch.dtype) -> float:
    """Max abs error of one all-reduce of rank-dependent values against the exact sum."""
    x = torch.arange(numel, device=comm.device, dtype=torch.float32) % 7 + comm.rank
    want = (torch.arange(numel, device=comm.device, dtype=torch.float32) % 7) * comm.size + sum(range(comm.size))
    got = comm.all_reduce(x.to(dtype).clone())
    return (got.float() - want).abs().max().item()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--batches", default="1,2,4,8,16,32,64,128")
    ap.add_argument("--samples", type=int, default=25)
    args = ap.parse_args()
    world = env_world()
    if world is None or not torch.cuda.is_available():
        raise SystemExit("run under torchrun on CUDA GPUs: torchrun --nproc-per-node N benchmarks/bench_allreduce.py")
    rank, size, local = world
    dev = init_distributed(rank, size, local)
    dtype = torch.bfloat16
    paths = {"dist": Comm(device=dev), "oneshot": Comm(device=dev, oneshot_max_bytes=1 << 20)}
    rows = []
    for b in (int(v) for v in args.batches.split(",")):
        numel = b * args.hidden
        nbytes = numel * 2
        for name, comm in paths.items():
            err = check_sum(comm, numel, dtype)
            assert comm.path(torch.empty(numel, dtype=dtype, device=dev)) == name, (name, nbytes)
            bufs = [(torch.zeros(numel, dtype=dtype, device=dev),) for _ in range(CALLS_PER_SAMPLE)]
            row = {"batch": b, "message_bytes": nbytes, "path": name, "tp": size, "max_abs_err": err}
            for mode in ("graph", "host"):
                dist.barrier()
                m = timing.measure(comm.all_reduce, bufs, mode=mode, samples=args.samples, min_sample_us=0.0)
                row[f"{mode}_us"] = m.median_us
                row[f"{mode}_spread_pct"] = m.spread_pct
                row[f"{mode}_stats"] = m.to_dict()
            rows.append(row)
    if rank == 0:
        cross = [r["message_bytes"] for r in rows if r["path"] == "oneshot" and r["graph_us"] < next(
            q["graph_us"] for q in rows if q["path"] == "dist" and q["batch"] == r["batch"])]
        best = max(cross) if cross else 0
        report.table(rows, ["batch", "message_bytes", "path", "graph_us", "graph_spread_pct", "host_us",
                            "max_abs_err"], title=f"all-reduce per call, {size} GPUs, bf16",
                     caption=f"oneshot beats NCCL (graph mode) up to {best} B: --oneshot-max-bytes {best}")
        path = timing.save_result("bench-allreduce", {"tp": size, "hidden": args.hidden, "rows": rows,
                                                      "oneshot_max_bytes_measured": best})
        print(f"saved {path}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
