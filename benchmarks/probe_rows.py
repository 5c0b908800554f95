"""Would a T=1 MoE layer with no phase hand-over be faster? A probe, not a kernel of moelab (yet).

    python benchmarks/probe_rows.py [--shapes qwen3,qwen35] [--configs 16x8p,32x8p,16x4c256] [--samples 15]

The shipped T=1 path (`kernels/moe_pairs.py`) runs the gate/up GEMV (phase 1) and the down projection (phase 2) in
separate programs: phase 2 waits for a slot's whole activation vector, so the layer's time is phase 1's stream plus a
tail of phase 2 after it (24.5 µs at Qwen3-30B-A3B against a 16.5 µs floor; a kernel that only reads those bytes
takes 19.2). Here every program owns BLOCK_I rows of one expert end to end: it computes those rows' SiLU(g)·u and
multiplies them straight into the down projection's matching BLOCK_I columns, w2[e, :, rows] (runs of 2·BLOCK_I
bytes, I·2 bytes apart: 32 and 64 B at BLOCK_I 16 and 32), giving a partial of all H outputs. No program waits for
another; a second kernel sums each token's K·I/BLOCK_I partials in a fixed order (deterministic).

Napkin math, Qwen3-30B-A3B T=1: weights 8 × 3 × 2048 × 768 × 2 B = 75.5 MB (16.5 µs at 4.57 TB/s); partials
8 · 768/BLOCK_I rows × 2048 × 4 B written and read back (3.1 MB at BLOCK_I=16, mostly from L2); FLOPs 2 · 75.5 M/2.

Configs "BIxWp" preload the program's whole w2 slice (H × BLOCK_I) into registers before the gate/up GEMV, so
those bytes are in flight with it; "BIxWcN" stream the down projection in chunks of N outputs, double-buffered,
after the GEMV. W is the warps a program. Each config is checked against `fused_moe`'s fp32 reference, then timed
graph-replayed in two passes (`sweep_moe.two_pass`) beside the shipped `fused_moe`, with routing drawn afresh per
argument set and the weights rotated over three layer copies so the L2 cannot serve them. JSON to $OUT.

Measured (H200, session 29, stage EK, probe-rows-…T0511.json), T=1 without routing: Qwen3-30B-A3B shipped 22.84 µs
(72.4 % of the floor) against 32.2-36.8 for every config here; Qwen3.5-35B-A3B's experts (no shared expert) 17.11
against 22.0-28.7. Lost by 40 %, so not built. Those configs compile to 237-255 registers on Triton 3.6, three of
them spilling (ptxas -v, sm_90a, specialised as a Qwen3-30B-A3B launch is; session 29): 1-2 programs an SM, against
the shipped phase 1's 96 registers and 5. So they starved the memory system, whatever the design is worth. Configs
of 39-121 registers without spills: 8x4c64k512 121, 8x8c64k512 62, 8x4c256k256 64, 8x8c128k512 64, 16x8c64k128 39.
Stage EL times those, and `--diagnose` tells the w2 column reads from the sum kernel.
"""

from __future__ import annotations

import argparse
import json
import os

import torch
import triton
import triton.language as tl

from moelab import hardware, ops, timing
from moelab.kernels import cdiv, next_pow2
from moelab.kernels.moe import fused_moe
from moelab.kernels.moe_decode import _swiglu_rows

SHAPES = {"qwen3": (128, 2048, 768, 8), "qwen35": (256, 2048, 512, 8), "tiny": (8, 64, 48, 2)}  # E, H, I, k


@triton.jit
def _rows_kernel(x_ptr, w13_ptr, w2_ptr, tw_ptr, tid_ptr, part_ptr, H, I, s_xt, s_w13e, s_w13r, s_w2e, s_w2r, s_w2c,
                 K: tl.constexpr, N_IBLK: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_K: tl.constexpr,
                 BLOCK_H: tl.constexpr, PRELOAD: tl.constexpr):
    """Program (slot s = token·K + j, block of BLOCK_I rows): part[pid, :] = w2[e, :, rows] · act[rows] × weight."""
    pid = tl.program_id(0)
    s = pid // N_IBLK
    t = s // K
    e = tl.load(tid_ptr + s).to(tl.int64)
    rw = tl.load(tw_ptr + s).to(tl.float32)
    offs_i = (pid % N_IBLK) * BLOCK_I + tl.arange(0, BLOCK_I)
    imask = offs_i < I
    w2_base = w2_ptr + e * s_w2e
    offs_h = tl.arange(0, BLOCK_H)
    w = tl.load(w2_base + offs_h[:, None] * s_w2r + offs_i[None, :] * s_w2c, mask=(offs_h < H)[:, None] & imask[None, :],
                other=0.0, eviction_policy="evict_first")  # the first (PRELOAD: the only) chunk, before the GEMV
    act = _swiglu_rows(w13_ptr + e * s_w13e, s_w13r, x_ptr + t * s_xt, offs_i, imask, I, H, BLOCK_I, BLOCK_K)
    act = act.to(x_ptr.dtype.element_ty).to(tl.float32)  # rounded to the activation dtype, as the reference
    if PRELOAD:
        tl.store(part_ptr + pid * H + offs_h, tl.sum(w.to(tl.float32) * act[None, :], axis=1) * rw, mask=offs_h < H)
    else:
        for h0 in range(0, H, BLOCK_H):
            nh = h0 + BLOCK_H + offs_h  # the next chunk in flight while this one is reduced (all masked after the last)
            w_next = tl.load(w2_base + nh[:, None] * s_w2r + offs_i[None, :] * s_w2c, mask=(nh < H)[:, None] & imask[None, :],
                             other=0.0, eviction_policy="evict_first")
            hh = h0 + offs_h
            tl.store(part_ptr + pid * H + hh, tl.sum(w.to(tl.float32) * act[None, :], axis=1) * rw, mask=hh < H)
            w = w_next


@triton.jit
def _rows_sum_kernel(part_ptr, out_ptr, H, s_ot, ROWS: tl.constexpr, ROWS_PAD: tl.constexpr, BLOCK_R: tl.constexpr):
    """Program (token t, block of BLOCK_R outputs): out[t] = the sum of its ROWS partial rows, in order, fp32."""
    t = tl.program_id(0)
    offs_h = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
    rows = tl.arange(0, ROWS_PAD)
    p = tl.load(part_ptr + (t * ROWS + rows)[:, None] * H + offs_h[None, :],
                mask=(rows < ROWS)[:, None] & (offs_h < H)[None, :], other=0.0)
    tl.store(out_ptr + t * s_ot + offs_h, tl.sum(p, axis=0).to(out_ptr.dtype.element_ty), mask=offs_h < H)


def parse_config(text: str) -> dict:
    """"16x8p" -> BLOCK_I 16, 8 warps, the whole w2 slice preloaded; "16x4c256" -> chunks of 256 outputs; a suffix
    "kN" sets this config's gate/up chunk of H (BLOCK_K; else --block-k)."""
    try:
        body, _, bk = text.partition("k")
        bi, rest = body.split("x")
        extra = {"BLOCK_K": int(bk)} if bk else {}
        if rest.endswith("p"):
            return dict(BLOCK_I=int(bi), num_warps=int(rest[:-1]), PRELOAD=True, BLOCK_H=None, **extra)
        w, bh = rest.split("c")
        return dict(BLOCK_I=int(bi), num_warps=int(w), PRELOAD=False, BLOCK_H=int(bh), **extra)
    except ValueError:
        raise SystemExit(f"probe_rows: a config is BIxWp or BIxWcN, optionally ending kN (e.g. 16x8p, 8x4c64k512), "
                         f"not {text!r}") from None


def moe_rows(x, w13, w2, tw, ids, out, cfg: dict, block_k: int = 512, *, with_sum: bool = True, w2_rows: bool = False):
    """The probe's layer: the rows kernel, then the sum. x [T, H]; w13 [E, 2I, H]; w2 [E, H, I] -> out [T, H].
    Diagnostics (their outputs are not the layer's): with_sum=False times the rows kernel alone; w2_rows reads w2's
    bytes as the transposed layout would lie, [E, I, H] (each program's BLOCK_I rows of H contiguous values)."""
    T, H = x.shape
    I = w2.shape[2]
    k = ids.shape[1]
    bi = cfg["BLOCK_I"]
    n_iblk = cdiv(I, bi)
    part = torch.empty(T * k * n_iblk, H, dtype=torch.float32, device=x.device)
    bh = next_pow2(H) if cfg["PRELOAD"] else cfg["BLOCK_H"]
    s_w2r, s_w2c = (1, H) if w2_rows else (w2.stride(1), 1)
    _rows_kernel[(T * k * n_iblk,)](x, w13, w2, tw, ids, part, H, I, x.stride(0), w13.stride(0), w13.stride(1),
                                    w2.stride(0), s_w2r, s_w2c, K=k, N_IBLK=n_iblk, BLOCK_I=bi,
                                    BLOCK_K=min(cfg.get("BLOCK_K", block_k), next_pow2(H)), BLOCK_H=bh,
                                    PRELOAD=cfg["PRELOAD"],
                                    num_warps=cfg["num_warps"])
    if not with_sum:
        return out
    rows = k * n_iblk
    block_r = max(16, min(128, 16384 // next_pow2(rows)))  # [rows, BLOCK_R] fp32 tile of ≤ 16K values
    _rows_sum_kernel[(T, cdiv(H, block_r))](part, out, H, out.stride(0), ROWS=rows, ROWS_PAD=next_pow2(rows),
                                            BLOCK_R=block_r, num_warps=4)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="qwen3,qwen35")
    ap.add_argument("--configs", default="16x8p,32x8p,16x4p,8x4p,16x4c256,32x4c128,32x8c256")
    ap.add_argument("--block-k", type=int, default=512, help="the gate/up GEMV's chunk of H")
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--diagnose", action="store_true",
                    help="also each config's rows kernel alone (/alone) and alone reading w2 as [E, I, H] rows (/rows)")
    ap.add_argument("--device", default="cuda", help="cpu only to smoke-test the script under TRITON_INTERPRET=1")
    a = ap.parse_args()
    configs = {c: parse_config(c) for c in a.configs.split(",") if c}
    dev = a.device
    if dev == "cuda" and not torch.cuda.is_available():
        raise SystemExit("probe_rows: needs a CUDA GPU (or --device cpu under TRITON_INTERPRET=1)")
    dt = torch.bfloat16 if dev == "cuda" else torch.float32
    gbps = hardware.ceilings().read_gbps if dev == "cuda" else 4568.0
    results = []
    for name in a.shapes.split(","):
        E, H, I, k = SHAPES[name]
        layers = [((torch.randn(E, 2 * I, H, device=dev) * H ** -0.5).to(dt),
                   (torch.randn(E, H, I, device=dev) * I ** -0.5).to(dt)) for _ in range(3)]
        sets = []
        for i in range(timing.sets_for_l2(k * 3 * H * I * 2) if dev == "cuda" else 2):
            w, ids = ops.get("route", "eager")(torch.randn(1, E, device=dev), k)
            sets.append((torch.randn(1, H, device=dev).to(dt), *layers[i % 3], w, ids.to(torch.int32),
                         torch.empty(1, H, device=dev, dtype=dt)))
        floor = k * 3 * H * I * 2 / (gbps * 1e3)
        ref = ops.get("fused_moe", "eager")(*(t.float() if t.is_floating_point() and t.dim() > 1 else t
                                              for t in sets[0][:5]))
        fns = {"shipped fused_moe": lambda x, w13, w2, tw, ids, out: fused_moe(x, w13, w2, tw, ids, out=out)}
        diag = {}
        for c, cfg in configs.items():
            fns[c] = (lambda cfg_: lambda x, w13, w2, tw, ids, out: moe_rows(x, w13, w2, tw, ids, out, cfg_,
                                                                             a.block_k))(cfg)
        if a.diagnose:  # timed only: their outputs are not the layer's
            for c, cfg in configs.items():
                for tag, kw in (("alone", dict(with_sum=False)), ("rows", dict(with_sum=False, w2_rows=True))):
                    diag[f"{c}/{tag}"] = (lambda cfg_, kw_: lambda x, w13, w2, tw, ids, out: moe_rows(
                        x, w13, w2, tw, ids, out, cfg_, a.block_k, **kw_))(cfg, kw)
        errs = {}
        for c, fn in fns.items():
            got = fn(*sets[0]).float()
            errs[c] = ((got - ref).norm() / ref.norm()).item()
            if not errs[c] < (2e-2 if dt == torch.bfloat16 else 1e-4):
                raise SystemExit(f"probe_rows: {c} at {name} is off by {errs[c]:.3g} (rel) against the reference")
        if dev != "cuda":
            print(f"{name}: every config matches the reference on the CPU ({max(errs.values()):.2g} rel)")
            continue
        from sweep_moe import two_pass  # the sweep's two-pass timing (same directory)

        for c, fn in diag.items():
            fn(*sets[0])  # compiles and runs (no check: a diagnostic's output is not the layer's)
            errs[c] = float("nan")
        timed = two_pass({**fns, **diag}, sets, a.samples)
        for c, (us, iqr, meds) in sorted(timed.items(), key=lambda kv: kv[1][0]):
            results.append(dict(shape=name, config=c, us=us, iqr_us=iqr, passes_us=meds, pct_floor=100 * floor / us,
                                rel_err=errs[c] if errs[c] == errs[c] else None))  # None: a diagnostic, unchecked
            print(f"{name:7s} {c:18s} {us:7.2f} µs  {100 * floor / us:5.1f} % of {floor:.2f}  (passes "
                  f"{meds[0]:.2f} / {meds[1]:.2f}, rel err {errs[c]:.1e})")
    if os.environ.get("OUT") and results:
        with open(os.path.join(os.environ["OUT"], "probe_rows.json"), "w") as fh:
            json.dump(dict(env=timing.env_record(), read_gbps=gbps, results=results), fh, indent=1)


if __name__ == "__main__":
    with torch.inference_mode():
        main()
