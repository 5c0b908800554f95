"""Each GEMM of the grouped (prefill) MoE path alone: moelab's Triton kernels against PyTorch's grouped GEMM.

    python benchmarks/probe_grouped_mm.py [--tokens 256,1024,4096] [--samples 15]

Qwen3-30B-A3B shapes (E=128, H=2048, I=768, k=8), bf16, graph-replayed, one routing per T. The weights (1.2 GB)
are far past the L2, so one input set per T. Timed side by side, two passes (the second in reverse order):
  gate/up: moelab `_gate_up_kernel` (x rows gathered in the kernel, SiLU·mul in the epilogue) against
           `torch._grouped_mm(x_sorted, w13ᵀ)` on rows gathered beforehand (the gather and SiLU·mul not counted);
  down:    moelab `_down_kernel` (the routing weight in the epilogue, rows scattered to pair order) against
           `torch._grouped_mm(act_sorted, w2ᵀ)` (weights and order not applied).
The question it answers: whether the library GEMM (CUTLASS on Hopper: persistent, warp-specialised, ragged groups
without padding rows) would take either GEMM faster than moelab's, which pad each expert's rows to whole tiles.
FLOPs per GEMM: gate/up 2·P·H·2I, down 2·P·I·H (P = T·k pairs). Saved as `probe-grouped-mm-*.json`.
"""

from __future__ import annotations

import argparse

import torch

from moelab import ops, timing
from moelab.kernels import cdiv, dot_precision, next_pow2
from moelab.kernels import moe_grouped as mg

E, H, I, K = 128, 2048, 768, 8


def _moelab_gemms(x, w13, w2, w, ids):
    """(gate_up(), down()) closures launching moelab's two GEMMs as `_experts_pass` does with the default config (its
    launch arguments repeated here so each GEMM can be timed alone; whole layers are `moelab bench moe`'s)."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    P = ids.numel()
    cfg = mg.grouped_config(P, E, H, I)
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    order, start, count, cum_tiles = mg.group_pairs(ids, E, bm, fused=True)
    act = torch.empty(P, I, dtype=x.dtype, device=x.device)
    y = torch.empty(P, H, dtype=x.dtype, device=x.device)
    wide = bool(cfg.get("WIDE", False))
    w13_desc = (TensorDescriptor.from_tensor(w13.view(E * 2, I, H), [2, bn, bk]) if wide
                else TensorDescriptor.from_tensor(w13.view(E * 2 * I, H), [bn, bk]))
    down = dict(BLOCK_N=bn, BLOCK_K=bk, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    down.update(cfg.get("DOWN", {}))
    w2_desc = TensorDescriptor.from_tensor(w2.view(E * H, I), [down["BLOCK_N"], down["BLOCK_K"]])
    act_desc = TensorDescriptor.from_tensor(act, [bm, down["BLOCK_K"]])
    if not (cfg.get("TMA") and cfg.get("N_FASTEST") and cfg.get("WIDE_TMA", True)):
        raise SystemExit("probe_grouped_mm: the default grouped config is no longer TMA + N_FASTEST; update the probe")
    meta = dict(E_PAD=next_pow2(E), BLOCK_M=bm, PREC=dot_precision(x.dtype, "probe_grouped_mm"), N_FASTEST=True,
                TMA=True)
    max_tiles = cdiv(P, bm) + E
    tw = w.reshape(-1).contiguous()

    def gate_up():
        mg._gate_up_kernel[(max_tiles * cdiv(I, bn),)](
            x, w13, order, start, count, cum_tiles, act, w13_desc, H, I, E, K, x.stride(0), w13.stride(0),
            w13.stride(1), WIDE=wide, BLOCK_N=bn, BLOCK_K=bk, num_warps=cfg["num_warps"],
            num_stages=cfg["num_stages"], **meta)

    def down_():
        mg._down_kernel[(max_tiles * cdiv(H, down["BLOCK_N"]),)](
            act, w2, tw, order, start, count, cum_tiles, y, act_desc, w2_desc, H, I, E, w2.stride(0), w2.stride(1),
            **meta, **down)

    return gate_up, down_, order, count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", default="256,1024,4096")
    ap.add_argument("--samples", type=int, default=15)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("probe_grouped_mm: needs a CUDA GPU")
    if not hasattr(torch, "_grouped_mm"):
        raise SystemExit("probe_grouped_mm: this torch has no torch._grouped_mm")
    dev, dt = "cuda", torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(0)
    w13 = (torch.randn(E, 2 * I, H, device=dev, generator=g) * H ** -0.5).to(dt)
    w2 = (torch.randn(E, H, I, device=dev, generator=g) * I ** -0.5).to(dt)
    rows = []
    for T in [int(t) for t in a.tokens.split(",") if t]:
        x = torch.randn(T, H, device=dev, generator=g).to(dt)
        w, ids = ops.get("route", "eager")(torch.randn(T, E, device=dev, generator=g), K)
        gate_up, down, order, count = _moelab_gemms(x, w13, w2, w, ids)
        P = T * K
        offs = torch.cumsum(count, 0).to(torch.int32)
        xs = x.index_select(0, order.long() // K)  # [P, H], expert order
        acts = torch.randn(P, I, device=dev, generator=g).to(dt)
        w13t, w2t = w13.transpose(1, 2), w2.transpose(1, 2)  # [E, H, 2I], [E, I, H]: column-major B, no copy
        gate_up(), down()
        # The library's gate/up is checked before timing: expert 0's rows against an fp32 product.
        lib = torch._grouped_mm(xs, w13t, offs=offs)
        fns = {
            "moelab gate/up": gate_up,
            "grouped_mm gate/up": lambda: torch._grouped_mm(xs, w13t, offs=offs),
            "moelab down": down,
            "grouped_mm down": lambda: torch._grouped_mm(acts, w2t, offs=offs),
        }
        n0 = int(count[0])
        err = None
        if n0:
            ref = xs[:n0].float() @ w13[0].float().t()
            err = float((lib[:n0].float() - ref).norm() / ref.norm())
            if not err <= 2e-2:
                raise SystemExit(f"probe_grouped_mm: torch._grouped_mm is off by {err:.3g} (rel) at T={T}")
        flops = {"gate/up": 2.0 * P * H * 2 * I, "down": 2.0 * P * I * H}
        times: dict = {n: [] for n in fns}
        for order_ in (list(fns), list(fns)[::-1]):
            for n in order_:
                times[n].append(timing.measure(fns[n], mode="graph", samples=a.samples, warmup=2))
        for n, ms in times.items():
            us = sum(m.median_us for m in ms) / len(ms)
            rows.append(dict(T=T, gemm=n, median_us=us, passes_us=[m.median_us for m in ms],
                             iqr_us=max(m.iqr_us for m in ms), tflops=flops[n.split()[1]] / us / 1e6,
                             grouped_mm_rel_err=err))
            print(f"T={T:5d}  {n:20s} {us:8.1f} us  ({'/'.join(f'{m.median_us:.1f}' for m in ms)})  "
                  f"{flops[n.split()[1]] / us / 1e6:6.1f} TFLOP/s")
    path = timing.save_result("probe-grouped-mm", {"shape": dict(E=E, H=H, I=I, k=K), "rows": rows})
    print("saved", path)


if __name__ == "__main__":
    main()
