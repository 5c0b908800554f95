"""`moelab bench ...`: side-by-side benchmarks on this GPU (baselines, moelab, the floor)."""

from __future__ import annotations

import typer

from moelab.cli import app
from moelab.errors import UserError

bench_app = typer.Typer(help="Benchmarks on this GPU: every implementation side by side against the floor.",
                        no_args_is_help=True)
app.add_typer(bench_app, name="bench")


def _int_list(text: str, what: str) -> list[int]:
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"{what} must be a comma-separated list of integers, got {text!r}") from None
    if not vals or min(vals) < 1:
        raise UserError(f"{what} must list integers >= 1, got {text!r}")
    return vals


@bench_app.command("moe")
def bench_moe(
    model: str = typer.Option("qwen3-30b-a3b", help="Preset name or path to a config.json."),
    tokens: str = typer.Option("1,2,4,8,16,32,64,256,1024,4096", help="Comma-separated token counts T."),
    tp: int = typer.Option(1, help="Tensor-parallel degree: experts sharded along their width (one rank's shard)."),
    shared: bool = typer.Option(True, help="Include the model's shared expert, if it has one."),
    compile: bool = typer.Option(True, "--compile/--no-compile", help="Also time torch.compile of the baselines."),
    gpu: str = typer.Option("measured", help="Ceilings for the floor: 'measured' (this GPU) or a datasheet name."),
    samples: int = typer.Option(20, help="Timed samples per implementation."),
    min_sets: int = typer.Option(None, help="Calls per CUDA graph at least (distinct inputs and routing each), as a "
                                             "decode graph replays many layers; 1 charges every call a graph launch. "
                                             "Default: moelab.bench.moe.MIN_SETS (8)."),
    save: bool = typer.Option(False, help="Save the run under benchmarks/results/."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    plot: str = typer.Option(None, help="Write a PNG of time per implementation against T."),
):
    """Time one MoE layer at every T: the Hugging Face expert loop, gather+bmm, torch.compile of each,
    and moelab (host-launched and CUDA-graph-replayed), routing included, against the bandwidth floor.

    Weights rotate over layer copies and each call routes afresh, so the L2 cannot serve a call.
    """
    import torch

    from moelab import hardware, timing
    from moelab.bench import moe as bm
    from moelab.models import load_spec
    from moelab.report import console, emit_json, table

    if min_sets is None:
        min_sets = bm.MIN_SETS
    if not 1 <= min_sets <= 64:
        raise UserError(f"--min-sets must be 1..64, got {min_sets}")
    # The arguments first, so a mistyped one is named on any machine, before the missing GPU is.
    Ts = _int_list(tokens, "--tokens")
    spec = load_spec(model)
    try:
        shape = bm.shape_from_spec(spec, tp=tp, shared=shared)
    except ValueError as e:
        raise UserError(str(e)) from None
    if not torch.cuda.is_available():
        raise UserError("moelab bench moe needs a CUDA GPU; none is visible here")
    ceil = hardware.ceilings(None if gpu == "measured" else gpu)
    with console.status("measuring") as st:
        rows = bm.run(shape, Ts, read_gbps=ceil.read_gbps, bf16_tflops=ceil.bf16_tflops, samples=samples,
                      compile_baselines=compile, progress=lambda s: st.update(f"measuring {s}"), min_sets=min_sets)
    payload = {"model": spec.name, "tp": tp, "shape": shape.__dict__, "min_sets": min_sets, "ceilings": {
        "name": ceil.name, "source": ceil.source, "read_gbps": ceil.read_gbps, "bf16_tflops": ceil.bf16_tflops},
        "rows": rows}
    if save:
        path = timing.save_result("bench-moe", payload)
        console.print(f"saved {path}")
    if plot:
        from moelab.report import plot_series
        plot_series(rows, x="T", series=[c for c in rows[0] if c.endswith("_graph_us") or c.endswith("_host_us")],
                    path=plot, title=f"MoE layer, {spec.name} tp={tp}", ylabel="µs per call", logx=True, logy=True)
    if json_out:
        emit_json(payload)
        return
    cols = ["T", "distinct_experts", "floor_us", "hf_loop_host_us", "hf_loop+compile_host_us", "gather_bmm_host_us",
            "gather_bmm_graph_us", "gather_bmm+compile_graph_us", "moelab_host_us", "moelab_graph_us",
            "pct_of_floor",
            "speedup_vs_best_baseline", "moelab_rel_err"]
    table(rows, cols, title=f"MoE layer — {spec.name}, tp={tp}, E={shape.E} H={shape.H} I={shape.I} k={shape.k}",
          headers={"distinct_experts": "experts", "hf_loop_host_us": "HF loop", "hf_loop+compile_host_us": "HF+compile",
                   "gather_bmm_host_us": "gather+bmm", "gather_bmm_graph_us": "gather+bmm graph",
                   "gather_bmm+compile_graph_us": "compile graph", "moelab_host_us": "moelab host",
                   "moelab_graph_us": "moelab graph",
                   "pct_of_floor": "% floor", "speedup_vs_best_baseline": "× best",
                   "moelab_rel_err": "rel err"},
          caption=f"µs per call, median of {samples}; % floor and × best use the moelab graph column; "
                  f"floor at {ceil.read_gbps:.0f} GB/s ({ceil.source})")
