"""The worker's timing and profiling phase (runs inside the candidate's process, judged by the parent).

Candidate, eager and `torch.compile` are timed with `moelab.timing.measure` only, interleaved in rounds in
one process on the same rotated inputs, under the same grad mode and precision flags. Afterwards the
candidate is called again on two of the timed input sets, then on new values written into those same
tensors: an answer cached by input pointer shows up as the old answer.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

ROUNDS = 3  # interleaving: candidate, eager, compile, candidate, eager, compile, ...


def _problem_module(path: str):
    from moelab.verify.problem import import_file
    return import_file(Path(path), "moelab_problem")


def run(job: dict, res: dict, model, device: str, dtype, call) -> None:
    import torch

    from moelab import timing
    from moelab.verify._worker import _build, _flat, _to

    prob = _problem_module(job["problem"])
    eager = _build(prob.Model, job["init_inputs"], job["seed"], job["state_dict"], device, dtype)
    impls: dict[str, Any] = {"candidate": model, "eager": eager}
    notes = res.setdefault("notes", [])
    if job.get("compile"):
        try:
            impls["compile"] = torch.compile(eager)
        except Exception as e:  # noqa: BLE001 - a baseline that cannot compile is reported, not fatal
            notes.append(f"torch.compile failed: {type(e).__name__}: {e}")

    def cast(xs):
        return [x.to(device=device, dtype=dtype) if isinstance(x, torch.Tensor) and x.is_floating_point()
                else (x.to(device) if isinstance(x, torch.Tensor) else x) for x in xs]

    checked = [_to(s, device) for s in job["timing_check"]["sets"]]
    per_set = sum(x.numel() * x.element_size() for x in checked[0] if isinstance(x, torch.Tensor))
    n_sets = timing.sets_for_l2(per_set) if device.startswith("cuda") else len(checked) + 1
    torch.manual_seed(job["timing_seed"])
    extra = [cast(prob.get_inputs()) for _ in range(max(0, n_sets - len(checked)))]
    sets = [checked[0], *extra, *checked[1:]]

    stats: dict[str, dict] = {k: {"times": [], "escaped": 0, "info": None} for k in impls}
    samples = max(ROUNDS, int(job.get("samples", 15)))
    with torch.no_grad():
        for r in range(ROUNDS):
            for name, fn in list(impls.items()):
                try:
                    m = timing.measure(fn, sets, mode="host", warmup=3 if r == 0 else 1,
                                       samples=samples // ROUNDS)
                except Exception as e:  # noqa: BLE001
                    if name == "candidate":
                        raise
                    notes.append(f"{name} baseline failed while timed: {type(e).__name__}: {e}")
                    impls.pop(name)
                    stats.pop(name)
                    continue
                st = stats[name]
                st["times"] += m.times_us
                st["escaped"] += m.escaped_samples
                st["info"] = dict(calls_per_sample=m.calls_per_sample, mode=m.mode, timer=m.timer,
                                  rotations=m.rotations, flush_l2=m.flush_l2)
    res["timing"] = {k: timing.summarize(v["times"], escaped_samples=v["escaped"], **v["info"]).to_dict()
                     for k, v in stats.items() if v["times"]}

    # Re-check after timing: same tensors, then new values in the same tensors.
    same, refill = [], []
    for s, new in zip(checked, job["timing_check"]["refill"]):
        with torch.no_grad():
            eager(*s)  # its freed output now sits in the allocator, as in harnesses that run the reference first
        same.append([o.detach().cpu() for o in _flat(call(model, s, job["poison"], device))
                     if isinstance(o, torch.Tensor)])
        for x, v in zip(s, new):
            if isinstance(x, torch.Tensor):
                x.copy_(v.to(x.device))
        refill.append([o.detach().cpu() for o in _flat(call(model, s, job["poison"], device))
                       if isinstance(o, torch.Tensor)])
    res["recheck"] = {"same": same, "refill": refill}


def _trace(fn, inputs) -> tuple[list[str], list[int]]:
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof_ctx

    with torch.no_grad(), prof_ctx(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        fn(*inputs)
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "trace.json"
        p.export_chrome_trace(str(path))
        trace = json.loads(path.read_text())
    kernels = [e for e in trace.get("traceEvents", []) if e.get("cat") == "kernel"]
    return (sorted({str(e.get("name", "")) for e in kernels}),
            sorted({int(e.get("args", {}).get("stream", -1)) for e in kernels}))


def profile(job: dict, res: dict, model, device: str) -> None:
    """Which GPU kernels the candidate launched, and on which streams, next to eager's (torch profiler)."""
    from moelab.verify._worker import _build, _to

    inputs = _to(job["timing_check"]["sets"][0], device)
    kernels, streams = _trace(model, inputs)
    prob = _problem_module(job["problem"])
    import torch
    eager = _build(prob.Model, job["init_inputs"], job["seed"], job["state_dict"], device,
                   getattr(torch, job["dtype"]))
    _, eager_streams = _trace(eager, inputs)
    res["profile"] = {"kernels": kernels, "streams": streams, "eager_streams": eager_streams}
