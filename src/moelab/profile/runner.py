"""`profile(...)`: measure every op of a decode step and the chained step, and assemble the report.

Order of work (one GPU, one process, same inputs for every implementation):
  1. the op graph and its roofline for each context (`models.graph`, `roofline.analyze`);
  2. per unit (`impls.build_units`): rotation sets sized by `timing.sets_for_l2`, then for each
     implementation the graph-replayed and host-launched time and the counted launches per call;
     attention is re-measured at every further context of `--ctx`;
  3. the chained step at the first context, per implementation, host-launched and graph-replayed,
     with its launches counted; scaled from fewer layers when the model does not fit (said in `step`);
  4. the bookkeeping (`breakdown`).
`device_check` and the `Meter` are module-level and injectable: tests run all of this on a CPU with a
fake timer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from moelab import timing
from moelab.engine.model import conv_in_proj, norm_router_max_t
from moelab.kernels.router import fused_router_max_t
from moelab.errors import UserError
from moelab.hardware import Ceilings
from moelab.models import ModelSpec, decode_step_ops
from moelab.profile import breakdown as bk
from moelab.profile.impls import IMPLS, LayerFns, Unit, build_units, check_supported, dims
from moelab.profile.measure import Meter
from moelab.profile.step import ChainedStep, head_bytes, layer_bytes, layers_that_fit

NO_GRAPH_EXPERT_LOOP = "not capturable: the HF expert loop asks the host which experts were hit"


def require_gpu() -> torch.device:
    """The CUDA device, or a UserError saying the profile needs one."""
    if not torch.cuda.is_available():
        raise UserError("moelab profile measures on a GPU and none is visible here; "
                        "`moelab roofline MODEL` gives the analytic breakdown without one")
    return torch.device("cuda")


device_check: Callable[[], torch.device] = require_gpu


def _graph_blocker(what: str, impl: str, spec: ModelSpec) -> str | None:
    """Why `what` ("experts", "step" or another unit) cannot be captured under `impl`, or None. Only the
    HF expert loop (eager, and compiled: it graph-breaks at the same host sync) is known not to be;
    trying anyway could leave the stream in a failed capture."""
    loop = what == "experts" or (what == "step" and spec.is_moe)
    return NO_GRAPH_EXPERT_LOOP if impl in ("eager", "compile") and loop else None


def _fn(unit: Unit, impl: str, meter: Meter) -> Callable:
    base = unit.fns["moelab" if impl == "moelab" else "eager"]
    return meter.compiled((unit.name, unit.count, id(base)), base) if impl == "compile" else base


def _flat(x: Any) -> list[torch.Tensor]:
    return [t for t in (x if isinstance(x, (tuple, list)) else (x,)) if isinstance(t, torch.Tensor)]


def rel_err(got: Any, ref: Any) -> float:
    """Largest ‖got − ref‖ / ‖ref‖ over the tensors of two outputs (integer tensors, e.g. expert ids:
    the fraction of entries that differ)."""
    errs = []
    for g, r in zip(_flat(got), _flat(ref), strict=True):
        if r.is_floating_point():
            g64, r64 = g.double(), r.double()
            n = torch.linalg.vector_norm(r64)
            errs.append(float(torch.linalg.vector_norm(g64 - r64) / n) if n > 0 else float(torch.linalg.vector_norm(g64)))
        else:
            errs.append(float((g.long() != r.long()).double().mean()) if r.numel() else 0.0)
    return max(errs, default=0.0)


_COPY_MAX_BYTES = 2 ** 30  # larger arguments are weights, read only: shared, not copied


def _copies(args) -> tuple:
    """The tensors of an argument set cloned (the Gated DeltaNet states, the KV caches are written in place)."""
    return tuple(a.clone() if isinstance(a, torch.Tensor) and a.numel() * a.element_size() <= _COPY_MAX_BYTES else a
                 for a in args)


def _check(unit: Unit, args) -> float:
    """moelab against the plain-torch callable on copies of the same inputs: the outputs, and every argument either
    one wrote in place (a state, a cache), compared by `rel_err`."""
    mine, theirs = _copies(args), _copies(args)
    err = rel_err(unit.fns["moelab"](*mine), unit.fns["eager"](*theirs))
    for m, e, a in zip(mine, theirs, args):
        if isinstance(a, torch.Tensor) and m is not a and not (torch.equal(m, a) and torch.equal(e, a)):
            err = max(err, rel_err(m, e))
    return err


def _measure_unit(unit: Unit, impls: tuple[str, ...], meter: Meter, spec: ModelSpec, tick) -> dict[str, Any]:
    sets = [unit.make_args(i) for i in range(timing.sets_for_l2(unit.bytes_per_set))]
    out: dict[str, Any] = {}
    # moelab against the plain-torch callable on the same inputs, before any timing: a fast wrong kernel
    # must show here. (Torch-only units run the same code in every column: nothing to compare.)
    err = None
    if "moelab" in impls and not unit.torch_only:
        err = _check(unit, sets[0])
    for impl in impls:
        fn = _fn(unit, impl, meter)
        r: dict[str, Any] = {}
        blocked = _graph_blocker(unit.name, impl, spec)
        for mode in ("graph", "host"):
            tick(f"{unit.name} · {impl} · {mode}")
            if mode == "graph" and blocked:
                r[mode] = {"us": None, "error": blocked}
                continue
            r[mode] = meter.time(fn, sets, mode, must_work=impl == "moelab")
        r["launches"] = meter.count(fn, sets[0])
        ref = r["graph"]["us"] if r["graph"]["us"] is not None else r["host"]["us"]
        r["gbps"] = unit.bytes_per_set / (ref * 1e3) if ref else None
        if impl == "moelab":
            r["rel_err_vs_eager"] = err
        out[impl] = r
    del sets
    return out


def _row(unit: Unit, floors: dict[str, Any], impls_m: dict[str, Any] | None) -> dict[str, Any]:
    fl = [floors[c] for c in unit.covers]
    return {"name": unit.name, "group": unit.group, "count": unit.count, "covers": list(unit.covers),
            "bytes": unit.bytes_per_set, "flops": sum(f.flops for f in fl),
            "floor_us": sum(f.floor_us for f in fl), "bound": "/".join(sorted({f.bound for f in fl})),
            "estimated": unit.estimated, "torch_only": unit.torch_only, "note": unit.note,
            "shapes": {c: floors[c].shapes for c in unit.covers}, "impls": impls_m or {}}


def _comm_row(unit: Unit, floors: dict[str, Any], impls: tuple[str, ...], comm, device, dtype, meter: Meter,
              tick) -> dict[str, Any]:
    """A collective measured on the process group: the same time in every column (they all use the engine's
    `Comm`), host-launched only."""
    from moelab.profile.comm import measure_collective

    tick(f"{unit.name} · {comm.size} ranks")
    m = measure_collective(comm, unit.name, floors[unit.covers[0]].shapes, device, dtype, samples=meter.samples)
    per = {i: {"graph": {"us": None, "error": "collectives are timed host-launched (profile.comm)"}, "host": m,
               "launches": None, "gbps": unit.bytes_per_set / (m["us"] * 1e3) if m["us"] else None} for i in impls}
    row = _row(unit, floors, per)
    row["estimated"] = False
    row["note"] = (f"measured on {comm.size} ranks ({m['path']}, {m['message_bytes']:,} B message): the slowest "
                   f"rank's median per call, host-launched")
    return row


def _step(spec: ModelSpec, d, impls: tuple[str, ...], meter: Meter, device, dtype, budget: int, tick) -> dict[str, Any]:
    built = layers_that_fit(spec, d, budget)
    fits = sum(layer_bytes(spec, d, i) for i in range(built)) + head_bytes(d) <= budget
    scaled = built < spec.layers
    chains = {"full": ChainedStep(spec, d, built, device, dtype)} if not scaled else {
        "layers": ChainedStep(spec, d, built, device, dtype, with_head=False),
        "head": ChainedStep(spec, d, 0, device, dtype, with_layers=False)}
    out: dict[str, Any] = {"ctx": d.S, "layers": spec.layers, "built_layers": built, "scaled": scaled,
                           "fits_budget": fits, "budget_gb": budget / 1e9, "impls": {}}
    if scaled:
        out["note"] = (f"{built} of {spec.layers} layers built (memory budget {budget / 1e9:.0f} GB); "
                       f"step = head + layers x {spec.layers}/{built}")
    main = chains.get("full") or chains["layers"]
    ref = main.bind(LayerFns("eager", d)).output()  # the plain-torch chain every impl is compared to
    for impl in impls:
        fns = LayerFns("moelab" if impl == "moelab" else "eager", d)
        res: dict[str, Any] = {}
        parts = {}
        got = main.bind(fns, compile_layers=impl == "compile").output()
        res["rel_err_vs_eager"] = float((got - ref).norm() / ref.norm()) if ref.norm() > 0 else None
        for part, chain in chains.items():
            chain.bind(fns, compile_layers=impl == "compile")
            p: dict[str, Any] = {}
            blocked = _graph_blocker("step", impl, spec) if part != "head" else None
            for mode in ("graph", "host"):
                tick(f"chained step · {impl} · {mode}" + (f" ({part})" if scaled else ""))
                p[mode] = ({"us": None, "error": blocked} if mode == "graph" and blocked
                           else meter.time(chain, [()], mode, must_work=impl == "moelab"))
            p["launches"] = meter.count(chain, ())
            parts[part] = p
        k = spec.layers / built
        for mode in ("graph", "host"):
            if scaled:
                lay, head = parts["layers"][mode]["us"], parts["head"][mode]["us"]
                res[f"{mode}_us"] = None if lay is None or head is None else head + lay * k
            else:
                res[f"{mode}_us"] = parts["full"][mode]["us"]
            err = [p[mode].get("error") for p in parts.values() if p[mode].get("error")]
            if err:
                res[f"{mode}_error"] = err[0]
        ls = [p["launches"] for p in parts.values()]
        if None in ls:
            res["launches"] = None
        else:
            res["launches"] = (round(parts["head"]["launches"] + parts["layers"]["launches"] * k) if scaled
                               else parts["full"]["launches"])
        out["impls"][impl] = res
    del chains
    return out


def profile(spec: ModelSpec, *, batch: int, ctxs: list[int], tp: int, impls: tuple[str, ...],
            ceilings: Ceilings, dtype: torch.dtype = torch.bfloat16, meter: Meter | None = None,
            with_step: bool = True, budget_bytes: int | None = None,
            progress: Callable[[str], None] | None = None,
            total: Callable[[int], None] | None = None, comm=None) -> dict[str, Any]:
    """Measure one decode step of `spec` (see the module docstring) and return the report dict.

    `impls`: a subset of IMPLS in order. `budget_bytes`: memory for the chained step's weights
    (default: half the free GPU memory). `total(n)` is told how many measurements follow, then
    `progress(what)` is called before each. `comm`: the engine's `Comm` over a process group of `tp` ranks
    (under torchrun): the collectives are then measured (`profile.comm`), not estimated; every rank must call
    this with the same arguments. UserError for unsupported models or arguments.
    """
    from moelab import roofline

    bad = [i for i in impls if i not in IMPLS]
    if bad or not impls:
        raise UserError(f"--impl takes a comma-separated subset of {', '.join(IMPLS)}, "
                        f"got {','.join(impls) or 'nothing'}")
    check_supported(spec)
    device = device_check()
    meter = meter or Meter()
    graphs = {c: decode_step_ops(spec, batch=batch, ctx=c, tp=tp, dtype="bf16") for c in ctxs}
    roofs = {c: roofline.analyze(g, ceilings, batch=batch) for c, g in graphs.items()}
    floors = {c: {f.name: f for f in r.ops} for c, r in roofs.items()}
    base = {i for i in impls if i != "compile"} | {"eager"}  # eager: compile's source, moelab's reference
    d0 = dims(spec, batch, ctxs[0], tp)
    units = build_units(spec, graphs[ctxs[0]], d0, device, dtype, tuple(sorted(base)))
    per_ctx_units = {c: [u for u in build_units(spec, graphs[c], dims(spec, batch, c, tp), device, dtype,
                                                tuple(sorted(base))) if any(c.startswith("attention") for c in u.covers)]
                     for c in ctxs[1:]}
    n_meas = sum(u.measured for u in units) + sum(len(v) for v in per_ctx_units.values())
    if budget_bytes is None:
        free = torch.cuda.mem_get_info()[0] if device.type == "cuda" else 8 << 30
        budget_bytes = int(0.5 * free)
    n_chain = (1 if layers_that_fit(spec, d0, budget_bytes) >= spec.layers else 2) if with_step else 0
    if total:
        total(len(impls) * 2 * (n_meas + n_chain))
    tick = progress or (lambda what: None)

    if comm is not None and comm.size != tp:
        raise UserError(f"--tp {tp} but the process group has {comm.size} ranks: start it with "
                        f"torchrun --nproc-per-node {tp}")
    rows0 = []
    for u in units:
        if u.estimated and comm is not None:
            rows0.append(_comm_row(u, floors[ctxs[0]], impls, comm, device, dtype, meter, tick))
            continue
        rows0.append(_row(u, floors[ctxs[0]], None if u.estimated else _measure_unit(u, impls, meter, spec, tick)))
        if device.type == "cuda":
            torch.cuda.empty_cache()
    per_ctx = [{"ctx": ctxs[0], "ops": rows0}]
    for c in ctxs[1:]:
        again = {u.name: _row(u, floors[c], _measure_unit(u, impls, meter, spec, tick)) for u in per_ctx_units[c]}
        per_ctx.append({"ctx": c, "ops": [again.get(r["name"], r) for r in rows0]})
    for pc in per_ctx:
        r = roofs[pc["ctx"]]
        pc["step_floor_us"] = r.step_floor_us
        pc["breakdown"] = {i: bk.breakdown(pc["ops"], i, r.step_floor_us) for i in impls}

    del units, per_ctx_units  # their input builders hold the embedding table
    if device.type == "cuda":
        torch.cuda.empty_cache()
    step = None
    if with_step:
        step = _step(spec, d0, impls, meter, device, dtype, budget_bytes, tick)
        for i in impls:
            step["impls"][i]["gap"] = bk.gap(per_ctx[0]["breakdown"][i], {
                "host_us": step["impls"][i]["host_us"], "graph_us": step["impls"][i]["graph_us"],
                "launches": step["impls"][i]["launches"]})
    notes = []
    if tp > 1 and comm is not None:
        notes.append(f"tp={tp} over {comm.size} processes: each op is this rank's shard; the all-reduces and the "
                     f"logits all-gather are measured through torch.distributed (host-launched, slowest rank)")
    elif tp > 1:
        notes.append(f"tp={tp} on one GPU: each op is one rank's shard; all-reduces and the logits all-gather "
                     f"are estimated (bytes on the wire / {ceilings.interconnect_gbps or 0:,.0f} GB/s + "
                     f"{roofline.DEFAULT_COMM_LATENCY_US:g} µs per call), not measured")
    if any(spec.layer_types[i] == "linear_attention" for i in range(spec.layers)):
        notes.append("Gated DeltaNet ops: eager and compile run the plain-torch references, moelab one launch each "
                     "(conv, recurrence, gated norm); the in/out projections are the dense projections below")
    if spec.qk_norm == "head":
        notes.append("q/k RMSNorm, RoPE and the KV append run inside decode attention (qk_norm_rope+attention, as the "
                     "engine runs them) and count in attention, not in norms")
    norm_rows = norm_router_max_t(spec.num_experts)
    if with_step and "moelab" in impls and any(spec.moe_layers) and batch <= norm_rows:
        rows = f"{norm_rows} row{'s' if norm_rows != 1 else ''}"
        notes.append(f"moelab's chained step runs the post-attention add + RMSNorm inside the router's launch "
                     f"(add_rmsnorm_router, as the engine does up to {rows}); the per-op table times "
                     f"add_rmsnorm and router+topk as two units")
    if (with_step and "moelab" in impls and conv_in_proj(batch)
            and any(spec.layer_types[i] == "linear_attention" for i in range(spec.layers))):
        notes.append("moelab's chained step runs the Gated DeltaNet conv inside the input projection's launch "
                     "(linear_conv, as the engine does at this batch: engine.model.conv_in_proj); the per-op table times "
                     "gdn.in_proj and gdn.conv as two units")
    if with_step and "moelab" in impls and any(spec.moe_layers):
        notes.append("moelab's chained step hands each MoE kernel the next layer's first weight (or lm_head), which "
                     "it may ask L2 for while the router runs (GPU, in the PDL chain), as the engine does; the per-op "
                     "table's experts have none")
    router_logits = (f" and the router's logits beyond the fused router's rows ({fused_router_max_t(spec.num_experts)} "
                     f"at {spec.num_experts} experts; MOELAB_FUSED_ROUTER_MAX_T)" if any(spec.moe_layers) else "")
    notes.append("embedding and sampling run torch in the moelab column too; qkv/o/lm_head, the Gated DeltaNet "
                 f"in/out projections{router_logits} use moelab's decode kernel up to 16 tokens, cuBLAS beyond")
    return {"model": spec.name, "source": spec.source, "batch": batch, "tp": tp, "contexts": list(ctxs),
            "impls": list(impls), "dtype": str(dtype).removeprefix("torch."),
            "gpu": ceilings.name, "gpu_source": ceilings.source, "read_gbps": ceilings.read_gbps,
            "bf16_tflops": ceilings.bf16_tflops, "interconnect_gbps": ceilings.interconnect_gbps,
            "per_ctx": per_ctx, "step": step,
            "sweep": bk.sweep([(pc["ctx"], pc["breakdown"][impls[-1]]) for pc in per_ctx]),
            "notes": notes, "env": timing.env_record()}


def make_meter(samples: int = 25) -> Meter:
    """The real meter (moelab.timing and torch.profiler); tests replace this with a fake one."""
    return Meter(samples=samples)
