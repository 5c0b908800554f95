"""One measured decode run: generate, then time prefill and the decode loop with `moelab.timing`, and set
the result against the roofline floor of the same model, batch and context.

Effective bandwidth = bytes one decode step must read (`moelab.models.decode_step_ops` at the run's mean
context) / measured time per step. Percent of floor = floor time per step (`moelab.roofline`, with this
GPU's measured ceilings or a named datasheet row) / measured time per step.
"""

from __future__ import annotations

from typing import Any

import torch

from moelab import timing
from moelab.engine.generate import Engine
from moelab.models import ModelSpec


def floor_for(spec: ModelSpec, batch: int, ctx: int, elem_bytes: int, gpu: str | None, tp: int = 1) -> dict[str, Any]:
    """Bytes one decode step reads and its roofline floor on `gpu` (None: this machine's, if it has a GPU);
    with `tp` > 1, one rank's bytes and floor (its shard, plus the all-reduces' estimated cost)."""
    from moelab.models import decode_step_ops

    if elem_bytes not in (1, 2):  # the op graph knows bf16/fp16 (2 B) and fp8 (1 B) weights
        return {"bytes_per_step": None, "floor_ms_per_step": None, "ceilings": None,
                "floor_note": "no floor for fp32 weights (the op graph counts bf16/fp8 bytes)"}
    op_list = decode_step_ops(spec, batch=batch, ctx=ctx, tp=tp, dtype="bf16" if elem_bytes == 2 else "fp8")
    out: dict[str, Any] = {"bytes_per_step": sum(op.bytes * op.count for op in op_list)}
    if gpu is None and not torch.cuda.is_available():
        return {**out, "floor_ms_per_step": None, "ceilings": None,
                "floor_note": "no GPU here: pass a GPU name for a datasheet floor"}
    from moelab import hardware, roofline

    ceil = hardware.ceilings(gpu)
    report = roofline.analyze(op_list, ceil, batch=batch)
    return {**out, "floor_ms_per_step": report.step_floor_ms, "ceilings": f"{ceil.name} ({ceil.source})",
            "read_gbps": ceil.read_gbps, "floor_note": ""}


def measure_run(eng: Engine, prompt: torch.Tensor, new_tokens: int, *, repeats: int = 3,
                gpu: str | None = None) -> tuple[torch.Tensor, dict[str, Any]]:
    """Generate `new_tokens` for `prompt` [B, P], then time prefill and decode `repeats` times each.

    The first generation is the warm-up (compilation, graph capture). The timed decode runs restart from
    the prefill's token, so they decode exactly the tokens returned; the summary says whether every run
    produced them (`deterministic`).
    """
    spec = eng.spec
    tp = getattr(eng, "tp", 1)  # set by engine.tp.build_tp
    # Under tensor parallelism every rank must make the same calls (each holds collectives): no
    # per-rank calibration of how many calls make one timing sample.
    same_calls = {"min_sample_us": 0.0} if tp > 1 else {}
    tokens = eng.generate(prompt, new_tokens)
    B, P = prompt.shape
    pre = timing.measure(lambda: eng.prefill(prompt), mode="host", warmup=1, samples=repeats, **same_calls)
    steps = new_tokens - 1
    summary: dict[str, Any] = {
        "model": spec.name, "model_type": spec.model_type, "impl": eng.model.impl, "batch": B, "prompt_len": P,
        "new_tokens": new_tokens, "dtype": str(eng.dtype).removeprefix("torch."), "device": str(eng.device),
        "graphs": eng.use_graphs, "prefill_ms": pre.median_us / 1e3, "prefill_spread_pct": pre.spread_pct,
    }
    if steps >= 1:
        first = tokens[:, 0].clone()

        def decode_run() -> None:
            eng.reseed()
            eng.decode(first, steps)

        dec = timing.measure(decode_run, mode="host", warmup=1, samples=repeats, **same_calls)
        step_ms = dec.median_us / 1e3 / steps
        again = eng.generate(prompt, new_tokens)
        fl = floor_for(spec, B, P + new_tokens // 2, eng.embed.element_size(), gpu, tp=tp)
        summary.update(
            decode_ms_per_token=step_ms, decode_spread_pct=dec.spread_pct, tokens_per_s=B * 1e3 / step_ms,
            deterministic=bool(torch.equal(again, tokens)), mean_ctx=P + new_tokens // 2, **fl,
            effective_gbps=fl["bytes_per_step"] / (step_ms * 1e6) if fl["bytes_per_step"] else None,
            pct_of_floor=100.0 * fl["floor_ms_per_step"] / step_ms if fl.get("floor_ms_per_step") else None,
        )
    summary["peak_gpu_mem_gib"] = (torch.cuda.max_memory_allocated(eng.device) / 1024 ** 3
                                   if eng.device.type == "cuda" else None)
    summary["timer"] = pre.timer
    if tp > 1:
        comm = eng.comm
        summary.update(tp=tp, overlap=eng.model.overlap, ep=eng.model.ep, oneshot_max_bytes=comm.oneshot_max_bytes,
                       allreduce_calls=dict(comm.calls))
    return tokens, summary
