"""What one host-launched MoE layer costs the CPU, and where in Python that time goes.

    python benchmarks/probe_host.py [--tokens 1,8,256,4096] [--calls 50] [--top 15]

Why: `moelab bench moe` times moelab host-launched at 152 µs a call at T=1 (24 µs graph-replayed) and 696 against
311 µs at T=256 (bench-moe-…T175421): eager callers are bound by the host, not the GPU. Per T this times the Python
side of `calls` layers (route + fused_moe, Qwen3-30B-A3B shapes, bf16) with no synchronisation inside the loop (the
GPU queue absorbs the launches), then profiles the same loop with cProfile and prints the functions with the most
own time, and the count of kernel launches per call (torch profiler).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import torch

from moelab import ops, timing
from moelab.kernels.moe import fused_moe


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", default="1,8,256,4096")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--no-save", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("probe_host needs a CUDA GPU (launch costs on a CPU would say nothing)")
    E, H, I, k = 128, 2048, 768, 8
    w13 = (torch.randn(E, 2 * I, H, device="cuda") * H ** -0.5).bfloat16()
    w2 = (torch.randn(E, H, I, device="cuda") * I ** -0.5).bfloat16()
    route = ops.get("route", "moelab")
    rows = []
    for T in [int(t) for t in a.tokens.split(",")]:
        x = torch.randn(T, H, device="cuda").bfloat16()
        lg = torch.randn(T, E, device="cuda")

        def layer():
            w, ids = route(lg, k)
            return fused_moe(x, w13, w2, w, ids)

        for _ in range(5):
            layer()
        torch.cuda.synchronize()
        host = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(a.calls):
                layer()
            host.append((time.perf_counter() - t0) * 1e6 / a.calls)
            torch.cuda.synchronize()
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(4):
                layer()
            torch.cuda.synchronize()
        launches = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA) / 4
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(a.calls):
            layer()
        pr.disable()
        torch.cuda.synchronize()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(a.top)
        host.sort()
        print(f"T={T}: host {host[len(host) // 2]:.1f} µs a call (min {host[0]:.1f}), {launches:.0f} GPU kernels a call")
        print("\n".join(s.getvalue().splitlines()[:a.top + 12]))
        rows.append({"T": T, "host_us_median": host[len(host) // 2], "host_us_min": host[0], "kernels_per_call": launches,
                     "cprofile_top": s.getvalue()[:6000]})
    if not a.no_save:
        print(f"saved {timing.save_result('probe-host', {'rows': rows})}")


if __name__ == "__main__":
    main()
