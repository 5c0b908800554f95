"""Decode attention (one query token, GQA 32/4 × 128, bf16): HF eager, torch.compile, SDPA flash and cuDNN,
moelab's flash-decoding kernel, and the floor — side by side, graph-replayed.

    python benchmarks/bench_attention.py [--shapes 1x1024,1x16384,1x65536,8x16384,1x131072] [--samples 25]
                                         [--read-gbps G] [--no-compile] [--sweep] [--merge] [--json]

Floor = K + V bytes (B·Hk·S·D·2 B·2) / read bandwidth. Inputs rotate over `timing.sets_for_l2` KV caches so
the L2 cannot serve them. The kernel is checked against `ops` reference once per shape before timing; its
launches per call are counted with torch.profiler (2: split + combine; 1 when the heuristic picks one split, or
up to 4 that the split kernel merges itself).
`--sweep` also times the kernel at neighbouring (num_splits, BLOCK_N) to check the heuristic; `--merge` the split
kernel merging its own splits (2-4 splits) against the combine launch, in two alternating passes.
Targets (issue 4): B=1 1k ≤ 6 µs, 16k ≤ 14 µs, 64k ≥ 85 % of floor; B=8 16k ≥ 90 % of floor.
Saved with `timing.save_result("bench-attention", ...)`.
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F

from moelab import ops, report, timing
from moelab.bench import floor_read_gbps
from moelab.kernels import attention as attn_kernel

HQ, HK, D = 32, 4, 128


def hf_eager(q, k, v, lens):
    """What HF's eager attention does at decode with a full cache: repeat_kv, bf16 matmuls, fp32 softmax."""
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    s = torch.matmul(q[:, :, None], k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    p = torch.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(p, v)[:, :, 0]


def sdpa(backend):
    from torch.nn.attention import sdpa_kernel

    def fn(q, k, v, lens):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q[:, :, None], k, v, enable_gqa=True)[:, :, 0]
    return fn


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="1x1024,1x16384,1x65536,8x16384,1x131072",
                    help="BATCHxCONTEXT, comma-separated")
    ap.add_argument("--samples", type=int, default=25)
    ap.add_argument("--read-gbps", type=float, default=None, help="read bandwidth for the floor (GB/s)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (saves compile time)")
    ap.add_argument("--sweep", action="store_true", help="also time neighbouring (num_splits, BLOCK_N)")
    ap.add_argument("--warps", default="", help="with --sweep: also the split kernel on these num_warps (e.g. 1,2,4)")
    ap.add_argument("--stages", default="", help="with --warps: and these num_stages (e.g. 1,2,3); default 3")
    ap.add_argument("--merge", action="store_true",
                    help="also time the chosen (splits, BLOCK_N) with the split kernel merging its splits and with "
                         "the combine launch, in two alternating passes, where the merge applies (2-4 splits)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.warps and not a.sweep:
        ap.error("--warps is a part of --sweep: give both")
    if a.stages and not a.warps:
        ap.error("--stages needs --warps")
    if not torch.cuda.is_available():
        raise SystemExit("bench_attention: needs a CUDA GPU")
    from torch.nn.attention import SDPBackend

    gbps, gbps_source = floor_read_gbps(a.read_gbps)
    dt, dev = torch.bfloat16, "cuda"
    reference, kernel = ops.get("decode_attention", "eager"), ops.get("decode_attention", "moelab")
    impls = {"eager": hf_eager}
    if not a.no_compile:
        impls["compile"] = torch.compile(hf_eager)  # automatic dynamic shapes: one recompile, not one per shape
    impls["sdpa_flash"] = sdpa(SDPBackend.FLASH_ATTENTION)
    impls["sdpa_cudnn"] = sdpa(SDPBackend.CUDNN_ATTENTION)
    impls["moelab"] = lambda q, k, v, lens: kernel(q, k, v, lens)

    rows, sweep_rows, meta = [], [], {}
    for shape in a.shapes.split(","):
        b, s = (int(x) for x in shape.lower().split("x"))
        kv_bytes = 2 * b * HK * s * D * 2
        floor_us = kv_bytes / (gbps * 1e3)
        sets = []
        for _ in range(timing.sets_for_l2(kv_bytes)):
            sets.append((torch.randn(b, HQ, D, device=dev).to(dt), torch.randn(b, HK, s, D, device=dev).to(dt),
                         torch.randn(b, HK, s, D, device=dev).to(dt),
                         torch.full((b,), s, device=dev, dtype=torch.int32)))
        ref = reference(*sets[0])
        diff = (kernel(*sets[0]) - ref).double()
        err = (torch.linalg.vector_norm(diff) / torch.linalg.vector_norm(ref.double())).item()
        if not err <= 2e-2:
            raise SystemExit(f"bench_attention: moelab is off by {err:.3g} (rel) at {shape}; not timing it")
        block_n, splits = attn_kernel.launch_params(b, HK, s, D, attn_kernel.sm_count(torch.device(dev)))
        meta[shape] = {"rel_err": err, "launches": timing.count_launches(impls["moelab"], sets[0]),
                       "num_splits": splits, "block_n": block_n, "rotation_sets": len(sets)}
        times = {}
        for name, fn in impls.items():
            try:
                m = timing.measure(fn, sets, mode="graph", samples=a.samples)
            except Exception as e:  # a backend that refuses this shape (or is absent): say so, keep going
                print(f"{shape} {name}: not run ({str(e).splitlines()[0][:120]})")
                continue
            times[name] = m.median_us
            rows.append({"B": b, "ctx": s, "impl": name, "median_us": m.median_us, "iqr_us": m.iqr_us,
                         "floor_us": floor_us, "pct_floor": 100 * floor_us / m.median_us,
                         "GB/s": kv_bytes / (m.median_us * 1e3), "measurement": m.to_dict()})
        for r in rows:
            if (r["B"], r["ctx"]) == (b, s) and "moelab" in times:
                r["moelab_x"] = r["median_us"] / times["moelab"]  # how many times slower than moelab
        if a.merge and 1 < splits <= attn_kernel.MERGE_MAX_SPLITS:
            for rep in range(2):  # alternating, so a drift across the run shows as a difference between passes
                for mg in (False, True):
                    m = timing.measure(lambda q, k, v, lens: kernel(q, k, v, lens, merge=mg), sets, mode="graph",
                                       samples=a.samples)
                    sweep_rows.append({"B": b, "ctx": s, "num_splits": splits, "block_n": block_n, "merge": mg,
                                       "pass": rep, "median_us": m.median_us, "iqr_us": m.iqr_us,
                                       "pct_floor": 100 * floor_us / m.median_us, "chosen": mg})
        if a.sweep:
            for sp in sorted({max(1, splits // 2), splits, min(256, 2 * splits), max(1, splits // 4)}):
                for bn in (32, 64, 128):
                    m = timing.measure(lambda q, k, v, lens: kernel(q, k, v, lens, num_splits=sp, block_n=bn),
                                       sets, mode="graph", samples=max(5, a.samples // 3))
                    sweep_rows.append({"B": b, "ctx": s, "num_splits": sp, "block_n": bn, "median_us": m.median_us,
                                       "pct_floor": 100 * floor_us / m.median_us,
                                       "chosen": (sp, bn) == (splits, block_n)})
            # The split kernel's warps and pipeline depth (4 and 3 until session 10, never swept). Stage AP's ncu at
            # batch 8 / 1k: 1,400 instructions per warp at 8 cycles each for two 64-key tiles, 7 warps per SM.
            for nw in [int(w) for w in a.warps.split(",") if w]:
                for ns in [int(x) for x in (a.stages or "3").split(",")]:
                    for sp, bn in sorted({(splits, block_n), (splits, 32), (min(256, 2 * splits), block_n)}):
                        m = timing.measure(lambda q, k, v, lens: kernel(q, k, v, lens, num_splits=sp, block_n=bn,
                                                                        num_warps=nw, num_stages=ns),
                                           sets, mode="graph", samples=max(5, a.samples // 3))
                        sweep_rows.append({"B": b, "ctx": s, "num_splits": sp, "block_n": bn, "num_warps": nw,
                                           "num_stages": ns, "median_us": m.median_us,
                                           "pct_floor": 100 * floor_us / m.median_us,
                                           "chosen": (sp, bn, nw, ns) == (splits, block_n, 4, 3)})
        del sets

    payload = {"heads": [HQ, HK], "head_dim": D, "dtype": "bfloat16", "read_gbps": gbps,
               "read_gbps_source": gbps_source, "moelab": meta, "rows": rows, "sweep": sweep_rows}
    path = timing.save_result("bench-attention", payload)
    if a.json:
        report.emit_json(payload)
        return
    report.table(rows, ["B", "ctx", "impl", "median_us", "iqr_us", "floor_us", "pct_floor", "GB/s", "moelab_x"],
                 title=f"decode attention, GQA {HQ}/{HK} × {D}, bf16, graph-replayed",
                 caption=f"floor at {gbps:.0f} GB/s ({gbps_source}); moelab_x = time / moelab's time; saved {path}")
    report.table([{"shape": k, **v} for k, v in meta.items()], title="moelab kernel: launch parameters, checks")
    if sweep_rows:
        report.table(sorted(sweep_rows, key=lambda r: (r["B"], r["ctx"], r["median_us"])),
                     title="sweep (best first per shape)")


if __name__ == "__main__":
    main()
