"""Fused residual-add + RMSNorm (and q/k norm + RoPE): eager (HF), torch.compile, F.rms_norm and moelab's
kernels, against the floor.

    python benchmarks/bench_norm.py [--hidden 2048] [--tokens 1,4096] [--heads 32,4,128] [--samples 25]
                                    [--read-gbps G] [--offset] [--json]

For each T: every implementation timed by `moelab.timing.measure` graph-replayed (the kernels alone) and
host-launched (what eager Python pays), inputs rotated over `timing.sets_for_l2` sets; floor = bytes / read
bandwidth with bytes = T·H·2 B·4 (read x and residual, write out and the new residual) + the weight.
The kernel is checked against the reference once before timing, and its launches per call are counted with
torch.profiler (must be 1). The same is done for `qk_norm_rope` at Qwen3-30B-A3B's heads (bytes = q and k read
and written). Results are saved with `timing.save_result("bench-norm", ...)`.
Target (issue 4): hidden 2048, T=1, graph-replayed ≤ 3 µs, one launch.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from moelab import ops, report, timing
from moelab.bench import floor_read_gbps


def bench_op(label, impls, make_set, nbytes, tokens, samples, gbps, tol):
    """Time every impl of one op at each T (graph and host mode); rows with % of floor and speed-ups.

    make_set(t) -> one argument tuple; nbytes(t) -> bytes the op must move. The moelab impl is checked against
    "eager" (the reference) before timing and must launch exactly one kernel.
    """
    rows, meta = [], {}
    for t in tokens:
        floor_us = nbytes(t) / (gbps * 1e3)
        sets = [make_set(t) for _ in range(timing.sets_for_l2(nbytes(t)))]
        got, ref = impls["moelab"](*sets[0]), impls["eager"](*sets[0])
        err = max((torch.linalg.vector_norm(g.double() - r.double()) / torch.linalg.vector_norm(r.double())).item()
                  for g, r in zip(got, ref))
        if not err <= tol:
            raise SystemExit(f"bench_norm: moelab's {label} is off by {err:.3g} (rel) at T={t}; not timing it")
        launches = timing.count_launches(impls["moelab"], sets[0])
        assert launches == 1, f"{label} launched {launches} kernels at T={t}, not 1"
        meta[t] = {"rel_err": err, "launches": launches, "eager_launches": timing.count_launches(impls["eager"], sets[0]),
                   "rotation_sets": len(sets)}
        times = {}
        for mode in ("graph", "host"):
            for name, fn in impls.items():
                m = timing.measure(fn, sets, mode=mode, samples=samples)
                times[(name, mode)] = m.median_us
                rows.append({"op": label, "T": t, "impl": name, "mode": mode, "median_us": m.median_us,
                             "iqr_us": m.iqr_us, "floor_us": floor_us, "pct_floor": 100 * floor_us / m.median_us,
                             "GB/s": nbytes(t) / (m.median_us * 1e3),
                             "launches": {"moelab": launches, "eager": meta[t]["eager_launches"]}.get(name),
                             "measurement": m.to_dict()})
        for r in rows:
            if r["T"] == t:
                r["x_vs_eager"] = times[("eager", r["mode"])] / r["median_us"]
                r["x_vs_compile"] = times[("compile", r["mode"])] / r["median_us"]
    return rows, meta


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--tokens", default="1,4096", help="comma-separated T values")
    ap.add_argument("--eps", type=float, default=1e-6)
    ap.add_argument("--offset", action="store_true", help="the (1 + w) Qwen3-Next variant")
    ap.add_argument("--heads", default="32,4,128", help="Hq,Hk,D for q/k norm + RoPE (Qwen3-30B-A3B)")
    ap.add_argument("--samples", type=int, default=25)
    ap.add_argument("--read-gbps", type=float, default=None, help="read bandwidth for the floor (GB/s)")
    ap.add_argument("--json", action="store_true", help="print the payload as JSON instead of a table")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_norm: needs a CUDA GPU")

    gbps, gbps_source = floor_read_gbps(a.read_gbps)
    h, eps, offset, dt, dev = a.hidden, a.eps, a.offset, torch.bfloat16, "cuda"
    tokens = [int(s) for s in a.tokens.split(",")]

    # 1. residual add + RMSNorm: read x and residual, write out and the new residual.
    ref, ker = ops.get("add_rmsnorm", "eager"), ops.get("add_rmsnorm", "moelab")
    impls = {
        "eager": lambda x, r, w: ref(x, r, w, eps, offset=offset),  # the HF way, as a user writes it
        "compile": torch.compile(lambda x, r, w: ref(x, r, w, eps, offset=offset), dynamic=False),
        "F.rms_norm": lambda x, r, w: (lambda s: (F.rms_norm(s, (h,), (1 + w) if offset else w, eps), s))(x + r),
        "moelab": lambda x, r, w: ker(x, r, w, eps, offset=offset),
    }
    norm_rows, norm_meta = bench_op(
        "add_rmsnorm", impls,
        lambda t: (torch.randn(t, h, device=dev).to(dt), (3 * torch.randn(t, h, device=dev)).to(dt),
                   (1 + 0.1 * torch.randn(h, device=dev)).to(dt)),
        lambda t: 4 * t * h * 2 + h * 2, tokens, a.samples, gbps, tol=1e-2)

    # 2. q/k norm + RoPE: read q and k, write them back rotated.
    hq, hk, d = (int(x) for x in a.heads.split(","))
    ref2, ker2 = ops.get("qk_norm_rope", "eager"), ops.get("qk_norm_rope", "moelab")
    kw = dict(eps=eps, rope_theta=1e6, offset=offset)
    impls2 = {
        "eager": lambda q, k, qw, kw_, p: ref2(q, k, qw, kw_, p, **kw),
        "compile": torch.compile(lambda q, k, qw, kw_, p: ref2(q, k, qw, kw_, p, **kw), dynamic=False),
        "moelab": lambda q, k, qw, kw_, p: ker2(q, k, qw, kw_, p, **kw),
    }
    rope_rows, rope_meta = bench_op(
        "qk_norm_rope", impls2,
        lambda t: (torch.randn(t, hq, d, device=dev).to(dt), torch.randn(t, hk, d, device=dev).to(dt),
                   (1 + 0.1 * torch.randn(d, device=dev)).to(dt), (1 + 0.1 * torch.randn(d, device=dev)).to(dt),
                   torch.randint(0, 32768, (t,), device=dev)),
        lambda t: 2 * t * (hq + hk) * d * 2 + 2 * d * 2 + 8 * t, tokens, a.samples, gbps, tol=2e-2)

    payload = {"hidden": h, "heads": [hq, hk, d], "dtype": "bfloat16", "offset": offset, "eps": eps,
               "read_gbps": gbps, "read_gbps_source": gbps_source,
               "moelab": {"add_rmsnorm": norm_meta, "qk_norm_rope": rope_meta}, "rows": norm_rows + rope_rows}
    path = timing.save_result("bench-norm", payload)
    if a.json:
        report.emit_json(payload)
        return
    cols = ["T", "impl", "mode", "median_us", "iqr_us", "floor_us", "pct_floor", "GB/s", "x_vs_eager",
            "x_vs_compile", "launches"]
    cap = f"floor at {gbps:.0f} GB/s ({gbps_source}); x_vs_* = that impl's time / this one's; saved {path}"
    report.table(norm_rows, cols, title=f"add + RMSNorm, hidden {h}, bf16", caption=cap)
    report.table(rope_rows, cols, title=f"q/k RMSNorm + RoPE, {hq}/{hk} heads × {d}, bf16", caption=cap)


if __name__ == "__main__":
    main()
