"""Decode GEMVs (y = x @ Wᵀ at T ≤ 64): eager F.linear (cuBLAS), torch.compile(F.linear), moelab's `linear`, and
the floor — side by side in one process, graph-replayed.

    python benchmarks/bench_linear.py [--model qwen3-30b-a3b] [--ops qkv_proj,o_proj,router,lm_head]
                                      [--tokens 1,8,32] [--samples 25] [--read-gbps G] [--no-compile]
                                      [--pdl] [--sweep [dot]] [--sweep-samples 7] [--json]
    TRITON_INTERPRET=1 python benchmarks/bench_linear.py --device cpu     # smoke test: tiny shapes, times meaningless

Shapes come from the model preset: qkv_proj W[(Hq + 2·Hk)·D, hidden], o_proj W[hidden, Hq·D], router W[E, hidden],
lm_head W[vocab, hidden] (Qwen3-30B-A3B: 5120×2048, 2048×4096, 128×2048, 151936×2048), bf16.
bytes = N·K·2 (weight) + T·K·2 (x) + T·N·2 (y); floor = bytes / measured read bandwidth (`hardware.ceilings()`).
Every impl is timed by `moelab.timing.measure` in graph mode over `timing.sets_for_l2` distinct (x, W) sets, so
no weight is served from L2 (the cap is raised so that even the 0.5 MB router rotates past 3× the L2).
moelab is checked against the `ops` reference once per shape before timing, and its launches per call are
counted with torch.profiler (must be 1), eager's too (the decode profile saw cuBLAS launch 2 at o_proj:
split-K).
--pdl adds moelab with programmatic dependent launch: back to back in the graph, each call's first weight loads
overlap the previous call's tail. Where `linear` runs the GEMV (T < dot_min_t()), moelab_dot times its tensor-core
kernel on the same inputs (config DOT=True), so the two forms and cuBLAS are side by side at every T.
Where it runs the tensor-core kernel (dot_min_t() ≤ T ≤ GEMV_MAX_T), moelab_gemv times the GEMV the same way.
--sweep times linear_config's neighbours (BLOCK_N, BLOCK_K, SPLIT_K, num_warps; for the tensor-core kernel
num_stages too, and at T ≤ 16 the neighbours of both forms) and prints the best few per shape (the tensor-core
kernel's tile was swept at T=8 in session 8; the GEMV's at T=1 in session 5).
Saved with `timing.save_result("bench-linear", ...)` (on --device cpu only when $MOELAB_RESULTS_DIR is set: a
CPU time means nothing and benchmarks/results holds GPU records).
"""

from __future__ import annotations

import argparse
import itertools
import os

import torch
import torch.nn.functional as F

from moelab import ops, report, timing
from moelab.bench import floor_read_gbps
from moelab.models.spec import load_spec


def gemv_shapes(model: str, tiny: bool) -> dict[str, tuple[int, int]]:
    """(N, K) of the decode GEMVs of `model`'s preset; `tiny` divides them for the CPU smoke test."""
    s = load_spec(model)
    shapes = {"qkv_proj": ((s.heads + 2 * s.kv_heads) * s.head_dim, s.hidden),
              "o_proj": (s.hidden, s.heads * s.head_dim), "lm_head": (s.vocab, s.hidden)}
    if s.num_experts:
        shapes["router"] = (s.num_experts, s.hidden)
    if tiny:
        shapes = {k: (max(2, min(n // 256, 48)), k_ // 64 + 3) for k, (n, k_) in shapes.items()}
    return shapes


def neighbours(cfg: dict, T: int, N: int, K: int, elem: int) -> list[dict]:
    """linear_config's choice first, then its neighbours: BLOCK_N and BLOCK_K halved/doubled, SPLIT_K 1/2/4,
    num_warps 2/4 (SPLIT_K clipped to the chunks K has, as the launcher does; duplicates dropped). For the
    tensor-core kernel (cfg["DOT"]): BLOCK_N 32/64/128, BLOCK_K 64/128, SPLIT_K halved/doubled, 3 or 4 stages."""
    if cfg.get("DOT"):
        out = [cfg]
        splits = (max(1, cfg["SPLIT_K"] // 2), cfg["SPLIT_K"], cfg["SPLIT_K"] * 2)
        for bn, bk, sk, ns in itertools.product((32, 64, 128), (64, 128), splits, (3, 4)):
            c = dict(cfg, BLOCK_N=bn, BLOCK_K=bk, SPLIT_K=min(sk, -(-K // bk)), num_stages=ns)
            if c not in out:
                out.append(c)
        return out
    vec, out = 16 // elem, [cfg]
    for bn, bk, sk, nw in itertools.product(
            (cfg["BLOCK_N"] // 2, cfg["BLOCK_N"], cfg["BLOCK_N"] * 2),
            (cfg["BLOCK_K"] // 2, cfg["BLOCK_K"], cfg["BLOCK_K"] * 2), (1, 2, 4), (2, 4)):
        if bn < 1 or bk < vec or bk > 2 * max(vec, 1 << (K - 1).bit_length()) or bn > max(1, 1 << (N - 1).bit_length()):
            continue
        sk = min(sk, -(-K // bk))
        c = dict(DOT=False, BLOCK_N=bn, BLOCK_K=bk, SPLIT_K=sk, num_warps=nw)
        if c not in out:
            out.append(c)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen3-30b-a3b", help="model preset whose decode GEMVs are timed")
    ap.add_argument("--ops", default="qkv_proj,o_proj,router,lm_head", help="comma-separated GEMVs")
    ap.add_argument("--tokens", default="1,8", help="comma-separated T values (1..64)")
    ap.add_argument("--samples", type=int, default=25)
    ap.add_argument("--read-gbps", type=float, default=None, help="read bandwidth for the floor (GB/s)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (saves compile time)")
    ap.add_argument("--pdl", action="store_true", help="also time moelab with programmatic dependent launch")
    ap.add_argument("--sweep", nargs="?", const="all", choices=["all", "dot"], default=None,
                    help="also time linear_config's neighbours (dot: only the tensor-core kernel's)")
    ap.add_argument("--sweep-samples", type=int, default=7)
    ap.add_argument("--top", type=int, default=5, help="sweep rows printed per shape")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cpu: a smoke test under TRITON_INTERPRET=1 at tiny shapes (times meaningless)")
    ap.add_argument("--json", action="store_true", help="print the payload as JSON instead of tables")
    a = ap.parse_args()
    cpu = a.device == "cpu"
    if cpu and os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("bench_linear: --device cpu runs the kernel in the Triton interpreter: set TRITON_INTERPRET=1")
    if not cpu and not torch.cuda.is_available():
        raise SystemExit("bench_linear: needs a CUDA GPU (or --device cpu with TRITON_INTERPRET=1 for a smoke test)")
    from moelab.kernels.linear import GEMV_MAX_T, dot_config, dot_min_t, linear, linear_config  # after the check
    from moelab.kernels.attention import sm_count

    gbps, gbps_source = floor_read_gbps(a.read_gbps)
    # The CPU smoke test runs fp16: the interpreter has no bf16 tl.dot (the tensor-core kernel from DOT_MIN_T).
    dt, dev = (torch.float16 if cpu else torch.bfloat16), torch.device(a.device)
    reference, kernel = ops.get("linear", "eager"), ops.get("linear", "moelab")
    impls = {"eager": lambda x, w: F.linear(x, w)}
    if not a.no_compile and not cpu:  # inductor on the CPU would time a C++ kernel: not what is compared here
        # One static-shape compile per (GEMV, T): more than dynamo's default 8 recompiles of one function.
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
        impls["compile"] = torch.compile(lambda x, w: F.linear(x, w), dynamic=False)
    impls["moelab"] = lambda x, w: kernel(x, w)
    impls["moelab_dot"] = lambda x, w: linear(x, w, config={"DOT": True})  # where moelab runs the GEMV
    impls["moelab_gemv"] = lambda x, w: linear(x, w, config={"DOT": False})  # where it runs the tensor cores
    if a.pdl:
        if cpu:
            print("--pdl: skipped on the CPU (griddepcontrol is inline PTX the interpreter cannot run)")
        else:
            impls["moelab_pdl"] = lambda x, w: linear(x, w, use_pdl=True)

    shapes = gemv_shapes(a.model, tiny=cpu)
    names = [n for n in a.ops.split(",") if n]
    unknown = [n for n in names if n not in shapes]
    if unknown:
        raise SystemExit(f"bench_linear: {a.model} has no GEMV {unknown}; known: {sorted(shapes)}")
    tokens = [int(t) for t in a.tokens.split(",")]
    samples = 3 if cpu else a.samples
    l2 = timing.l2_bytes()
    rows, sweep_rows, meta = [], [], {}
    for name, T in itertools.product(names, tokens):
        N, K = shapes[name]
        w_bytes = N * K * 2
        nbytes = w_bytes + T * K * 2 + T * N * 2
        floor_us = nbytes / (gbps * 1e3)
        n_sets = 1 if cpu else timing.sets_for_l2(w_bytes, l2, cap=max(64, -(-3 * l2 // w_bytes)))
        sets = [(torch.randn(T, K, device=dev).to(dt), (torch.randn(N, K, device=dev) * K ** -0.5).to(dt))
                for _ in range(n_sets)]
        ref = reference(*sets[0])
        errs = {impl: ((impls[impl](*sets[0]).double() - ref.double()).norm() / ref.double().norm()).item()
                for impl in ("moelab", "moelab_dot") + (("moelab_gemv",) if T <= GEMV_MAX_T else ())}
        for impl, e in errs.items():
            if not e <= 2e-2:
                raise SystemExit(f"bench_linear: {impl} is off by {e:.3g} (rel) at {name} T={T}; not timing it")
        err = errs["moelab"]
        cfg = linear_config(T, N, K, elem_bytes=2, sms=sm_count(dev), dot=T >= dot_min_t())
        launches = timing.count_launches(impls["moelab"], sets[0])
        assert launches in (None, 1), f"moelab launched {launches} kernels at {name} T={T}, not 1"
        key = f"{name} T={T}"
        meta[key] = {"N": N, "K": K, "T": T, "rel_err": err, "config": cfg, "launches": launches,
                     "eager_launches": timing.count_launches(impls["eager"], sets[0]), "rotation_sets": n_sets,
                     "rotation_bytes": n_sets * w_bytes}
        times = {}
        for impl, fn in impls.items():
            if (impl == "moelab_dot" and cfg["DOT"]) or (impl == "moelab_gemv" and (not cfg["DOT"] or T > GEMV_MAX_T)):
                continue  # moelab itself runs that kernel at this T (or the GEMV cannot: T > GEMV_MAX_T)
            try:
                m = timing.measure(fn, sets, mode="graph", samples=samples, warmup=1 if cpu else 3)
            except Exception as e:  # a backend that refuses this shape: say so, keep going
                print(f"{key} {impl}: not run ({str(e).splitlines()[0][:120]})")
                continue
            times[impl] = m.median_us
            rows.append({"op": name, "T": T, "N": N, "K": K, "impl": impl, "median_us": m.median_us,
                         "iqr_us": m.iqr_us, "floor_us": floor_us, "pct_floor": 100 * floor_us / m.median_us,
                         "GB/s": nbytes / (m.median_us * 1e3), "measurement": m.to_dict()})
        for r in rows:
            if (r["op"], r["T"]) == (name, T) and "moelab" in times:
                r["moelab_x"] = r["median_us"] / times["moelab"]  # how many times slower than moelab
        if a.sweep:
            cands = [] if a.sweep == "dot" and not cfg["DOT"] else neighbours(cfg, T, N, K, 2)
            if T <= GEMV_MAX_T and not cfg["DOT"]:
                cands += neighbours(dot_config(T, N, K, sms=sm_count(dev)), T, N, K, 2)
            for c in cands[:2] if cpu else cands:
                m = timing.measure(lambda x, w, c=c: linear(x, w, config=c), sets, mode="graph",
                                   samples=1 if cpu else a.sweep_samples, warmup=1 if cpu else 3)
                sweep_rows.append({"op": name, "T": T, **c, "median_us": m.median_us, "iqr_us": m.iqr_us,
                                   "pct_floor": 100 * floor_us / m.median_us, "chosen": c == cfg})
        del sets

    payload = {"model": a.model, "dtype": str(dt).removeprefix("torch."), "device": a.device, "read_gbps": gbps,
               "read_gbps_source": gbps_source, "moelab": meta, "rows": rows, "sweep": sweep_rows}
    path = None
    if not cpu or os.environ.get("MOELAB_RESULTS_DIR"):
        path = timing.save_result("bench-linear", payload)
    if a.json:
        report.emit_json(payload)
        return
    title = (f"decode GEMV, {a.model}, {str(dt).removeprefix('torch.')}, graph-replayed"
             + (" (CPU smoke test: times meaningless)" if cpu else ""))
    cols = ["op", "T", "N", "K", "impl", "median_us", "iqr_us", "floor_us", "pct_floor", "GB/s", "moelab_x"]
    report.table(rows, cols, title=title,
                 caption=f"floor at {gbps:.0f} GB/s ({gbps_source}); moelab_x = time / moelab's time; "
                         f"{'saved ' + str(path) if path else 'not saved'}")
    checks = ("config", "launches", "eager_launches", "rel_err", "rotation_sets")
    report.table([{"shape": k, **{f: v[f] for f in checks}} for k, v in meta.items()],
                 title="moelab kernel: launch parameters, checks")
    if sweep_rows:
        best = []
        for (op, T), group in itertools.groupby(sweep_rows, key=lambda r: (r["op"], r["T"])):
            best += sorted(group, key=lambda r: r["median_us"])[: a.top]
        report.table(best, ["op", "T", "DOT", "BLOCK_N", "BLOCK_K", "SPLIT_K", "num_warps", "num_stages", "median_us",
                            "iqr_us", "pct_floor", "chosen"],
                     title=f"sweep: best {a.top} per shape (chosen = linear_config's)")


if __name__ == "__main__":
    main()
