"""`moelab verify`: judge a candidate kernel on a problem; PASS or FAIL with every reason."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from moelab.cli import app
from moelab.errors import UserError


@app.command()
def verify(
    candidate: Annotated[Path | None, typer.Argument(help="The candidate: a .py file defining `ModelNew`.",
                                                     show_default=False)] = None,
    problem: Annotated[str | None, typer.Option("--problem", help="A shipped problem by name (see --list).",
                                                metavar="NAME")] = None,
    problem_file: Annotated[Path | None, typer.Option("--problem-file", metavar="PROBLEM.py",
                                                      help="A problem file in KernelBench format (Model, "
                                                           "get_inputs, get_init_inputs).")] = None,
    precision: Annotated[str | None, typer.Option("--precision", metavar="fp32|fp16|bf16",
                                                  help="The task's precision; inputs and weights are cast to it. "
                                                       "Default: the problem's PRECISION, else fp32.")] = None,
    trials: Annotated[int, typer.Option("--trials", help="Correctness trials, each on fresh inputs from a "
                                                         "secret seed and another input distribution.")] = 5,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds the candidate's process may run.")] = 300.0,
    no_time: Annotated[bool, typer.Option("--no-time", help="Check correctness only; do not time.")] = False,
    no_compile: Annotated[bool, typer.Option("--no-compile", help="Skip the torch.compile baseline.")] = False,
    seed: Annotated[int | None, typer.Option("--seed", help="Fix the seeds (to reproduce a verdict); default "
                                                            "drawn from the OS's secure source.")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the shipped problems and exit.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON on stdout.")] = False,
) -> None:
    """Judge CANDIDATE.py against a problem, with a harness built not to be fooled.

    Correctness: a float64 oracle, fresh inputs from a seed the candidate
    cannot know, four input distributions, a shape the timing does not use,
    NaN-poisoned memory, shape/dtype/stride, aliasing, mutation, determinism,
    and problems whose answer a trivial kernel nearly gets.

    Precision: TF32 or casts below the task's precision fail.
    Static: an AST scan for casts, fallbacks, streams, threads, patching,
    and torch calls where a kernel is claimed.

    Timing: candidate, eager and torch.compile interleaved in one process on
    rotated inputs, re-checked afterwards, against the roofline floor; on a
    GPU the torch profiler confirms which kernels ran.

    Isolation: the candidate runs in its own process, in a temporary
    directory, with time and memory limits and no network where the OS allows.

    Exit status: 0 PASS, 1 FAIL, 2 usage error. Reason codes: `moelab.verify`.
    """
    from moelab.verify import list_problems, load_problem
    from moelab.verify import verify as run_verify

    if list_:
        rows = []
        for name in list_problems():
            p = load_problem(name)
            rows.append({"problem": name, "precision": p.precision, "description": p.doc})
        if json_out:
            from moelab.report import emit_json
            emit_json(rows)
        else:
            from moelab.report import table
            table(rows, title="shipped problems (moelab verify CANDIDATE.py --problem NAME)")
        return
    if candidate is None:
        raise UserError("give a candidate file (or --list to see the problems)")
    if (problem is None) == (problem_file is None):
        raise UserError("give exactly one of --problem NAME or --problem-file PROBLEM.py")
    if problem_file is not None and not problem_file.is_file():
        raise UserError(f"problem file not found: {problem_file}")
    v = run_verify(candidate, problem if problem is not None else problem_file, precision=precision,
                   trials=trials, timeout_s=timeout, time_it=not no_time, seed=seed,
                   compile=False if no_compile else None)
    if json_out:
        from moelab.report import emit_json
        emit_json(v.to_dict())
    else:
        _print(v)
    raise typer.Exit(0 if v.passed else 1)


def _print(v) -> None:
    from moelab.report import console, fmt, table

    colour = "green" if v.passed else "red"
    console.print(f"[bold {colour}]{'PASS' if v.passed else 'FAIL'}[/] {v.candidate} on {v.problem} "
                  f"({v.precision}, tolerance {fmt(v.tolerance)})", highlight=False)
    if v.reasons:
        table([{"code": r.code, "reason": r.message} for r in v.reasons], title="reasons")
    t = v.times
    if t.get("candidate_us") is not None:
        rows = []
        for name, key in (("candidate", "candidate"), ("eager", "eager"), ("torch.compile", "compile")):
            m = v.timing.get(key)
            if m:
                rows.append({"implementation": name, "median µs": m["median_us"],
                             "spread %": 100 * m["iqr_us"] / m["median_us"] if m["median_us"] else None,
                             "samples": m["samples"], "timer": m["timer"]})
        table(rows, title="time per call", caption=(
            f"speed-up vs eager {fmt(t['speedup_vs_eager'])}×, vs torch.compile {fmt(t['speedup_vs_compile'])}×; "
            f"floor {fmt(t['floor_us'])} µs, candidate at {fmt(t['pct_of_floor'])} % of it"))
    checks = ", ".join(f"{k}={'ok' if val else ('FAIL' if val is False else 'not run')}"
                       for k, val in v.checks.items())
    console.print(f"checks: {checks}", highlight=False)
    errs = ", ".join(f"{k} {val:.2e}" for k, val in v.errors.items())
    if errs:
        console.print(f"worst relative error: {errs}", highlight=False)
    for n in v.notes:
        console.print(f"note: {n}", highlight=False)
    iso = v.isolation
    if iso:
        console.print(f"isolation: network {iso.get('network')}; memory {iso.get('memory_limit')}", highlight=False)
