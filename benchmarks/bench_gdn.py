"""The Gated DeltaNet decode kernels (conv, recurrence, gated norm): eager (the plain-torch references), torch.compile
and moelab's kernels, against the floor, at a hybrid model's shard shapes; the recurrence also at several widths of
its state-column blocks.

    python benchmarks/bench_gdn.py [--model qwen3.5-35b-a3b] [--tp 1,4] [--batch 1,8] [--block-v 32,16,8,4]
                                   [--samples 25] [--read-gbps G] [--no-compile] [--json]

For each (tp, batch): every implementation timed by `moelab.timing.measure`, graph-replayed (the kernel alone) and
host-launched, its inputs rotated over `timing.sets_for_l2` sets (a step's 30 layers of state do not fit the L2
either). Floor = bytes / read bandwidth, with bytes (napkin math, `kernels/gdn.py`):
  * recurrence: the fp32 state read and written, B·Hv·Dk·Dv·4 B × 2, plus q, k, v in and o out;
  * conv: x in, the conv state read and written, the weights, the output;
  * gated norm: o and z in, the output;
  * the input projection with the conv (`--ops gdn.in_proj+conv`): its weight, x, y, the conv's state read and
    written, the conv weight; eager, moelab in two launches (the engine's default) and in one (`linear(conv=...)`).
Each moelab variant is checked against the reference on a copy of the same inputs (the recurrence updates its state
in place) before it is timed. `moelab bv<N>` is the recurrence with N state columns a program (`block_v`), `bv<N>w<W>`
the same on W warps (`--block-v NxW`; 4 otherwise); `moelab` is the shipped form. Results are saved with `timing.save_result("bench-gdn", ...)`.
"""

from __future__ import annotations

import argparse
import functools

import torch
import torch.nn.functional as F

from moelab import ops, report, timing
from moelab.bench import floor_read_gbps
from moelab.kernels import gdn
from moelab.models.spec import load_spec
from moelab.profile.impls import dims


def rel_err(got, ref) -> float:
    if isinstance(got, tuple):  # the in_proj + conv impls: (convolved columns, the rest)
        got, ref = torch.cat(got, -1), torch.cat(ref, -1)
    return (torch.linalg.vector_norm(got.double() - ref.double()) / torch.linalg.vector_norm(ref.double())).item()


def op_inputs(name: str, d, dev: str):
    """One argument set of `name` at dims `d` (bf16 activations, fp32 recurrent state), as the profile draws them."""
    def t(*shape, scale=1.0, dtype=torch.bfloat16):
        return (scale * torch.randn(*shape, device=dev)).to(dtype)

    if name == "gdn.conv":
        return (t(d.B, d.gdn_ch), t(d.B, d.gdn_ch, d.conv - 1), t(d.gdn_ch, d.conv, scale=0.3))
    if name == "gdn.in_proj+conv":  # x, the input projection's weight [q k v z b a], the conv state and weight
        return (t(d.B, d.H), t(in_proj_rows(d), d.H, scale=d.H ** -0.5), t(d.B, d.gdn_ch, d.conv - 1),
                t(d.gdn_ch, d.conv, scale=0.3))
    if name == "gdn.recurrence":
        return (t(d.B, d.nk, d.dk), t(d.B, d.nk, d.dk), t(d.B, d.nv, d.dv), t(d.B, d.nv), t(d.B, d.nv),
                t(d.nv, scale=0.1), t(d.nv, scale=0.1), t(d.B, d.nv, d.dk, d.dv, scale=0.01, dtype=torch.float32))
    return (t(d.B, d.nv, d.dv), t(d.B, d.nv, d.dv), 1.0 + t(d.dv, scale=0.1), d.eps)


def in_proj_rows(d) -> int:
    return d.gdn_ch + d.nv * d.dv + 2 * d.nv  # q, k, v (convolved), z, b, a


def op_bytes(name: str, d) -> int:
    """What the op must move (napkin math of kernels/gdn.py; the in_proj: its weight, x, y, the conv's state and
    weight)."""
    if name == "gdn.in_proj+conv":
        return (in_proj_rows(d) * d.H + d.B * d.H + d.B * in_proj_rows(d) + d.B * d.gdn_ch * 2 * (d.conv - 1)
                + d.gdn_ch * d.conv) * 2
    if name == "gdn.conv":
        return d.B * d.gdn_ch * 2 * (1 + 2 * (d.conv - 1) + 1) + d.gdn_ch * d.conv * 2
    if name == "gdn.recurrence":
        return d.B * d.nv * d.dk * d.dv * 4 * 2 + d.B * (2 * d.nk * d.dk + 2 * d.nv * d.dv + 2 * d.nv) * 2
    return d.B * d.nv * d.dv * 2 * 3 + d.dv * 2


def parse_variant(text: str) -> tuple[int, int]:
    """"16" -> (16, 4); "16x2" -> (16, 2): the recurrence's state columns a program and its warps (powers of two).
    (Session 29's stage EK also took a final "o", a ONE_PASS form of the kernel since removed.)"""
    bv, x, w = text.partition("x")
    try:
        vals = int(bv), int(w) if x else 4
    except ValueError:
        raise SystemExit(f"bench_gdn: --block-v takes N or NxW (N columns, W warps), not {text!r}") from None
    if any(v < 1 or v & (v - 1) for v in vals):
        raise SystemExit(f"bench_gdn: --block-v values must be powers of two, not {text!r}")
    return vals


def in_proj_conv_impls(C: int) -> dict:
    """The input projection and the conv of one decode token, three ways, each returning (the C convolved columns, the
    rest): eager as a user writes it (F.linear, then the conv reference), moelab in two launches (the engine's default:
    `dense`, then `gdn_conv` on the view) and in one (`moelab 1 launch`: `linear(conv=...)`, $MOELAB_GDN_CONV_IN_PROJ's
    form)."""
    from moelab.ops.gdn import gdn_conv_reference
    from moelab.ops.linear import dense

    def eager(x, w, st, cw):
        y = F.linear(x, w)
        return gdn_conv_reference(y[:, :C], st, cw), y[:, C:]

    def two(x, w, st, cw):
        y = dense(x, w)
        return gdn.gdn_conv(y[:, :C], st, cw), y[:, C:]

    fused = ops.get("linear_conv", "moelab")

    def one(x, w, st, cw):
        y = fused(x, w, st, cw)
        return y[:, :C], y[:, C:]

    return {"eager": eager, "moelab": two, "moelab 1 launch": one}  # "moelab": what the engine runs by default


def clone(args):
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen3.5-35b-a3b")
    ap.add_argument("--tp", default="1,4", help="comma-separated tensor-parallel degrees (one rank's shard)")
    ap.add_argument("--batch", default="1,8", help="comma-separated batch sizes")
    ap.add_argument("--block-v", default="32,16,8,4",
                    help="the recurrence's variants: state columns a program, optionally xW for W warps (16, 16x2)")
    ap.add_argument("--ops", default="gdn.conv,gdn.recurrence,gdn.norm_gate,gdn.in_proj+conv",
                    help="which ops (comma-separated); gdn.in_proj+conv: the input projection with the conv, in two "
                         "launches and in one")
    ap.add_argument("--samples", type=int, default=25)
    ap.add_argument("--read-gbps", type=float, default=None, help="read bandwidth for the floor (GB/s)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile column")
    ap.add_argument("--json", action="store_true", help="print the payload as JSON instead of a table")
    a = ap.parse_args()
    spec = load_spec(a.model)
    if not spec.linear_value_heads:
        raise SystemExit(f"bench_gdn: {spec.name} has no Gated DeltaNet layers")
    block_vs = [parse_variant(s) for s in a.block_v.split(",") if s]
    names = [s for s in a.ops.split(",") if s]
    known = ("gdn.conv", "gdn.recurrence", "gdn.norm_gate", "gdn.in_proj+conv")
    if not names or any(n not in known for n in names):
        raise SystemExit(f"bench_gdn: --ops takes some of {', '.join(known)}; got {a.ops!r}")
    if not torch.cuda.is_available():
        raise SystemExit("bench_gdn: needs a CUDA GPU")
    gbps, gbps_source = floor_read_gbps(a.read_gbps)
    dev, rows, checks = "cuda", [], []
    for tp in (int(s) for s in a.tp.split(",")):
        for B in (int(s) for s in a.batch.split(",")):
            d = dims(spec, B, 1, tp)
            for name in names:
                if name == "gdn.in_proj+conv":
                    impls = in_proj_conv_impls(d.gdn_ch)
                    ref = impls["eager"]
                    if not a.no_compile:
                        impls = {"eager": ref, "compile": torch.compile(ref, dynamic=False),
                                 **{k_: v_ for k_, v_ in impls.items() if k_ != "eager"}}
                else:
                    ref = ops.get(name.replace(".", "_"), "eager")
                    impls = {"eager": ref}
                    if not a.no_compile:
                        impls["compile"] = torch.compile(ref, dynamic=False)
                    impls["moelab"] = ops.get(name.replace(".", "_"), "moelab")
                if name == "gdn.recurrence":
                    for bv, w in block_vs:
                        impls[f"moelab bv{bv}" + (f"w{w}" if w != 4 else "")] = functools.partial(
                            gdn.gdn_recurrence, block_v=bv, num_warps=w)
                nbytes = op_bytes(name, d)
                floor_us = nbytes / (gbps * 1e3)
                sets = [op_inputs(name, d, dev) for _ in range(timing.sets_for_l2(nbytes))]
                want = ref(*clone(sets[0]))
                for impl, fn in impls.items():
                    if impl.startswith("moelab"):
                        err = rel_err(fn(*clone(sets[0])), want)
                        checks.append({"tp": tp, "B": B, "op": name, "impl": impl, "rel_err": err})
                        if not err <= 2e-2:
                            raise SystemExit(f"bench_gdn: {impl}'s {name} is off by {err:.3g} (rel) at tp={tp} "
                                             f"B={B}; not timing it")
                times = {}
                for mode in ("graph", "host"):
                    for impl, fn in impls.items():
                        m = timing.measure(fn, sets, mode=mode, samples=a.samples)
                        times[(impl, mode)] = m.median_us
                        rows.append({"tp": tp, "B": B, "op": name, "impl": impl, "mode": mode,
                                     "median_us": m.median_us, "iqr_us": m.iqr_us, "floor_us": floor_us,
                                     "pct_floor": 100 * floor_us / m.median_us,
                                     "GB/s": nbytes / (m.median_us * 1e3), "measurement": m.to_dict()})
                for r in rows:
                    if (r["tp"], r["B"], r["op"]) == (tp, B, name):
                        r["x_vs_eager"] = times[("eager", r["mode"])] / r["median_us"]
                        if ("compile", r["mode"]) in times:
                            r["x_vs_compile"] = times[("compile", r["mode"])] / r["median_us"]
    payload = {"model": spec.name, "dtype": "bfloat16", "read_gbps": gbps, "read_gbps_source": gbps_source,
               "block_v": block_vs, "checks": checks, "rows": rows}
    path = timing.save_result("bench-gdn", payload)
    if a.json:
        report.emit_json(payload)
        return
    cols = ["tp", "B", "op", "impl", "mode", "median_us", "iqr_us", "floor_us", "pct_floor", "GB/s", "x_vs_eager",
            "x_vs_compile"]
    report.table(rows, cols, title=f"Gated DeltaNet decode kernels, {spec.name}; floor at {gbps:.0f} GB/s "
                                   f"({gbps_source}); saved {path}")


if __name__ == "__main__":
    with torch.inference_mode():
        main()
