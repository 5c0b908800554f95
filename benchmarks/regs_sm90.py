"""Registers and spills of moelab's kernels on sm_90, without a GPU: the test suite's sm_90 compile jobs
(`tests/kernels/conftest.py`'s SM90_JOBS: each kernel at a real launch's constexprs) through Triton's compiler and
the ptxas it bundles (`ptxas -v`).

    PYTHONPATH=DIR:src TRITON_INTERPRET=0 python benchmarks/regs_sm90.py [JOB ...] [--set JOB KEY=VALUE ...]

DIR holds the Triton to compile with: the GPU machine's (3.6; `pip download triton==3.6.0 --no-deps` then
`pip install --no-deps --target DIR`), since registers differ between versions (the 3.9 wheel's ptxas also refuses
its own PTX version). Prints, a line a job: registers a thread, spill bytes, and how many 4-warp programs of that many
registers fit an SM's 65,536 (occupancy by registers only). `--set JOB K=V` overrides one constexpr of one job
(repeatable; V is an int, True/False or a string), e.g. `--set moe_pairs BLOCK_H=16`.
Session 29 used it to find that probe_rows' configs sat at 255 registers and that the conv epilogue added none.
Pointers are marked 16-byte aligned, integers only where a job lists them: a real launch specialises every integer
divisible by 16, and that changes the count (the census kernel's "moe_decode" job, integers unmarked, 153-168
registers; "moe_decode_pdl", marked as a T=8 launch is, 67), so compare jobs specialised alike.
"""

from __future__ import annotations

import argparse
import importlib
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
    a = ap.parse_args()
    if os.environ.get("TRITON_INTERPRET", "0") != "0":
        raise SystemExit("regs_sm90: set TRITON_INTERPRET=0 (the interpreter's kernels cannot be compiled)")
    os.environ["TRITON_INTERPRET"] = "0"
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "kernels"))
    jobs = importlib.import_module("conftest").SM90_JOBS
    names = a.jobs or list(jobs)
    unknown = [n for n in names + [j for j, _ in a.set] if n not in jobs]
    if unknown:
        raise SystemExit(f"regs_sm90: no job {unknown[0]!r}; the jobs: {', '.join(jobs)}")
    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    print(f"Triton {triton.__version__}, {ptxas}")
    for name in names:
        module, kernel, types, consts, div16, *launch = jobs[name]
        consts = dict(consts)
        for job, kv in a.set:
            if job == name:
                key, _, val = kv.partition("=")
                consts[key] = _value(val)
        fn = getattr(importlib.import_module("moelab.kernels." + module), kernel)
        sig = {n: ("constexpr" if n in consts else types.get(n, "i32")) for n in fn.arg_names}
        marked = set(div16) | {n for n in fn.arg_names if sig[n].startswith("*")}
        attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in marked}
        options = dict({"num_warps": 4}, **(launch[0] if launch else {}))
        try:
            k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                               target=GPUTarget("cuda", 90, 32), options=options)
        except Exception as e:  # a job this Triton cannot compile: say so and go on
            print(f"{name:28s} does not compile: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
            f.write(k.asm["ptx"])
        err = subprocess.run([str(ptxas), "-v", "--gpu-name", "sm_90a", f.name, "-o", os.devnull],
                             capture_output=True, text=True).stderr
        os.unlink(f.name)
        regs, spill = re.search(r"Used (\d+) registers", err), re.search(r"(\d+) bytes spill stores", err)
        if not regs:
            print(f"{name:28s} ptxas: {err.strip().splitlines()[-1] if err.strip() else 'no report'}")
            continue
        r, warps = int(regs.group(1)), options["num_warps"]
        print(f"{name:28s} {r:4d} registers, {int(spill.group(1)) if spill else 0:5d} B spilled, "
              f"{65536 // (r * 32 * warps)} programs of {warps} warps an SM")


if __name__ == "__main__":
    main()
