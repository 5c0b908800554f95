"""Registers and spills of moelab's kernels on sm_90, without a GPU: the test suite's sm_90 compile jobs
(`tests/kernels/conftest.py`'s SM90_JOBS: each kernel at a real launch's constexprs) through Triton's compiler and
the ptxas it bundles (`ptxas -v`).

    PYTHONPATH=DIR:src python benchmarks/regs_sm90.py [JOB ...] [--set JOB KEY=VALUE ...]

DIR holds the Triton to compile with: the GPU machine's (3.6; `pip download triton==3.6.0 --no-deps` then
`pip install --no-deps --target DIR`), since registers differ between versions (the 3.9 wheel's ptxas also refuses
its own PTX version). Prints, a line a job: registers a thread, spill bytes, and how many programs of that many
registers (at the job's warps) fit an SM's 65,536 (occupancy by registers only). `--set JOB K=V` overrides one
constexpr of one job (repeatable; V is an int, True/False or a string), e.g. `--set moe_pairs BLOCK_H=16` (num_warps and
num_stages set the launch's options instead); `--count RX`
counts the PTX lines matching a regex (e.g. `shfl.sync`: warp shuffles).
It compiles as the suite does (`conftest._SM90_SCRIPT`): pointers marked 16-byte aligned, integers only where a job
lists them. A real launch specialises every integer divisible by 16, and that changes the count (the census
kernel's "moe_decode" job, integers unmarked, 153-168 registers; "moe_decode_pdl", marked as a T=8 launch is, 67),
so compare jobs specialised alike. Session 29 used it to find that probe_rows' configs sat at 237-255 registers and
that the conv epilogue added none.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def _value(text: str):
    if text in ("True", "False"):
        return text == "True"
    try:
        return int(text)
    except ValueError:
        return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("jobs", nargs="*", help="SM90_JOBS names (default: all)")
    ap.add_argument("--set", nargs=2, action="append", default=[], metavar=("JOB", "KEY=VALUE"))
    ap.add_argument("--count", action="append", default=[], metavar="REGEX",
                    help="also count the PTX lines matching REGEX (repeatable), e.g. 'shfl.sync' or 'atom.'")
    a = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "kernels"))
    os.environ.setdefault("TRITON_INTERPRET", "0")  # conftest sets the interpreter on otherwise (no GPU here)
    conftest = importlib.import_module("conftest")
    jobs = conftest.SM90_JOBS
    names = a.jobs or list(jobs)
    unknown = [n for n in names + [j for j, _ in a.set] if n not in jobs]
    if unknown:
        raise SystemExit(f"regs_sm90: no job {unknown[0]!r}; the jobs: {', '.join(jobs)}")
    chosen = {}
    for name in names:
        module, kernel, types, consts, *rest = jobs[name]
        consts = dict(consts)
        rest = list(rest)
        for job, kv in a.set:
            if job == name:
                key, _, val = kv.partition("=")
                if key in ("num_warps", "num_stages"):  # a launch option, not a constexpr
                    while len(rest) < 2:
                        rest.append([] if len(rest) == 0 else {})
                    rest[1] = dict(rest[1], **{key: _value(val)})
                else:
                    consts[key] = _value(val)
        chosen[name] = (module, kernel, types, consts, *rest)
    # The test suite's own compile (`conftest._SM90_SCRIPT`: the same signature, specialisation and options), in a
    # subprocess with the interpreter off; then ptxas on each PTX.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", conftest._SM90_SCRIPT, json.dumps(chosen)], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"regs_sm90: the compile failed: {proc.stderr.strip().splitlines()[-1:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    import triton  # the one the subprocess used (same PYTHONPATH): its bundled ptxas

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    print(f"Triton {triton.__version__}, {ptxas}")
    for name, job in out.items():
        if "error" in job:
            print(f"{name:28s} does not compile: {job['error'].splitlines()[0][:120]}")
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
            f.write(job["ptx"])
        err = subprocess.run([str(ptxas), "-v", "--gpu-name", "sm_90a", f.name, "-o", os.devnull],
                             capture_output=True, text=True).stderr
        os.unlink(f.name)
        regs, spill = re.search(r"Used (\d+) registers", err), re.search(r"(\d+) bytes spill stores", err)
        if not regs:
            print(f"{name:28s} ptxas: {err.strip().splitlines()[-1] if err.strip() else 'no report'}")
            continue
        launch = chosen[name][5] if len(chosen[name]) > 5 else {}
        r, warps = int(regs.group(1)), dict({"num_warps": 4}, **launch)["num_warps"]
        counts = "".join(f", {len(re.findall(rx, job['ptx']))} × {rx}" for rx in a.count)
        print(f"{name:28s} {r:4d} registers, {int(spill.group(1)) if spill else 0:5d} B spilled, "
              f"{65536 // (r * 32 * warps)} programs of {warps} warps an SM{counts}")


if __name__ == "__main__":
    main()
