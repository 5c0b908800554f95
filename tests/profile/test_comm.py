"""`moelab profile --tp N` under torchrun: the collectives measured on a real process group (CPU: gloo, 2 ranks)."""

from __future__ import annotations

import json

import pytest
import torch

from moelab.engine.tp import launch


def _worker(out_dir: str) -> None:
    import os

    import torch.distributed as dist

    from moelab import hardware
    from moelab.engine.comm import Comm, env_world
    from moelab.engine.tp import init_distributed
    from moelab.models import spec_from_config
    from moelab.profile import runner
    from moelab.profile.comm import measure_collective
    from moelab.profile.measure import Meter
    from tests.profile.conftest import FakeTimer, _tiny_qwen35

    rank, size, local = env_world()
    comm = Comm(device=init_distributed(rank, size, local, device="cpu"))
    # The collective itself: a real all-reduce of the step's message, timed (and correct: zeros stay zeros).
    m = measure_collective(comm, "allreduce.moe", {"M": 2, "N": 64, "tp": size}, torch.device("cpu"),
                           torch.float32, samples=3, reps=4)
    t = torch.full((2, 64), float(rank + 1))
    comm.all_reduce(t)
    # The profile with a fake timer for the kernels, the collectives measured on the group.
    runner.device_check = lambda: torch.device("cpu")
    timer = FakeTimer()
    meter = Meter(measure=timer, launches=lambda fn, args: 100 if len(args) == 0 else 3, samples=3)
    spec = spec_from_config(_tiny_qwen35(), source="tiny", name="tiny")
    res = runner.profile(spec, batch=2, ctxs=[16], tp=size, impls=("eager",), ceilings=hardware.ceilings("h200"),
                         meter=meter, comm=comm)
    rows = {r["name"]: r for r in res["per_ctx"][0]["ops"]}
    comm_rows = {n: {"estimated": r["estimated"], "us": r["impls"]["eager"]["host"]["us"], "note": r["note"]}
                 for n, r in rows.items() if r["group"] == "communication"}
    bd = res["per_ctx"][0]["breakdown"]["eager"]
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"measure": m, "sum": t[0, 0].item(), "rows": comm_rows, "notes": res["notes"],
                   "comm_us": bd["comm_us"], "estimated_us": bd["estimated_us"], "comm_measured": bd["comm_measured"],
                   "kernel_sum_us": bd["kernel_sum_us"],
                   "want_kernel_sum": sum(r["count"] * (25.0 if r["name"] == "experts" else 10.0)
                                          for r in rows.values() if r["group"] != "communication")}, f)
    dist.barrier()


def test_collectives_are_measured_under_a_process_group(tmp_path):
    launch(2, _worker, str(tmp_path))
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for r in ranks:
        m = r["measure"]
        assert m["us"] > 0 and m["ranks"] == 2 and m["path"] == "dist" and m["message_bytes"] == 2 * 64 * 4
        assert r["sum"] == 3.0  # 1 + 2: the all-reduce ran across both processes
        assert set(r["rows"]) == {"allreduce.attention", "allreduce.moe", "allgather.logits"}
        for row in r["rows"].values():
            assert not row["estimated"] and row["us"] > 0 and "measured on 2 ranks" in row["note"]
        assert r["comm_measured"] and r["comm_us"] > 0 and r["estimated_us"] == 0
        assert r["kernel_sum_us"] == pytest.approx(r["want_kernel_sum"])  # collectives stay out of the kernel sum
        assert any("measured through torch.distributed" in n for n in r["notes"])
    # the slowest rank's median: every rank reports the same number
    assert ranks[0]["measure"]["us"] == ranks[1]["measure"]["us"]
