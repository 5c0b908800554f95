"""The candidate's isolated process: its own temporary directory, time and memory limits, no network
where the OS allows, and a check afterwards that it wrote nothing it was not given.

Inputs and outputs cross the boundary as files of tensors (torch.save in, torch.load with
`weights_only=True` out, so a crafted result file cannot run code in the parent).
"""

from __future__ import annotations

import functools
import hashlib
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Outcome:
    result: dict | None  # what the worker wrote, or None
    returncode: int | None
    timed_out: bool
    wall_s: float
    stderr_tail: str
    isolation: dict[str, Any] = field(default_factory=dict)
    wrote_outside: list[str] = field(default_factory=list)


@functools.lru_cache(maxsize=2)
def network_prefix(cuda: bool = False) -> tuple[str, ...]:
    """A command prefix that runs a process without network (a new network namespace), or () if none works.

    With `cuda`, the namespace must also let CUDA initialise (checked once per process, a few seconds):
    a sandbox that broke the GPU would fail every honest candidate.
    """
    if os.environ.get("MOELAB_VERIFY_NO_UNSHARE") or not shutil.which("unshare"):
        return ()
    probe = [sys.executable, "-c", "import torch; torch.cuda.init(); torch.zeros(1, device='cuda')"] \
        if cuda else ["true"]
    for prefix in (("unshare", "-n"), ("unshare", "-rn")):
        try:
            if subprocess.run([*prefix, *probe], capture_output=True, timeout=120).returncode == 0:
                return prefix
        except (OSError, subprocess.SubprocessError):
            pass
    return ()


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _limits(memory_bytes: int | None, cpu_s: int) -> None:  # runs in the child before exec
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def run_worker(job: dict, candidate: Path, watch: list[Path], *, timeout_s: float,
               memory_gb: float | None, cuda: bool) -> Outcome:
    """Run `moelab.verify._worker` on `job` with `candidate` copied into a fresh directory.

    What must not change: the files in `watch` (the candidate's source and the problem file: paths the
    worker is given or can guess), the job file, a sentinel beside it, and the set of entries in the
    temporary tree outside the worker's own directory. (Directory listings of shared places like /tmp are
    not watched: other processes change them.) memory_gb: RLIMIT_AS on CPU (skipped on CUDA, whose
    driver reserves large address ranges; the worker caps GPU memory instead).
    """
    import torch

    base = Path(tempfile.mkdtemp(prefix="moelab-verify-"))
    jobdir, workdir = base / "job", base / "work"
    jobdir.mkdir()
    workdir.mkdir()
    try:
        shutil.copy2(candidate, workdir / "candidate.py")
        job = {**job, "candidate": str(workdir / "candidate.py")}
        torch.save(job, jobdir / "job.pt")
        sentinel = jobdir / "sentinel"
        sentinel.write_text(secrets.token_hex(16))
        before = {"job": _digest(jobdir / "job.pt"), "sentinel": sentinel.read_text()}
        watched = {f: _digest(f) for f in watch}
        base_entries = set(os.listdir(base))

        prefix = network_prefix(cuda)
        env = dict(os.environ)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        mem = None if cuda or not memory_gb else int(memory_gb * 2**30)
        cmd = [*prefix, sys.executable, "-m", "moelab.verify._worker", str(jobdir)]
        t0 = time.perf_counter()
        with open(jobdir / "stdout", "wb") as out, open(jobdir / "stderr", "wb") as err:
            proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True,
                                    # CPU seconds add up over threads: the wall-clock timeout is the real limit
                                    preexec_fn=functools.partial(_limits, mem, (int(timeout_s) + 30) * (os.cpu_count() or 1)))
            timed_out = False
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            # The whole session goes: the worker and anything the candidate started.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        wall = time.perf_counter() - t0

        result = None
        if (jobdir / "result.pt").exists() and not timed_out:
            try:
                result = torch.load(jobdir / "result.pt", weights_only=True)
            except Exception as e:  # noqa: BLE001 - an unreadable result is the candidate's failure
                result = {"error": {"code": "crash", "message": f"unreadable result file: {type(e).__name__}"},
                          "calls": []}
        stderr = (jobdir / "stderr").read_bytes()[-4000:].decode(errors="replace")

        outside = []
        if _digest(jobdir / "job.pt") != before["job"]:
            outside.append(str(jobdir / "job.pt"))
        if sentinel.read_text() != before["sentinel"]:
            outside.append(str(sentinel))
        extra = sorted(set(os.listdir(jobdir)) - {"job.pt", "sentinel", "stdout", "stderr", "result.pt"})
        outside += [str(jobdir / n) for n in extra]
        outside += [str(f) for f, h in watched.items() if not f.is_file() or _digest(f) != h]
        outside += [str(base / n) for n in sorted(set(os.listdir(base)) - base_entries)]
        iso = {"process": "subprocess", "network": "isolated (network namespace)" if prefix
               else "not isolated (no usable `unshare -n` here, or CUDA fails inside it)",
               "memory_limit": f"RLIMIT_AS {memory_gb} GiB" if mem else
               ("GPU memory fraction" if cuda else "none"), "timeout_s": timeout_s, "workdir": "temporary"}
        return Outcome(result, proc.returncode, timed_out, wall, stderr, iso, outside)
    finally:
        shutil.rmtree(base, ignore_errors=True)
