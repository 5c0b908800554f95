"""`moelab profile MODEL`: where a real decode step's time goes, op by op, per implementation, against the floor."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import typer

from moelab.cli import app
from moelab.errors import UserError

_DTYPES = ("bf16", "fp16")


def parse_impls(text: str) -> tuple[str, ...]:
    from moelab.profile.impls import IMPLS

    vals = tuple(v.strip() for v in text.split(",") if v.strip())
    bad = [v for v in vals if v not in IMPLS]
    if not vals or bad or len(set(vals)) != len(vals):
        raise UserError(f"--impl takes a comma-separated subset of {','.join(IMPLS)}, got {text!r}")
    return tuple(i for i in IMPLS if i in vals)  # always eager, compile, moelab order


def _check_out(path: Path | None, flag: str, suffix: str) -> None:
    if path is None:
        return
    if path.suffix.lower() != suffix:
        raise UserError(f"{flag} must name a {suffix} file, got {str(path)!r}")
    if not path.parent.exists():
        raise UserError(f"{flag}: folder {str(path.parent)!r} does not exist")


def csv_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (context, op, implementation): the per-op table in long form."""
    out = []
    for pc in result["per_ctx"]:
        for row in pc["ops"]:
            for impl in result["impls"] if not row["estimated"] else ["estimate"]:
                r = row["impls"].get(impl) or {}
                g, h = (r.get("graph") or {}).get("us"), (r.get("host") or {}).get("us")
                t = row["floor_us"] if row["estimated"] else g if g is not None else h
                out.append({"ctx": pc["ctx"], "op": row["name"], "group": row["group"], "count": row["count"],
                            "impl": impl, "graph_us": g, "host_us": h, "launches": r.get("launches"),
                            "floor_us": row["floor_us"], "pct_of_floor": 100 * row["floor_us"] / t if t else None,
                            "gbps": r.get("gbps"), "step_us": t * row["count"] if t is not None else None,
                            "estimated": row["estimated"], "note": row["note"]})
    return out


def _print(result: dict[str, Any]) -> None:
    from moelab.models.graph import GROUPS
    from moelab.report import console, table

    impls, pc = result["impls"], result["per_ctx"][0]
    last = impls[-1]
    rows = []
    for row in pc["ops"]:
        mark = "*" if row["estimated"] else "‡" if "Gated DeltaNet" in row["note"] else "†" if row["torch_only"] else ""
        r = {"op": row["name"] + mark, "group": row["group"], "count": row["count"], "floor": row["floor_us"]}
        for i in impls:
            m = row["impls"].get(i) or {}
            r[f"{i}_g"] = (m.get("graph") or {}).get("us")
            r[f"{i}_h"] = (m.get("host") or {}).get("us")
            r[f"{i}_n"] = m.get("launches")
        bd = {o["name"]: o for o in pc["breakdown"][last]["ops"]}.get(row["name"], {})
        r["pct"] = bd.get("pct_of_floor")
        r["gbps"] = (row["impls"].get(last) or {}).get("gbps")
        if "moelab" in impls:
            r["err"] = (row["impls"].get("moelab") or {}).get("rel_err_vs_eager")
        r["share"] = 100 * bd["share"] if bd else None
        rows.append(r)
    headers = {"floor": "floor µs", "pct": f"{last} % floor", "gbps": f"{last} GB/s", "share": f"{last} share %",
               "err": "moelab rel err vs eager"}
    for i in impls:
        headers.update({f"{i}_g": f"{i} graph µs", f"{i}_h": f"{i} host µs", f"{i}_n": f"{i} launches"})
    table(rows, title=f"{result['model']}: per op, B={result['batch']}, S={pc['ctx']}, tp={result['tp']}, "
                      f"{result['dtype']}, on {result['gpu']}", headers=headers,
          caption="µs per call (graph = CUDA-graph replayed: the kernels alone; host = launched from Python); "
                  "launches counted by torch.profiler. * estimated, not measured; † torch in every column "
                  "(no kernel needed); ‡ Gated DeltaNet (moelab: kernels/gdn.py)")
    brows = []
    for g in GROUPS:
        r = {"group": g}
        for i in impls:
            gg = pc["breakdown"][i]["groups"][g]
            r[f"{i}_ms"], r[f"{i}_pct"] = gg["us"] / 1e3, 100 * gg["share"]
        if any(r[f"{i}_ms"] for i in impls):
            brows.append(r)
    tot = {"group": "step (Σ per op × count)"}
    for i in impls:
        tot[f"{i}_ms"], tot[f"{i}_pct"] = pc["breakdown"][i]["total_us"] / 1e3, 100.0
    brows.append(tot)
    hb = {}
    for i in impls:
        hb.update({f"{i}_ms": f"{i} ms", f"{i}_pct": f"{i} %"})
    table(brows, headers=hb, title="step breakdown by group (the first worklog's part 2)",
          caption=f"step floor {pc['step_floor_us'] / 1e3:.3f} ms; "
                  + ", ".join(f"{i} at {pc['breakdown'][i]['pct_of_floor'] or 0:.0f} % of it" for i in impls))
    step = result.get("step")
    if step:
        srows = []
        for i in impls:
            s = step["impls"][i]
            gp = s.get("gap") or {}
            srows.append({"impl": i, "sum": gp.get("kernel_sum_us", 0) / 1e3,
                          "host": None if s["host_us"] is None else s["host_us"] / 1e3,
                          "graph": None if s["graph_us"] is None else s["graph_us"] / 1e3,
                          "gap_h": None if gp.get("gap_host_us") is None else gp["gap_host_us"] / 1e3,
                          "gap_g": None if gp.get("gap_graph_us") is None else gp["gap_graph_us"] / 1e3,
                          "vs": gp.get("graph_vs_sum_pct"), "launches": s["launches"],
                          "per": gp.get("gap_per_launch_us"), "err": s.get("rel_err_vs_eager")})
        table(srows, headers={"sum": "Σ per-op kernels ms", "host": "chained, host ms", "graph": "chained, graph ms",
                              "gap_h": "host gap ms", "gap_g": "graph gap ms", "vs": "graph vs Σ %",
                              "launches": "launches / step", "per": "host gap µs / launch",
                              "err": "rel err vs eager chain"},
              title=f"the whole step, chained (S={step['ctx']}): dispatch and launch gap",
              caption=(step.get("note", "") + ("; " if step.get("note") else "")
                       + "collectives not run on one GPU: their estimate is in the breakdown, not here; the chain's "
                         "error vs eager is end to end (a routing flip at a near-tie can make it large: the "
                         "per-op errors are the kernel check)"))
    if len(result["per_ctx"]) > 1:
        sw = [{k: v for k, v in r.items() if not k.endswith("_%") or any(
               x["groups"][k[:-2]]["us"] for x in (pc2["breakdown"][last] for pc2 in result["per_ctx"]))}
              for r in result["sweep"]]
        for r in sw:
            r["total_us"] = r["total_us"] / 1e3
        table(sw, headers={"total_us": f"{last} step ms"}, title=f"share of the step by group per context ({last})")
    for n in result["notes"]:
        console.print(f"[dim]note: {n}[/]")


@app.command("profile")
def profile_cmd(
    model: str = typer.Argument(..., help="Preset name (see `moelab models`) or a path to a config.json or "
                                          "checkpoint folder."),
    batch: int = typer.Option(1, "--batch", help="Sequences decoded together (tokens per step)."),
    ctx: str = typer.Option("1024", "--ctx", help="Context length S, or a comma-separated list: attention is "
                                                  "re-measured at each, to show its share grow."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel degree: ops run at one rank's shard shapes. On one "
                                           "GPU the all-reduces are estimated; under `torchrun --nproc-per-node "
                                           "N` (N = --tp) they are measured on the process group."),
    impl: str = typer.Option("eager,compile,moelab", "--impl", help="Implementations to measure, side by side: "
                             "eager (plain PyTorch, the Hugging Face way), compile (torch.compile of it), moelab."),
    gpu: str = typer.Option(None, "--gpu", help="Ceilings for the floors: 'measured' (default: this GPU's "
                                                "cached probe) or a known GPU's datasheet row."),
    dtype: str = typer.Option("bf16", "--dtype", help="Weights and activations: bf16 or fp16."),
    samples: int = typer.Option(25, "--samples", help="Timed samples per measurement (median and spread)."),
    step: bool = typer.Option(True, "--step/--no-step", help="Also chain the layers and time the whole step."),
    json_out: bool = typer.Option(False, "--json", help="Print the whole result as JSON instead of tables."),
    csv_out: Path = typer.Option(None, "--csv", help="Also write the per-op rows (long form) to this CSV file."),
    plot: Path = typer.Option(None, "--plot", help="Also write a PNG: stacked breakdown per implementation and "
                                                   "the roofline with each op's measured point."),
    save: bool = typer.Option(True, "--save/--no-save", help="Save the result under benchmarks/results/ "
                              "($MOELAB_RESULTS_DIR) with the GPU, versions and commit."),
) -> None:
    """Where does a real decode step's time go? Every op of the model's decode-step graph at its real
    (tensor-parallel-sharded) shapes, random weights, timed with moelab's one timer — graph-replayed (the
    kernels alone) and host-launched (what eager Python pays) — for eager PyTorch, torch.compile and
    moelab's kernels, with its floor, percent of floor, achieved bandwidth and launches per call (counted
    by torch.profiler). Then the step breakdown (per-op time × count, grouped as MoE + shared expert,
    attention, norms, lm_head, linear attention, embedding), and the layers chained into one real step,
    host-launched and graph-replayed: its difference from the per-op sum is the dispatch/launch gap.

    Needs a GPU; `moelab roofline MODEL` gives the analytic floor without one.
    """
    import torch

    from moelab import timing
    from moelab.cli.roofline import parse_ctx
    from moelab.models import load_spec
    from moelab.profile import runner

    contexts = parse_ctx(ctx)
    impls = parse_impls(impl)
    if dtype not in _DTYPES:
        raise UserError(f"--dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")
    if samples < 3:
        raise UserError(f"--samples must be at least 3, got {samples}")
    if batch < 1 or tp < 1:
        raise UserError(f"--batch and --tp must be positive integers, got {batch} and {tp}")
    _check_out(csv_out, "--csv", ".csv")
    _check_out(plot, "--plot", ".png")
    spec = load_spec(model)
    from moelab.models.graph import decode_step_ops

    decode_step_ops(spec, batch=batch, ctx=contexts[0], tp=tp)  # a --tp that does not shard the model, named here
    runner.device_check()
    comm = None
    from moelab.engine.comm import env_world

    world = env_world()
    if world is not None and world[1] > 1:  # started by torchrun: measure the collectives on the group
        from moelab.engine.comm import Comm
        from moelab.engine.tp import init_distributed

        rank, size, local = world
        if size != tp:
            raise UserError(f"torchrun started {size} processes but --tp is {tp}: they must be equal")
        comm = Comm(device=init_distributed(rank, size, local))
        if rank != 0:  # rank 0 alone prints and saves; the others measure alongside it (no progress bar)
            json_out = True
    from moelab import hardware

    ceil = hardware.ceilings(gpu)
    meter = runner.make_meter(samples)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=True, disable=json_out) as bar:
        task = bar.add_task("profiling", total=None)
        result = runner.profile(
            spec, batch=batch, ctxs=contexts, tp=tp, impls=impls, ceilings=ceil,
            dtype=torch.bfloat16 if dtype == "bf16" else torch.float16, meter=meter, with_step=step,
            total=lambda n: bar.update(task, total=n),
            progress=lambda what: bar.update(task, advance=1, description=what), comm=comm)
    if comm is not None and comm.rank != 0:
        return
    if csv_out is not None:
        rows = csv_rows(result)
        with csv_out.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    if plot is not None:
        from moelab.profile import plot as plot_mod

        plot_mod.write(result, str(plot))
    if save:
        result["saved"] = str(timing.save_result(f"profile-{spec.name}", result))
    if json_out:
        from moelab.report import emit_json

        emit_json(result)
        return
    _print(result)
    from moelab.report import console

    for what, p in (("CSV", csv_out), ("plot", plot), ("result", result.get("saved"))):
        if p:
            console.print(f"{what} written to {p}")
