"""The one timer of moelab.

Every time moelab reports — `hw`, `bench`, `profile`, `decode`, `verify` — comes from `measure` here.

How a sample is taken (CUDA):
  * warm-up calls first (compilation, autotuning, allocator growth stay out of the numbers);
  * the caller passes several argument sets whose total size exceeds the L2 and calls rotate over them,
    so a weight read twice in a row is not served from cache (`sets_for_l2` says how many are needed);
    `flush_l2=True` instead writes a buffer twice the L2 size between calls (not timed);
  * mode "graph": all rotations captured once in a CUDA graph and replayed back to back, so the time is the
    kernels themselves without host launch cost (one untimed replay leads each sample, so the GPU is busy when
    timing starts); mode "host": the calls launched from Python as eager code is, from an idle GPU;
  * a device event pair brackets each sample, and a whole-device synchronize plus a host clock bracket it
    too: if the host clock says the sample took clearly longer than the events do, work escaped onto
    another stream, and the sample's time is the host clock's, less the untimed lead (`escaped_samples` counts them);
  * statistics over samples: median, min, max, quartiles; units are in the field names.
On a machine without CUDA, samples come from the host clock, and the record says so.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import math
import os
import platform
import re
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

# A sample shorter than this is dominated by event resolution and sync jitter: batch more calls into it.
_MIN_SAMPLE_US = 200.0


@dataclass
class Measurement:
    """Per-call times of one function, in microseconds, over `samples` samples of `calls_per_sample` calls."""

    median_us: float
    min_us: float
    max_us: float
    q1_us: float
    q3_us: float
    mean_us: float
    samples: int
    calls_per_sample: int
    mode: str  # "graph" | "host" | "cpu"
    timer: str  # "cuda_events" | "host_clock"
    rotations: int
    flush_l2: bool
    escaped_samples: int = 0  # samples whose host clock exceeded the events (work on another stream)
    times_us: list[float] = field(default_factory=list, repr=False)

    @property
    def iqr_us(self) -> float:
        return self.q3_us - self.q1_us

    @property
    def spread_pct(self) -> float:
        """Interquartile range as a percentage of the median."""
        return 100.0 * self.iqr_us / self.median_us if self.median_us > 0 else 0.0

    def to_dict(self, with_samples: bool = False) -> dict[str, Any]:
        d = asdict(self)
        d["iqr_us"] = self.iqr_us
        if not with_samples:
            d.pop("times_us")
        return d


def summarize(times_us: Sequence[float], **info: Any) -> Measurement:
    """Statistics of per-call times (µs). Quartiles use the inclusive method, so one sample is its own quartiles."""
    if len(times_us) == 0:
        raise ValueError("summarize: no samples")
    xs = sorted(float(t) for t in times_us)
    if len(xs) == 1:
        q1 = q3 = xs[0]
    else:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return Measurement(
        median_us=statistics.median(xs), min_us=xs[0], max_us=xs[-1], q1_us=q1, q3_us=q3,
        mean_us=statistics.fmean(xs), samples=len(xs), times_us=xs, **info,
    )


def l2_bytes(device: torch.device | int | None = None) -> int:
    """L2 size of the current CUDA device in bytes (0 without CUDA)."""
    if not torch.cuda.is_available():
        return 0
    return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 * 2**20))


def sets_for_l2(bytes_per_set: int, l2: int | None = None, factor: float = 3.0, cap: int = 64) -> int:
    """How many distinct argument sets make the rotation's total at least `factor` × L2."""
    l2 = l2_bytes() if l2 is None else l2
    if bytes_per_set <= 0 or l2 <= 0:
        return 1
    return max(1, min(cap, math.ceil(factor * l2 / bytes_per_set)))


def measure(
    fn: Callable[..., Any],
    arg_sets: Sequence[Sequence[Any]] | None = None,
    *,
    mode: str = "graph",
    warmup: int = 3,
    samples: int = 25,
    flush_l2: bool = False,
    min_sample_us: float = _MIN_SAMPLE_US,
) -> Measurement:
    """Time `fn(*args)` for args rotating over `arg_sets`; return per-call statistics.

    mode: "graph" replays a CUDA graph of one call per set (kernel time, no launch cost);
          "host" launches from Python (what eager code pays). Without CUDA, the host clock is used
          whatever the mode, and the result says mode "cpu".
    flush_l2: write a 2×L2 buffer before every call (per-call samples; use when rotation is impossible).
    """
    sets = [tuple(a) for a in (arg_sets if arg_sets is not None else [()])]
    if not sets:
        raise ValueError("measure: arg_sets is empty")
    if mode not in ("graph", "host"):
        raise ValueError(f"measure: mode must be 'graph' or 'host', not {mode!r}")
    if not torch.cuda.is_available():
        return _measure_cpu(fn, sets, warmup, samples)
    if flush_l2:
        return _measure_flushed(fn, sets, mode, warmup, samples)

    stream = torch.cuda.current_stream()
    for _ in range(max(1, warmup)):
        for a in sets:
            fn(*a)
    torch.cuda.synchronize()

    if mode == "graph":
        graph = _capture(fn, sets)
        run_once, calls_per_run = graph.replay, len(sets)
    else:
        def run_once() -> None:
            for a in sets:
                fn(*a)
        calls_per_run = len(sets)

    # Calibrate how many runs make one sample long enough to time well.
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(stream)
    run_once()
    end.record(stream)
    torch.cuda.synchronize()
    one_run_us = max(start.elapsed_time(end) * 1e3, 1e-3)
    runs = max(1, math.ceil(min_sample_us / one_run_us))

    # Graph mode times replays back to back, as a decode loop runs them: one untimed replay goes first, so the
    # start event fires on a busy GPU with the timed replays already queued behind it. (Timed from an idle GPU,
    # a sample of one replay also holds the host's launch of that replay: stage BP, docs/worklog.md session 14.)
    preroll = mode == "graph"
    times, escaped = [], 0
    for _ in range(samples):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if preroll:
            run_once()
        start.record(stream)
        for _ in range(runs):
            run_once()
        end.record(stream)
        torch.cuda.synchronize()  # whole device: work left on other streams is waited for here
        host_us = (time.perf_counter() - t0) * 1e6
        ev_us = start.elapsed_time(end) * 1e3
        # The host bracket also holds the sync's own latency (~10-50 µs) and the untimed replay: only a clear
        # excess counts.
        if host_us > 1.25 * ev_us * (runs + preroll) / runs + 100.0:
            escaped += 1
            ev_us = host_us * runs / (runs + preroll)
        times.append(ev_us / (runs * calls_per_run))
    return summarize(times, calls_per_sample=runs * calls_per_run, mode=mode, timer="cuda_events",
                     rotations=len(sets), flush_l2=False, escaped_samples=escaped)


# The first CUDA graph a process captures runs its kernels slower than every graph captured after it, for a reason not
# found (the clocks, the buffers' placement and an eager prefill are ruled out: docs/worklog.md, sessions 32-34, 41).
# Qwen3.5-35B-A3B batch 1 (benchmarks/probe_round1.py, one machine, two processes, session 41): H100 2.739 ms a token
# for the engine's first capture against 2.590 for its re-captures (gpu-session-GF-…T0838.log); with a one-kernel graph
# captured and replayed first (`--before graph`, probe-round1-…T084101) the first capture ran 2.591, the re-captures
# 2.589-2.592; end to end (bench_decode, session 42, gpu-session-GG-…T0917.log) 2.729 -> 2.589 ms, Qwen3-30B-A3B 2.848
# -> 2.800. On the H200 the same gap (2.28 against 2.16, probe-round1-…T061735), and the same fix (session 46,
# gpu-session-GG-GQ-…T1954.log): Qwen3.5 2.280 -> 2.167 ms, Qwen3-30B-A3B 2.39 -> 2.34. So every graph moelab
# captures, timed or served, comes after such a graph. $MOELAB_PRIME_GRAPH=0 leaves it out (an A/B across processes:
# only a process's first capture can tell).
_PRIMED: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}  # device index -> the graph and its buffer, kept


def prime_graphs(device: torch.device | int | None = None) -> None:
    """Capture and replay a one-kernel CUDA graph on `device` (default: the current one), once per process and device,
    so that no graph moelab times or serves is the process's first (see above). A no-op without CUDA, when already
    done, or with $MOELAB_PRIME_GRAPH=0. Call it before a capture, never inside one."""
    if not torch.cuda.is_available() or os.environ.get("MOELAB_PRIME_GRAPH", "1") in ("", "0"):
        return
    dev = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    if dev.type != "cuda":
        return
    idx = dev.index if dev.index is not None else torch.cuda.current_device()
    if idx not in _PRIMED:
        _PRIMED[idx] = one_kernel_graph(idx)


def one_kernel_graph(idx: int) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
    """A CUDA graph of one kernel (a 4 MB add) on device idx, captured and replayed once: `prime_graphs`'s, and
    benchmarks/probe_round1.py's `--before graph` whatever $MOELAB_PRIME_GRAPH says. Keep both to keep it alive."""
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError("prime_graphs: called inside a CUDA graph capture; call it before capturing")
    with torch.cuda.device(idx):
        z = torch.zeros(1 << 20, device=f"cuda:{idx}")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            z.add_(1)
        g.replay()
        torch.cuda.synchronize()
    return g, z


def _capture(fn: Callable[..., Any], sets: list[tuple]) -> torch.cuda.CUDAGraph:
    prime_graphs()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm the side stream before capture, as PyTorch recommends
        for a in sets:
            fn(*a)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for a in sets:
            fn(*a)
    torch.cuda.synchronize()
    return g


@functools.lru_cache(maxsize=4)
def _flush_buffer(device: int) -> torch.Tensor:
    return torch.empty(max(2 * l2_bytes(device), 2**20), dtype=torch.uint8, device=f"cuda:{device}")


def _measure_flushed(fn, sets, mode, warmup, samples) -> Measurement:
    buf = _flush_buffer(torch.cuda.current_device())
    stream = torch.cuda.current_stream()
    for _ in range(max(1, warmup)):
        for a in sets:
            fn(*a)
    graph = _capture(fn, sets[:1]) if mode == "graph" else None
    times, escaped = [], 0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    first = torch.cuda.Event(enable_timing=True)
    for i in range(samples):
        a = sets[i % len(sets)]
        # The flush: 2×L2 of writes evicts whatever the last call left behind. Host mode flushes, then starts from an
        # idle GPU (an eager call after a pause); graph mode flushes inside the bracket, so the GPU is busy while the
        # replay is queued behind it (see `measure`), and `first` marks where the flush began.
        if graph is None:
            buf.add_(1)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        first.record(stream)
        if graph is not None:
            buf.add_(1)
        start.record(stream)
        graph.replay() if graph is not None else fn(*a)
        end.record(stream)
        torch.cuda.synchronize()
        host_us = (time.perf_counter() - t0) * 1e6
        ev_us = start.elapsed_time(end) * 1e3
        if host_us > 1.25 * first.elapsed_time(end) * 1e3 + 100.0:
            escaped += 1
            ev_us = host_us - (first.elapsed_time(end) * 1e3 - ev_us)
        times.append(ev_us)
    return summarize(times, calls_per_sample=1, mode=mode, timer="cuda_events", rotations=len(sets),
                     flush_l2=True, escaped_samples=escaped)


def _measure_cpu(fn, sets, warmup, samples) -> Measurement:
    for _ in range(max(1, warmup)):
        for a in sets:
            fn(*a)
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        for a in sets:
            fn(*a)
        times.append((time.perf_counter() - t0) * 1e6 / len(sets))
    return summarize(times, calls_per_sample=len(sets), mode="cpu", timer="host_clock",
                     rotations=len(sets), flush_l2=False)


def count_launches(fn: Callable[..., Any], args: Sequence[Any] = ()) -> int | None:
    """Device activities (kernels, memcpy, memset) one call of `fn(*args)` puts on the GPU, counted by
    torch.profiler's CUDA trace — counted, not assumed. None without CUDA (nothing to count)."""
    if not torch.cuda.is_available():
        return None
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == DeviceType.CUDA)


# ----------------------------------------------------------------------------------------------------
# Records: every saved result says where, when and with what it was measured.

def _git_commit() -> str:
    """HEAD's sha (+"-dirty"); $MOELAB_COMMIT when set (a copy of the tree without .git, e.g. a GPU box)."""
    if os.environ.get("MOELAB_COMMIT"):
        return os.environ["MOELAB_COMMIT"]
    try:
        root = Path(__file__).resolve().parent
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        if not re.fullmatch(r"[0-9a-f]{40}", sha):
            return "unknown"
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _driver_version() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        return out.splitlines()[0] if out else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def env_record() -> dict[str, Any]:
    """Where and with what a measurement was taken: device, driver, versions, commit, date (UTC)."""
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:  # triton is a dependency, but a record must still be writable without it
        triton_version = "not installed"
    cuda = torch.cuda.is_available()
    rec: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if cuda else f"cpu ({platform.processor() or platform.machine()})",
        "driver": _driver_version() if cuda else "none",
        "cuda": torch.version.cuda or "none",
        "torch": torch.__version__,
        "triton": triton_version,
        "python": platform.python_version(),
        "commit": _git_commit(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "timer": "cuda_events" if cuda else "host_clock",
        # Experiment switches set for the run (MOELAB_PDL=0, ...): a record made under one is not the shipped
        # configuration, and the README's tables leave it out.
        "moelab_env": {k: v for k, v in sorted(os.environ.items())
                       if k.startswith("MOELAB_") and k not in ("MOELAB_RESULTS_DIR", "MOELAB_COMMIT")},
    }
    if cuda:
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        rec["sm_count"] = p.multi_processor_count
        rec["l2_bytes"] = l2_bytes()
    return rec


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-").lower()


def save_result(kind: str, payload: dict[str, Any], out_dir: str | os.PathLike | None = None) -> Path:
    """Write `payload` with the env record as <kind>-<device>-<date>.json under `out_dir`
    (default: $MOELAB_RESULTS_DIR, else benchmarks/results)."""
    env = payload.get("env") or env_record()
    body = {"kind": kind, "env": env, **{k: v for k, v in payload.items() if k != "env"}}
    out = Path(out_dir or os.environ.get("MOELAB_RESULTS_DIR") or "benchmarks/results")
    out.mkdir(parents=True, exist_ok=True)
    stamp = env["date"].replace(":", "").replace("-", "")[:15]
    path = out / f"{slug(kind)}-{slug(env['device'])}-{stamp}.json"
    path.write_text(json.dumps(body, indent=1, default=float) + "\n")
    return path
