"""The profile's collectives measured for real: run under `torchrun --nproc-per-node N ... --tp N`.

On one GPU the all-reduces and the logits all-gather of a tensor-parallel step can only be estimated (bytes on
the wire / interconnect + a per-call latency). With a process group of `--tp` ranks, each collective of the
step's graph is timed instead, through the engine's own `Comm` (NCCL on GPUs, gloo on CPUs; the path it picks
for the message), at the graph's message size:

  * every rank runs the same fixed sequence (a barrier, warm-up calls, then `samples` samples of `reps` calls
    each): fixed counts, never adaptive, or the ranks would wait on each other forever;
  * a sample is host-timed (perf_counter, with a device synchronize on CUDA) over the `reps` calls: what the
    engine pays per call from Python, launch included; CUDA-graph replay of NCCL calls is not measured here;
  * the reported time is the slowest rank's median (a collective ends when its last rank does).
The input is zeros, so the repeated in-place sums stay finite.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

from moelab import timing


def measure_collective(comm, name: str, shapes: dict[str, Any], device: torch.device, dtype: torch.dtype, *,
                       samples: int = 10, reps: int = 20, warmup: int = 3) -> dict[str, Any]:
    """Time one collective of the step graph (`name` "allreduce.*" or "allgather.logits", `shapes` its graph
    shapes: M rows, N columns of the full message, tp) on `comm`. Returns the profile's per-mode result:
    {"us", "iqr_us", "samples", "timer", "mode": "host", "path", "ranks", "message_bytes"}."""
    M, N, tp = int(shapes["M"]), int(shapes["N"]), int(shapes["tp"])
    if comm.size != tp:
        raise ValueError(f"{name}: the graph is for tp={tp}, the process group has {comm.size} ranks")
    if name.startswith("allgather"):
        t = torch.zeros(M, N // tp, dtype=dtype, device=device)

        def call():
            comm.all_gather_last(t)
        path = "all_gather"
    else:
        t = torch.zeros(M, N, dtype=dtype, device=device)

        def call():
            comm.all_reduce(t)
        path = comm.path(t)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(warmup):
        call()
    sync()
    dist.barrier(group=comm.group)
    times = []
    for _ in range(samples):
        sync()
        t0 = time.perf_counter()
        for _ in range(reps):
            call()
        sync()
        times.append((time.perf_counter() - t0) * 1e6 / reps)
    m = timing.summarize(times, timer="host_clock", mode="host", calls_per_sample=reps, rotations=1, flush_l2=False)
    worst = torch.tensor([m.median_us, m.iqr_us], dtype=torch.float64, device=device)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX, group=comm.group)
    return {"us": float(worst[0]), "iqr_us": float(worst[1]), "samples": samples, "timer": "host_clock",
            "mode": "host", "path": path, "ranks": comm.size, "message_bytes": t.numel() * t.element_size()}
