"""The candidate's process: `python -m moelab.verify._worker JOBDIR`.

It imports the candidate, builds `ModelNew` with the problem's weights, runs the calls the parent asked
for, and writes what it saw to JOBDIR/result.pt. It never sees the oracle or the verdict; the parent
judges everything it writes. Its working directory is a fresh temporary one.
"""

from __future__ import annotations

import inspect
import math
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

# Taken before the candidate can touch them: the worker's own clock and the originals to restore.
_perf_counter = time.perf_counter


class CandidateError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def _guarded() -> list[tuple[Any, str]]:
    """(owner, attribute) pairs a candidate must not replace: clocks, syncs, the timer, the harness's tools."""
    import torch

    import moelab.timing as timing
    pairs: list[tuple[Any, str]] = [(time, n) for n in ("perf_counter", "perf_counter_ns", "time", "time_ns",
                                                        "monotonic", "monotonic_ns", "process_time", "sleep")]
    pairs += [(timing, n) for n in dir(timing) if callable(getattr(timing, n)) and not n.startswith("__")]
    pairs += [(torch.cuda, n) for n in ("synchronize", "current_stream", "Event", "Stream", "stream",
                                        "set_per_process_memory_fraction", "empty_cache")]
    pairs += [(torch.cuda.Event, n) for n in ("elapsed_time", "record", "synchronize", "query", "wait")]
    pairs += [(torch, n) for n in ("save", "load", "equal", "allclose", "empty", "empty_like", "full",
                                   "zeros", "ones", "compile", "manual_seed", "no_grad")]
    pairs += [(torch.Tensor, n) for n in ("clone", "copy_", "cpu", "to", "contiguous", "view", "data_ptr",
                                          "untyped_storage")]
    pairs += [(torch.nn.Module, n) for n in ("__call__", "load_state_dict", "to")]
    return pairs


def _static(owner: Any, name: str) -> Any:
    # getattr_static: a stable identity (plain getattr makes a new bound method on every access)
    return inspect.getattr_static(owner, name, None)


def _snapshot() -> dict[tuple[int, str], tuple[Any, Any]]:
    # torch._dynamo wraps some torch functions (torch.manual_seed among them) the first time it is imported,
    # which the compile baseline does after the snapshot: on the H200 that flagged every honest candidate as
    # `patch` (2026-12-01). Import it first, so only the candidate's own replacements show.
    import torch._dynamo  # noqa: F401
    return {(id(o), n): (o, _static(o, n)) for o, n in _guarded()}


def _patched(snap: dict) -> list[str]:
    """Names replaced since `snap`; each is put back so the timer measures with the real clock."""
    bad = []
    for (_, name), (owner, orig) in snap.items():
        if _static(owner, name) is not orig:
            bad.append(f"{getattr(owner, '__name__', type(owner).__name__)}.{name}")
            setattr(owner, name, orig)
    return bad


def _to(xs: list, device: str) -> list:
    import torch
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in xs]


def _flat(out: Any) -> list:
    if isinstance(out, (tuple, list)):
        return [y for x in out for y in _flat(x)]
    return [out]


def _bits_equal(a, b) -> bool:
    import torch
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(
        a.detach().contiguous().reshape(-1).view(torch.uint8), b.detach().contiguous().reshape(-1).view(torch.uint8))


def _overlaps(a, b) -> bool:
    sa, sb = a.untyped_storage(), b.untyped_storage()
    if sa.device != sb.device or sa.nbytes() == 0 or sb.nbytes() == 0:
        return False
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes()


def _poison(specs: list[tuple[int, str]], device: str) -> None:
    """Fill memory the candidate might receive unwritten with NaN (or a sentinel for integers).

    Tensors of each expected output size are allocated, filled and freed: the allocator hands exactly
    such a block to the next allocation of that size, so `torch.empty` returns NaN, not a stale answer.
    """
    import torch
    bufs = []
    for numel, dt in specs:
        dtype = getattr(torch, dt)
        for _ in range(3):
            t = torch.empty(max(int(numel), 1), dtype=dtype, device=device)
            t.fill_(math.nan if dtype.is_floating_point else -12345)
            bufs.append(t)
    if device.startswith("cuda"):
        big = torch.empty(64 * 2**20, dtype=torch.float32, device=device)
        big.fill_(math.nan)
        bufs.append(big)
        torch.cuda.synchronize()
    del bufs


def _sync(device: str) -> None:
    import torch
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _build(cls, init_inputs, seed, state, device, dtype):
    import torch
    torch.manual_seed(seed)
    m = cls(*init_inputs)
    own = m.state_dict()
    # KernelBench's rule: same seed, then copy the reference's tensors where names and shapes agree.
    shared = {k: v for k, v in state.items() if k in own and own[k].shape == v.shape}
    m.load_state_dict(shared, strict=False)
    m = m.to(device=device)
    if dtype is not None:
        m = m.to(dtype=dtype)
    return m.eval()


def _call(model, inputs, poison, device):
    import torch
    _poison(poison, device)
    with torch.no_grad():
        out = model(*inputs)
    _sync(device)
    return out


def _describe(outs: list) -> list[dict]:
    import torch
    d = []
    for o in outs:
        if isinstance(o, torch.Tensor):
            d.append({"tensor": True, "shape": tuple(o.shape), "dtype": str(o.dtype).replace("torch.", ""),
                      "stride": tuple(o.stride()), "device": str(o.device)})
        else:
            d.append({"tensor": False, "type": type(o).__name__})
    return d


def run(job: dict, res: dict) -> None:
    import torch
    device, dtype = job["device"], getattr(torch, job["dtype"])
    if device.startswith("cuda"):
        # The GPU cap stands in for RLIMIT_AS, which would break the CUDA driver's address reservations.
        torch.cuda.set_per_process_memory_fraction(float(job["gpu_memory_fraction"]))
    if job["precision"] == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
    # The reference's weights, made as the parent makes them (same seed, CPU), before the candidate loads.
    res["stage"] = "weights"
    from moelab.verify.problem import import_file
    prob = import_file(Path(job["problem"]), "moelab_problem")
    torch.manual_seed(job["seed"])
    job["state_dict"] = {k: v.to(dtype) if v.is_floating_point() else v
                         for k, v in prob.Model(*job["init_inputs"]).state_dict().items()}
    for name in [n for n, m in sys.modules.items() if m is prob]:
        del sys.modules[name]
    del prob
    snap = _snapshot()

    res["stage"] = "import"
    sys.path.insert(0, os.getcwd())
    import importlib.util
    spec = importlib.util.spec_from_file_location("candidate", job["candidate"])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException as e:  # noqa: BLE001 - anything the candidate raises is its failure, reported
        raise CandidateError("exit" if isinstance(e, SystemExit) else "compile_error",
                             f"importing the candidate raised {_one_line(e)}") from None
    if not hasattr(mod, "ModelNew"):
        raise CandidateError("no_modelnew", "the candidate defines no `ModelNew`")

    res["stage"] = "construct"
    try:
        model = _build(mod.ModelNew, job["init_inputs"], job["seed"], job["state_dict"], device, dtype)
    except BaseException as e:  # noqa: BLE001
        raise CandidateError("exit" if isinstance(e, SystemExit) else "crash",
                             f"ModelNew(*get_init_inputs()) raised {_one_line(e)}") from None

    res["stage"] = "correctness"
    prev: list | None = None
    prev_copy: list | None = None
    for i, call in enumerate(job["calls"]):
        inputs = _to(call["inputs"], device)
        before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        outs_all = []
        for rep in range(2 if call.get("twice") else 1):
            try:
                outs = _flat(_call(model, inputs, job["poison"], device))
            except BaseException as e:  # noqa: BLE001
                raise CandidateError("exit" if isinstance(e, SystemExit) else "crash",
                                     f"forward on call {i} raised {_one_line(e)}") from None
            outs_all.append(outs)
            if rep == 0:
                first = [o.detach().clone() if isinstance(o, torch.Tensor) else o for o in outs]
        rec: dict[str, Any] = {"meta": _describe(outs_all[0]),
                               "outputs": [o.cpu() if isinstance(o, torch.Tensor) else None for o in first]}
        if len(outs_all) > 1:
            rec["outputs2"] = [o.detach().cpu() if isinstance(o, torch.Tensor) else None for o in outs_all[1]]
        rec["mutated"] = [j for j, (a, b) in enumerate(zip(before, inputs))
                          if isinstance(a, torch.Tensor) and not _bits_equal(a, b)]
        rec["alias"] = [j for j, x in enumerate(inputs) if isinstance(x, torch.Tensor) and any(
            isinstance(o, torch.Tensor) and _overlaps(o, x) for o in outs_all[-1])]
        # An earlier result changed under the caller: the candidate writes every answer into one buffer.
        rec["overwrote_previous"] = bool(prev is not None and any(
            isinstance(a, torch.Tensor) and not _bits_equal(a, b) for a, b in zip(prev, prev_copy)))
        res["calls"].append(rec)
        prev, prev_copy = outs_all[-1], [o.detach().clone() if isinstance(o, torch.Tensor) else o
                                         for o in outs_all[-1]]
    del prev, prev_copy

    res["stage"] = "flags"
    res["patched"] = _patched(snap)
    if job["precision"] == "fp32":
        res["tf32"] = {"cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                       "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
                       "float32_matmul_precision": torch.get_float32_matmul_precision()}
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")

    if job["time_it"]:
        res["stage"] = "timing"
        from moelab.verify import _timed
        _timed.run(job, res, model, device, dtype, _call)
        res["patched"] += [p for p in _patched(snap) if p not in res["patched"]]
    if job.get("profile") and device.startswith("cuda"):
        res["stage"] = "profile"
        from moelab.verify import _timed
        _timed.profile(job, res, model, device)
    res["stage"] = "done"


def _one_line(e: BaseException) -> str:
    if isinstance(e, SystemExit):
        return f"SystemExit({e.code!r})"
    tb = traceback.extract_tb(e.__traceback__)
    where = next((f" (line {f.lineno} of the candidate)" for f in reversed(tb) if "candidate" in f.filename), "")
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg[:300]}{where}"


def main(jobdir: str) -> int:
    import torch
    jd = Path(jobdir)
    job = torch.load(jd / "job.pt", weights_only=False)
    res: dict[str, Any] = {"stage": "start", "error": None, "calls": [], "patched": [], "notes": []}
    t0 = _perf_counter()
    try:
        run(job, res)
    except CandidateError as e:
        res["error"] = {"code": e.code, "message": e.message}
    except BaseException as e:  # noqa: BLE001 - the parent turns this into a verdict, never a crash
        res["error"] = {"code": "exit" if isinstance(e, SystemExit) else "crash",
                        "message": f"during {res['stage']}: {_one_line(e)}"}
    res["worker_s"] = _perf_counter() - t0
    tmp = jd / "result.tmp"
    torch.save(res, tmp)
    os.replace(tmp, jd / "result.pt")
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: a candidate's atexit hooks or threads cannot change the result


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
