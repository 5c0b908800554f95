"""`moelab roofline MODEL`: the analytic floor of one decode step, op by op, on a GPU's ceilings."""

from __future__ import annotations

from pathlib import Path

import typer

from moelab.cli import app
from moelab.errors import UserError

_GROUP_COLUMNS = ("attention", "moe", "linear_attention", "norm", "lm_head", "communication", "other")


def parse_ctx(text: str) -> list[int]:
    """'1024' or '1024,16384,65536' -> [1024, ...]; UserError for anything else."""
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"--ctx must be an integer or a comma-separated list of integers, got {text!r}") from None
    if not vals or min(vals) < 1:
        raise UserError(f"--ctx values must be integers >= 1, got {text!r}")
    return vals


def _resolve_gpu(gpu: str | None) -> tuple[object, str]:
    """The Ceilings to use and a caption note saying where they come from."""
    from moelab import hardware

    if gpu is None:
        import torch

        if torch.cuda.is_available():
            c = hardware.ceilings("measured")
            return c, f"ceilings measured on this {c.name}"
        c = hardware.ceilings("h200")
        return c, "no GPU here: H200 datasheet row (pass --gpu NAME or run on a GPU for measured ceilings)"
    c = hardware.ceilings(gpu)
    return c, f"ceilings: {c.source}"


@app.command("roofline")
def roofline_cmd(
    model: str = typer.Argument(..., help="Preset name (see `moelab models`) or a path to a config.json "
                                          "or a checkpoint folder."),
    gpu: str = typer.Option(None, "--gpu", help="'measured' (this GPU's cached probe) or a known GPU's datasheet "
                                                "row (h100, h200, b200, a100, mi300x, ...). Default: measured "
                                                "when a GPU is present, else the H200 datasheet."),
    batch: int = typer.Option(1, "--batch", help="Sequences decoded together (tokens per step)."),
    ctx: str = typer.Option("1024", "--ctx", help="Context length S (cached tokens each sequence attends to), "
                                                  "or a comma-separated list to see attention's share grow."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel degree; ops are one rank's shard, all-reduces "
                                           "are estimated from the interconnect bandwidth."),
    dtype: str = typer.Option("bf16", "--dtype", help="Weight dtype of the linear layers: bf16 or fp8 "
                                                      "(embedding, lm_head, router, activations, KV stay bf16)."),
    distinct_experts: float = typer.Option(None, "--experts-read", help="Distinct experts one MoE layer reads "
                                           "(measured); default E(1-(1-k/E)^B)."),
    plot: Path = typer.Option(None, "--plot", help="Also write the roofline chart to this PNG file."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
) -> None:
    """Where can a decode step's time go, at best? Every op of one step (embedding, norms, attention,
    router, experts, lm_head, all-reduces) with its count per step, bytes and FLOPs per call, arithmetic
    intensity, bound, floor, and share of the step; then the step floor and the tokens/s ceiling.

    floor = max(bytes / read bandwidth, FLOPs / matmul rate) per call; comm ops: bytes on the wire /
    interconnect + a per-call latency (estimated). Launch overhead is not in the floor.
    """
    from moelab import roofline
    from moelab.models import decode_step_ops, load_spec
    from moelab.report import console, emit_json, table

    contexts = parse_ctx(ctx)
    spec = load_spec(model)
    ceil, where = _resolve_gpu(gpu)
    reports = []
    for s in contexts:
        ops = decode_step_ops(spec, batch=batch, ctx=s, tp=tp, dtype=dtype, distinct_experts=distinct_experts)
        reports.append(roofline.analyze(ops, ceil, batch=batch))
    if plot is not None:
        if plot.suffix.lower() != ".png":
            raise UserError(f"--plot must name a .png file, got {str(plot)!r}")
        if not plot.parent.exists():
            raise UserError(f"--plot: folder {str(plot.parent)!r} does not exist")
        roofline.plot(reports, ceil, str(plot), labels=[f"S={s}" for s in contexts],
                      title=f"{spec.name}, B={batch}, tp={tp}, {dtype} on {ceil.name}")
    if json_out:
        emit_json({"model": spec.name, "source": spec.source, "gpu": ceil.name, "gpu_source": ceil.source,
                   "note": where, "batch": batch, "tp": tp, "dtype": dtype,
                   "read_gbps": ceil.read_gbps, "bf16_tflops": ceil.bf16_tflops,
                   "interconnect_gbps": ceil.interconnect_gbps,
                   "contexts": [{"ctx": s, **r.to_dict()} for s, r in zip(contexts, reports)],
                   **({"plot": str(plot)} if plot else {})})
        return
    first = reports[0]
    rows = [{"op": o.name, "group": o.group, "count": o.count, "MB": o.bytes / 1e6, "MFLOP": o.flops / 1e6,
             "FLOP/B": o.intensity, "bound": o.bound + ("*" if o.estimated else ""), "floor_us": o.floor_us,
             "step_us": o.step_us, "share_%": 100 * o.share} for o in first.ops]
    table(rows, headers={"MB": "MB/call", "MFLOP": "MFLOP/call", "floor_us": "floor µs", "step_us": "× count µs",
                         "share_%": "share %"},
          title=f"{spec.name}: one decode step, B={batch}, S={contexts[0]}, tp={tp}, {dtype}, on {ceil.name}",
          caption=f"step floor {first.step_floor_ms:.3f} ms = {first.tokens_per_s:,.0f} tokens/s ceiling; "
                  f"{first.bytes_per_step / 1e9:.3f} GB per step at {ceil.read_gbps:,.0f} GB/s. {where}"
                  + (". * estimated" if any(o.estimated for o in first.ops) else ""))
    if len(contexts) > 1:
        sweep = []
        for s, r in zip(contexts, reports):
            g = r.group_shares()
            sweep.append({"ctx": s, "floor_ms": r.step_floor_ms, "tok_s": r.tokens_per_s,
                          **{f"{k}_%": 100 * g[k] for k in _GROUP_COLUMNS}})
        table(sweep, headers={"floor_ms": "step floor ms", "tok_s": "tokens/s", "linear_attention_%": "GDN %",
                              "communication_%": "comm %"},
              title="share of the step floor by group, per context length")
    if plot is not None:
        console.print(f"roofline chart written to {plot}")
