"""What one dependency of a decode step costs: a kernel boundary (PDL) against a counter inside one kernel.

    python benchmarks/probe_links.py [--layers 48] [--samples 15] [--save]

At batch 1 a layer is a chain of dependent steps (norm → qkv → attention → o → norm → router → experts), and the
step's time over its bytes is mostly the cost of the links: ~17 µs a layer against ~8 µs of bytes in the attention
block (trace-decode-…T220454). Sessions 5-19 named a persistent kernel whose phases hand over through counters as
"the one structural answer left"; before building one, this measures what a link costs each way.

A chain of L steps, the output of one the input of the next: each step's G programs read the whole previous vector
(K = 2048 fp32, from L2) and write their BLOCK_N rows of the next, either
  tiny     y = x[rows]·0.5 + Σx·1e-3                   (no weights: the link's latency alone), or
  gemv     y = W_s[rows, :] · x · 0.03, W_s 2048 × 2048 bf16 (8 MB a step, 1.8 µs at 4.6 TB/s; 384 MB over 48 steps).
Forms:
  kernels     one launch a step, PDL: the weight tile requested, then gdc_launch_dependents + gdc_wait (the
              engine's chain, as benchmarks/check_pdl.py's pdl+pre);
  staged      one launch of L·G programs, step = pid // G (the pair kernel's pattern): the weight tile requested,
              then a spin on the previous step's arrival counter, an acquire, the step, a release;
  persistent  one launch of G programs walking the L steps, the next step's weight tile requested right after
              releasing this one (so it streams during the wait), the same counters.
Napkin math: bytes per gemv step = 2048·2048·2 = 8.4 MB (+ 8 KB of x per program from L2); tiny steps move ~nothing.
Prints µs per link (graph replay / L, median over samples) and, for gemv, % of the 8 MB floor at the measured
read bandwidth; checks every form computes the same chain (relative error ≤ 1e-5 against the torch chain).

Measured (H200, session 20, probe-links-…T124823 and …T141657): tiny links 1.04 µs as kernels, 1.7 persistent, 15.3
staged with the counters packed and 3.1-3.6 with them 128 bytes apart; gemv 3.48 µs as kernels (52.7 % of the floor),
3.73 persistent on 256 programs, 4.4 staged. A PDL kernel boundary is the cheapest link measured here.
"""

from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl

from moelab import hardware, timing
from moelab.kernels import next_pow2, pdl_supported
from moelab.kernels.moe_decode import _wait_geq, spin_asm

K = 2048


@triton.jit
def _step(x_ptr, y_ptr, rows, offs, n, w, WEIGHTS: tl.constexpr):
    """One step for `rows`: x is another program's output, so it is read past L1 (.cg), up to the bound n that the
    wait returned (0 .. BLOCK_K: the loads depend on the acquire)."""
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0, cache_modifier=".cg")
    if WEIGHTS:
        y = tl.sum(w.to(tl.float32) * x[None, :], axis=1) * 0.03
    else:
        xr = tl.load(x_ptr + rows, mask=rows < n, other=0.0, cache_modifier=".cg")
        y = xr * 0.5 + tl.sum(x, axis=0) * 1e-3
    tl.store(y_ptr + rows, y)


@triton.jit
def _kernels_form(x_ptr, w_ptr, y_ptr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, WEIGHTS: tl.constexpr,
                  PDL: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs = tl.arange(0, BLOCK_K)
    w = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.bfloat16)
    if WEIGHTS:
        w = tl.load(w_ptr + rows[:, None] * BLOCK_K + offs[None, :], eviction_policy="evict_first")
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()
    _step(x_ptr, y_ptr, rows, offs, BLOCK_K, w, WEIGHTS)


@triton.jit
def _staged_form(xs_ptr, ws_ptr, cnt_ptr, G, L, L_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 WEIGHTS: tl.constexpr, SPIN_ASM: tl.constexpr, CS: tl.constexpr):
    pid = tl.program_id(0)
    s = pid // G
    rows = (pid % G) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs = tl.arange(0, BLOCK_K)
    w = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.bfloat16)
    if WEIGHTS:
        w = tl.load(ws_ptr + s * BLOCK_K * BLOCK_K + rows[:, None] * BLOCK_K + offs[None, :],
                    eviction_policy="evict_first")
    n = BLOCK_K
    if s > 0:  # programs wait only on lower indices: deadlock-free, and the interpreter's order
        n = _wait_geq(cnt_ptr + (s - 1) * CS, G, BLOCK_K, SPIN_ASM)
    _step(xs_ptr + s * BLOCK_K, xs_ptr + (s + 1) * BLOCK_K, rows, offs, n, w, WEIGHTS)
    tl.debug_barrier()  # every thread's stores precede the release
    arrived = tl.atomic_add(cnt_ptr + s * CS, 1, sem="acq_rel", scope="gpu")
    if (s == L - 1) & (arrived == G - 1):  # the last step's last arrival: every wait is over; reset for the next call
        offs_l = tl.arange(0, L_PAD)
        tl.store(cnt_ptr + offs_l * CS, tl.zeros((L_PAD,), dtype=tl.int32), mask=offs_l < L)


@triton.jit
def _persistent_form(xs_ptr, ws_ptr, cnt_ptr, G, L, L_PAD: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr, WEIGHTS: tl.constexpr, SPIN_ASM: tl.constexpr, CS: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs = tl.arange(0, BLOCK_K)
    w = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.bfloat16)
    if WEIGHTS:
        w = tl.load(ws_ptr + rows[:, None] * BLOCK_K + offs[None, :], eviction_policy="evict_first")
    arrived = 0
    for s in range(0, L):
        n = BLOCK_K
        if s > 0:
            n = _wait_geq(cnt_ptr + (s - 1) * CS, G, BLOCK_K, SPIN_ASM)
        _step(xs_ptr + s * BLOCK_K, xs_ptr + (s + 1) * BLOCK_K, rows, offs, n, w, WEIGHTS)
        tl.debug_barrier()
        arrived = tl.atomic_add(cnt_ptr + s * CS, 1, sem="acq_rel", scope="gpu")
        if WEIGHTS:  # the next step's tile streams while this program waits for the others
            w = tl.load(ws_ptr + (s + 1) * BLOCK_K * BLOCK_K + rows[:, None] * BLOCK_K + offs[None, :],
                        mask=(s + 1 < L), other=0.0, eviction_policy="evict_first")
    if arrived == G - 1:  # last arrival of the last step (every program has passed every wait)
        offs_l = tl.arange(0, L_PAD)
        tl.store(cnt_ptr + offs_l * CS, tl.zeros((L_PAD,), dtype=tl.int32), mask=offs_l < L)


def run_chain(form: str, xs: torch.Tensor, ws: torch.Tensor | None, cnt: torch.Tensor, g: int,
              spin_ns: int = 0, stride: int = 1) -> torch.Tensor:
    """The chain xs[0] → xs[L] in `form`; xs [L+1, K] fp32 (row 0 the input), ws [L, K, K] bf16 or None (tiny);
    cnt: zeroed int32 counters, ≥ L·stride (`stride` int32s apart: 32 puts each on a 128-byte line of its own)."""
    L = xs.shape[0] - 1
    if form != "kernels" and cnt.numel() < L * stride:
        raise ValueError(f"{form}: {L} steps at counter stride {stride} need {L * stride} counters, not {cnt.numel()}")
    bn, weights = K // g, ws is not None
    w = ws if weights else xs
    if form == "kernels":
        pdl = pdl_supported(xs.device)
        for s in range(L):
            _kernels_form[(g,)](xs[s], w[s] if weights else xs, xs[s + 1], BLOCK_N=bn, BLOCK_K=K, WEIGHTS=weights,
                                PDL=pdl, num_warps=4, **({"launch_pdl": True} if pdl else {}))
    elif form == "staged":
        _staged_form[(L * g,)](xs, w, cnt, g, L, L_PAD=next_pow2(L), BLOCK_N=bn, BLOCK_K=K, WEIGHTS=weights,
                               SPIN_ASM=spin_asm(spin_ns), CS=stride, num_warps=4)
    elif form == "persistent":
        if xs.is_cuda and g > 2 * torch.cuda.get_device_properties(xs.device).multi_processor_count:
            raise ValueError(f"persistent: {g} programs cannot all be resident (2 per SM): the counters would deadlock")
        _persistent_form[(g,)](xs, w, cnt, g, L, L_PAD=next_pow2(L), BLOCK_N=bn, BLOCK_K=K, WEIGHTS=weights,
                               SPIN_ASM=spin_asm(spin_ns), CS=stride, num_warps=4)
    else:
        raise ValueError(f"form must be kernels, staged or persistent, not {form!r}")
    return xs[L]


def reference(xs: torch.Tensor, ws: torch.Tensor | None) -> torch.Tensor:
    """The chain in torch, fp32 (bf16 weights upcast)."""
    x = xs[0].clone()
    for s in range(xs.shape[0] - 1):
        x = (ws[s].float() @ x) * 0.03 if ws is not None else x * 0.5 + x.sum() * 1e-3
    return x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--save", action="store_true", help="write a probe-links record under benchmarks/results")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("probe_links: needs a CUDA GPU")
    dev, L = "cuda", a.layers
    read = hardware.ceilings().read_gbps
    floor_us = K * K * 2 / (read * 1e3)
    cnt = torch.zeros(max(L, 64) * 32, dtype=torch.int32, device=dev)
    # (form, programs, nanosleep between polls, counter stride). Session 20's first run (probe-links-…T124823) had every
    # counter in one or two 128-byte lines: staged 15 µs a link, persistent 1.74, kernels 1.04 (tiny). The stride-32
    # rows ask whether polls and atomics sharing a line were the cost.
    cases = [("kernels", 128, 0, 1), ("staged", 128, 0, 1), ("staged", 128, 128, 1), ("staged", 128, 0, 32),
             ("staged", 128, 128, 32), ("persistent", 128, 0, 1), ("persistent", 128, 0, 32),
             ("persistent", 256, 0, 1), ("persistent", 256, 0, 32)]
    rows = []
    for mode in ("tiny", "gemv"):
        torch.manual_seed(0)
        ws = torch.randn(L, K, K, device=dev).bfloat16() if mode == "gemv" else None
        xs = torch.zeros(L + 1, K, device=dev)
        xs[0] = torch.randn(K, device=dev)
        want = reference(xs, ws)
        for form, g, spin, stride in cases + cases[::-1]:  # two passes, the second reversed (drift across a pass)
            xs[1:].fill_(float("nan"))
            got = run_chain(form, xs, ws, cnt, g, spin, stride).clone()
            err = ((got - want).norm() / want.norm()).item()
            if not err <= 1e-5 or int(cnt.abs().sum()) != 0:
                raise SystemExit(f"probe_links: {mode} {form} G={g} is wrong (rel err {err:.2e}, counters "
                                 f"{int(cnt.abs().sum())})")
            m = timing.measure(lambda: run_chain(form, xs, ws, cnt, g, spin, stride), [()], mode="graph",
                               samples=a.samples, warmup=3)
            rows.append(dict(mode=mode, form=form, programs=g, spin_ns=spin, stride=stride,
                             us_per_link=m.median_us / L, iqr_us=m.iqr_us / L, rel_err=err))
    merged: dict[tuple, list] = {}
    for r in rows:
        merged.setdefault((r["mode"], r["form"], r["programs"], r["spin_ns"], r["stride"]), []).append(r["us_per_link"])
    print(f"floor of one gemv step: {floor_us:.2f} µs (8.4 MB at {read:.0f} GB/s); {L} links; two passes")
    print(f"{'mode':5s} {'form':10s} {'G':>4s} {'spin':>5s} {'cs':>3s} {'µs/link (passes)':>22s} {'% floor':>8s}")
    for (mode, form, g, spin, stride), us in merged.items():
        mean = sum(us) / len(us)
        pct = f"{100 * floor_us / mean:7.1f}" if mode == "gemv" else "      -"
        passes = ", ".join(f"{u:.3f}" for u in us)
        print(f"{mode:5s} {form:10s} {g:4d} {spin:5d} {stride:3d} {mean:9.3f} ({passes}) {pct}")
    if a.save:
        path = timing.save_result("probe-links", {"layers": L, "read_gbps": read, "gemv_floor_us": floor_us,
                                                  "rows": rows})
        print(f"saved {path}")


if __name__ == "__main__":
    main()
