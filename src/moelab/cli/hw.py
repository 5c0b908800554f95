"""`moelab hw`: this GPU's measured ceilings, or a known GPU's datasheet row."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from moelab.cli import app
from moelab.errors import UserError

_GPU_HELP = ("Show the datasheet row of a known GPU instead of measuring: h100, h200, b200, a100, mi300x, 4090, "
             "bi-v100, gfx1151 (case-insensitive; 'measured' means this GPU).")


@app.command()
def hw(
    gpu: Annotated[str | None, typer.Option("--gpu", help=_GPU_HELP, metavar="NAME")] = None,
    refresh: Annotated[bool, typer.Option("--refresh", help="Measure again even when this GPU's ceilings are cached.")] = False,
    save: Annotated[bool, typer.Option("--save", help="Also write the measurement to benchmarks/results/hw-<device>-<date>.json.")] = False,
    quick: Annotated[bool, typer.Option("--quick", help="Measure faster: smaller buffers, fewer read configurations and samples.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead of a table.")] = False,
) -> None:
    """Show the ceilings every moelab number is judged against.

    Read and copy bandwidth, bf16/fp16/fp8 matmul rate, launch cost per kernel (from Python and replayed
    from a CUDA graph), SM count, L2 size, warp size, and the ridge point (FLOP per byte) derived from them,
    each with how it was measured.

    With a GPU, the first run measures (under two minutes on an H200; --quick is faster) and caches the
    result per device, driver, torch and Triton version under $MOELAB_CACHE_DIR, $XDG_CACHE_HOME/moelab or
    ~/.cache/moelab; later runs read the cache until --refresh. Without a GPU it says so in one line and
    shows the datasheet row of --gpu NAME, or the table of known GPUs.
    """
    import torch
    from rich.console import Console

    from moelab import hardware as hwm
    from moelab.report import emit_json

    err = Console(stderr=True)
    named = gpu is not None and gpu.strip().lower() != "measured"
    have_gpu = torch.cuda.is_available()
    if named and (refresh or quick or save):
        raise UserError("--refresh, --quick and --save measure this GPU; they cannot be combined with --gpu NAME")
    if not have_gpu and (refresh or quick or save):
        raise UserError(f"no GPU here to measure; pass --gpu NAME to see a datasheet row (known: "
                        f"{', '.join(hwm.known_names())})")

    c = hwm.ceilings(gpu) if named else None  # an unknown name fails here, before anything is printed
    if not have_gpu:
        what = f"showing the {c.name} datasheet row instead" if c else "showing the known GPUs instead"
        (err if json_out else _console()).print(f"no GPU here (torch.cuda.is_available() is False); {what}",
                                                highlight=False)
    if c is not None:
        if json_out:
            emit_json({"gpu_present": have_gpu, "ceilings": c.to_dict()})
        else:
            _print_ceilings(c, caption=c.source)
        return
    if not have_gpu:
        rows = hwm.known_gpus()
        if json_out:
            emit_json({"gpu_present": False, "known": [c.to_dict() for c in rows]})
        else:
            _print_known(rows)
        return

    from moelab.timing import env_record, save_result

    key = hwm.cache_key(env_record())
    c = None if refresh else hwm.load_cached(key)
    from_cache = c is not None
    if c is None:
        err.print(f"measuring {key['device']} ({'quick' if quick else 'full'} probe)...")
        c = hwm.probe(quick=quick, log=lambda m: err.print(f"  {m}", highlight=False))
        cache = hwm.save_cached(c, key)
    else:
        cache = hwm.cache_path(key)
    saved = None
    if save:
        # The record carries the environment of the measurement (a cached one may be days old).
        saved = save_result("hw", {"env": {**env_record(), **c.extra.get("env", {})}, "from_cache": from_cache,
                                   "ceilings": c.to_dict()})
    if json_out:
        emit_json({"gpu_present": True, "from_cache": from_cache, "cache": str(cache),
                   "saved": str(saved) if saved else None, "ceilings": c.to_dict()})
        return
    quick_note = " (quick probe)" if c.extra.get("quick") else ""
    _print_ceilings(c, caption=f"{'read from' if from_cache else 'measured now, cached in'} {cache}{quick_note}")
    if saved:
        _console().print(f"saved {saved}")


def _reflow(doc: str) -> str:
    """Join each paragraph's lines: Typer keeps single line breaks, which read badly in --help."""
    import inspect

    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n"))


hw.__doc__ = _reflow(hw.__doc__ or "")


def _console() -> Any:
    from moelab.report import console

    return console


def _rows(c: Any) -> list[dict[str, Any]]:
    n = c.notes
    rows: list[dict[str, Any]] = [
        {"quantity": "read bandwidth", "value": c.read_gbps, "unit": "GB/s", "how": n.get("read_gbps")},
    ]
    read = c.extra.get("read") if c.measured else None
    if read:
        for label, k in (("  best Triton read", "best_triton"), ("  best torch read", "best_torch")):
            rows.append({"quantity": label, "value": read[k]["rate_per_s"] / 1e9, "unit": "GB/s",
                         "how": read[k]["how"]})
    if c.measured and c.extra.get("datasheet_read_gbps"):
        ds = c.extra["datasheet_read_gbps"]
        rows.append({"quantity": "  datasheet read", "value": ds, "unit": "GB/s",
                     "how": f"{c.extra['datasheet_row']} datasheet; measured best is {100 * c.read_gbps / ds:.1f} %"})
    rows += [
        {"quantity": "copy bandwidth", "value": c.copy_gbps, "unit": "GB/s", "how": n.get("copy_gbps")},
        {"quantity": "bf16 matmul", "value": c.bf16_tflops, "unit": "TFLOP/s", "how": n.get("bf16_tflops")},
        {"quantity": "fp16 matmul", "value": c.fp16_tflops, "unit": "TFLOP/s", "how": n.get("fp16_tflops")},
        {"quantity": "fp8 matmul", "value": c.fp8_tflops, "unit": "TFLOP/s", "how": n.get("fp8_tflops")},
        {"quantity": "ridge point (bf16)", "value": c.ridge_bf16(), "unit": "FLOP/byte",
         "how": "bf16 matmul rate / read bandwidth: ops below it are memory-bound"},
        {"quantity": "Triton launch", "value": c.launch_triton_us, "unit": "µs", "how": n.get("launch_triton_us")},
        {"quantity": "torch op launch", "value": c.launch_torch_us, "unit": "µs", "how": n.get("launch_torch_us")},
        {"quantity": "kernel in a CUDA graph", "value": c.graph_kernel_us, "unit": "µs",
         "how": n.get("graph_kernel_us")},
        {"quantity": "SMs / CUs", "value": c.sm_count, "unit": "", "how": n.get("sm_count")},
        {"quantity": "L2", "value": c.l2_bytes / 2**20 if c.l2_bytes else None, "unit": "MiB",
         "how": n.get("l2_bytes")},
        {"quantity": "warp size", "value": c.warp_size, "unit": "threads", "how": n.get("warp_size")},
        {"quantity": "memory", "value": c.memory_gb, "unit": "GB", "how": n.get("memory_gb")},
        {"quantity": "interconnect", "value": c.interconnect_gbps, "unit": "GB/s",
         "how": n.get("interconnect_gbps")},
    ]
    for r in rows:
        if r["how"] is None:
            r["how"] = "—" if r["value"] is None else "not recorded"
    return rows


def _print_ceilings(c: Any, caption: str) -> None:
    from moelab.report import table

    title = f"{c.name}: {'measured' if c.measured else 'datasheet row (peaks; a measured probe is preferred)'}"
    table(_rows(c), ["quantity", "value", "unit", "how"], title=title, caption=caption)


def _print_known(rows: list[Any]) -> None:
    from moelab.report import table

    out = [{"name": c.name, "read": c.read_gbps, "bf16": c.bf16_tflops, "fp8": c.fp8_tflops,
            "ridge": c.ridge_bf16(), "memory": c.memory_gb, "sms": c.sm_count, "warp": c.warp_size}
           for c in rows]
    basis = "; ".join(f"{c.name}: {c.source.split(':')[0]}" for c in rows if not c.source.startswith("datasheet"))
    table(out, ["name", "read", "bf16", "fp8", "ridge", "memory", "sms", "warp"],
          headers={"read": "read GB/s", "bf16": "bf16 TF/s", "fp8": "fp8 TF/s", "ridge": "ridge F/B",
                   "memory": "mem GB", "sms": "SMs"},
          title="Known GPUs: `moelab hw --gpu NAME` shows one with its sources",
          caption=f"datasheet peaks (dense), not measurements ({basis}); ridge = bf16 FLOP per byte read")
