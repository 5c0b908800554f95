"""Where a kernel's fixed cost goes: per-program timelines from the GPU's global clock (kernels/probe.py).

    python benchmarks/probe_timeline.py [--attention 1x1024,1x16384,1x65536,8x16384] [--moe 1,2] [--calls 8]

Each case is a CUDA graph of `--calls` calls (more where the rotation needs more to total 3 × L2) on rotating
inputs (the L2 cannot serve them), every call with its own probe buffers, replayed a few times; the last replay's
stamps are read. Per call, relative to the call's first program start, medians over the calls (the graph's first
call dropped: it starts behind the graph's launch), µs:
  attention (`decode_attention`, GQA 32/4 × 128, bf16): the split programs' start spread, their durations
  (p50 / p90 / max), the split's end, the combine's first release from its PDL wait, the combine's end, and the
  gap from this call's end to the next call's first program;
  moe (the pair kernel at Qwen3-30B-A3B shapes or, with --moe-shape shard, the tp=4 shard's; T tokens, routing done
  before the graph): phase 1's start spread and end (p50 / max), phase 2's activations ready (p50 / max) and end;
  the gap to the next call.
The stream floor (bytes / measured read bandwidth) is printed beside each, and each case's time per call from
the graph's CUDA events with the probes on and off (what the probes themselves cost). Saved as
`probe-timeline-*.json`.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from moelab import hardware, ops, timing
from moelab.kernels import attention as attn
from moelab.kernels import cdiv
from moelab.kernels.moe_pairs import moe_pairs, pairs_config

from trace_moe import MOE_SHAPES

HQ, HK, D = 32, 4, 128


def _med(xs):
    return round(statistics.median(xs), 2) if xs else None


def _q(xs, f):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(f * len(xs)))]


def _graph(calls):
    """Capture the list of zero-argument calls into one graph (warmed on a side stream first)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for c in calls:
            c()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    torch.cuda.synchronize()
    return g


def _stamps(buf):
    """[programs, 4] int64 → (start µs, mid µs, end µs, tag) lists, absolute."""
    a = buf.view(-1, 4).cpu().tolist()
    return [r[0] / 1e3 for r in a], [r[1] / 1e3 for r in a], [r[2] / 1e3 for r in a], [r[3] for r in a]


def _clock_step(times):
    """The smallest positive difference between sorted stamps: the clock's resolution as seen (ns)."""
    t = sorted(set(round(x * 1e3) for x in times))
    d = [b - a for a, b in zip(t, t[1:]) if b > a]
    return min(d) if d else None


def probe_attention(b, s, n_calls, gbps, samples):
    dev, dt = "cuda", torch.bfloat16
    kv_bytes = b * HK * s * D * 2 * 2
    n_sets = timing.sets_for_l2(kv_bytes)  # as bench_attention.py rotates: ≥ 3 × L2 in all
    n_calls = max(n_calls, n_sets)
    sets = [(torch.randn(b, HQ, D, device=dev).to(dt), torch.randn(b, HK, s, D, device=dev).to(dt),
             torch.randn(b, HK, s, D, device=dev).to(dt), torch.full((b,), s, dtype=torch.int32, device=dev))
            for _ in range(n_sets)]
    block_n, splits = attn.launch_params(b, HK, s, D, attn.sm_count(torch.device(dev)))
    bufs = [(torch.zeros(b * HK * splits * 4, dtype=torch.int64, device=dev),
             torch.zeros(max(1, b * HQ) * 4, dtype=torch.int64, device=dev)) for _ in range(n_calls)]
    outs = [torch.empty(b, HQ, D, dtype=dt, device=dev) for _ in range(n_calls)]
    calls = [(lambda i=i: attn.decode_attention(*sets[i % n_sets], out=outs[i], _probe=bufs[i])) for i in range(n_calls)]
    ref = ops.get("decode_attention", "eager")(*sets[0])
    calls[0]()
    err = ((outs[0].double() - ref.double()).norm() / ref.double().norm()).item()
    g = _graph(calls)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    per_call = []
    for i in range(n_calls):
        ss, _, se, sm = _stamps(bufs[i][0])
        combined = bool(bufs[i][1].any())  # a combine ran (not one split, nor splits the split kernel merged)
        cs, cw, ce, _ = _stamps(bufs[i][1]) if combined else ([], [], [], [])
        per_call.append((ss, se, sm, cs, cw, ce))
    rows = []
    for i in range(1, n_calls):
        ss, se, sm, cs, cw, ce = per_call[i]
        t0 = min(ss)
        dur = [e - st for st, e in zip(ss, se)]
        end = max(ce) if ce else max(se)
        r = {"start_spread": max(ss) - t0, "dur_p50": _q(dur, 0.5), "dur_p90": _q(dur, 0.9), "dur_max": max(dur),
             "split_end": max(se) - t0, "end": end - t0,
             "progs_per_sm_max": max(sm.count(x) for x in set(sm))}
        if ce:
            r["combine_release"] = min(cw) - t0
            r["combine_first_start"] = min(cs) - t0
        if i + 1 < n_calls:
            r["gap_to_next"] = min(per_call[i + 1][0]) - end
        rows.append(r)
    summary = {k: _med([r[k] for r in rows if k in r]) for k in rows[0]}
    summary["clock_step_ns"] = _clock_step(per_call[1][0] + per_call[1][1])
    fn_plain = lambda q, k, v, lens: attn.decode_attention(q, k, v, lens)  # noqa: E731
    on = timing.measure(lambda i: calls[i](), [(i,) for i in range(n_calls)], mode="graph", samples=samples).median_us
    off = timing.measure(fn_plain, sets, mode="graph", samples=samples).median_us
    return {"case": f"attention {b}x{s}", "splits": splits, "block_n": block_n, "programs": b * HK * splits,
            "floor_us": round(kv_bytes / (gbps * 1e3), 2), "us_per_call_probe_on": round(on, 2),
            "us_per_call_probe_off": round(off, 2), "rel_err": err, "timeline_us": summary}


def probe_moe(T, n_calls, gbps, samples, shape="qwen3-30b-a3b", direct=0, route_in=False):
    dev, dt = "cuda", torch.bfloat16
    E, H, I, k = MOE_SHAPES[shape]
    layers = [((torch.randn(E, 2 * I, H, device=dev) * H ** -0.5).to(dt),
               (torch.randn(E, H, I, device=dev) * I ** -0.5).to(dt)) for _ in range(3)]
    sets, logits = [], []
    for i in range(n_calls):
        logits.append(torch.randn(T, E, device=dev))
        w, ids = ops.get("route", "eager")(logits[-1], k)
        sets.append((torch.randn(T, H, device=dev).to(dt), *layers[i % 3], w, ids.to(torch.int32)))
    # ROUTE_IN: every program routes the token from its logits and writes the weights and ids over the route's own
    # (the same values), as `moe_block` runs it at T=1 under DIRECT.
    lg = (lambda i: dict(logits=logits[i], renormalize=True)) if route_in else (lambda i: {})
    cfg = pairs_config(T, k, H, I)
    n_prog = T * k * cdiv(I, cfg["BLOCK_I"]) + T * k * cdiv(H, cfg["BLOCK_H"])
    if direct:  # phase 2 without partials (DIRECT): one program per `direct` outputs, over all k slots
        cfg = dict(cfg, DIRECT=True, BLOCK_HD=direct)
        n_prog = T * k * cdiv(I, cfg["BLOCK_I"]) + cdiv(H, direct)
    bufs = [torch.zeros(n_prog * 4, dtype=torch.int64, device=dev) for _ in range(n_calls)]
    outs = [torch.empty(T, H, dtype=dt, device=dev) for _ in range(n_calls)]
    calls = [(lambda i=i: moe_pairs(*sets[i], out=outs[i], probe=bufs[i], config=dict(cfg), **lg(i)))
             for i in range(n_calls)]
    calls[0]()
    ref = ops.get("fused_moe", "eager")(*sets[0])
    err = ((outs[0].double() - ref.double()).norm() / ref.double().norm()).item()
    g = _graph(calls)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    per_call = [_stamps(bf) for bf in bufs]
    rows = []
    for i in range(1, n_calls):
        st, mid, en, tag = per_call[i]
        t0 = min(st)
        p1 = [j for j, x in enumerate(tag) if x % 2 == 0]
        p2 = [j for j, x in enumerate(tag) if x % 2 == 1]
        p1_end = [en[j] - t0 for j in p1]
        p2_ready = [mid[j] - t0 for j in p2]
        r = {"p1_start_spread": max(st[j] for j in p1) - t0, "p1_end_p50": _q(p1_end, 0.5), "p1_end_max": max(p1_end),
             "p2_start_p50": _q([st[j] - t0 for j in p2], 0.5), "p2_ready_p50": _q(p2_ready, 0.5),
             "p2_ready_max": max(p2_ready), "end": max(en) - t0,
             "p1_id_p50": _q([mid[j] - t0 for j in p1], 0.5),  # phase 1 knows its expert (routed or loaded)
             "p1_dur_p50": _q([en[j] - st[j] for j in p1], 0.5), "p2_dur_p50": _q([en[j] - st[j] for j in p2], 0.5)}
        if i + 1 < n_calls:
            r["gap_to_next"] = min(per_call[i + 1][0]) - (max(en))
        rows.append(r)
    summary = {k_: _med([r[k_] for r in rows if k_ in r]) for k_ in rows[0]}
    summary["clock_step_ns"] = _clock_step(per_call[1][0] + per_call[1][2])
    distinct = statistics.mean(int(torch.unique(s_[4]).numel()) for s_ in sets)
    plain = [(lambda x, w13, w2, tw, ids, o=outs[i], i=i:
              moe_pairs(x, w13, w2, tw, ids, out=o, config=dict(cfg), **lg(i))) for i in range(n_calls)]
    on = timing.measure(lambda i: calls[i](), [(i,) for i in range(n_calls)], mode="graph", samples=samples).median_us
    off = timing.measure(lambda i: plain[i](*sets[i]), [(i,) for i in range(n_calls)], mode="graph",
                         samples=samples).median_us
    case = f"moe_pairs {shape} T={T}" + (f" direct {direct}" if direct else "") + (" route-in" if route_in else "")
    return {"case": case, "config": cfg, "programs": n_prog,
            "floor_us": round(distinct * 3 * H * I * 2 / (gbps * 1e3), 2), "us_per_call_probe_on": round(on, 2),
            "us_per_call_probe_off": round(off, 2), "rel_err": err, "timeline_us": summary}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attention", default="1x1024,1x16384,1x65536,8x16384", help="BATCHxCONTEXT list, or ''")
    ap.add_argument("--moe", default="1", help="token counts for the pair kernel, or ''")
    ap.add_argument("--moe-shape", default="qwen3-30b-a3b", choices=sorted(MOE_SHAPES),
                    help="the pair kernel's shape: Qwen3-30B-A3B's, or the tp=4 shard's (E=256, I=128)")
    ap.add_argument("--moe-direct", default="0", help="the pair kernel's phase 2 without partials (DIRECT, T=1, no "
                    "shared expert) at these output blocks, comma-separated; 0 the default form")
    ap.add_argument("--moe-route-in", action="store_true", help="with --moe-direct: every program routes the token "
                    "from its logits (ROUTE_IN, as `moe_block` runs the shard at T=1)")
    ap.add_argument("--calls", type=int, default=8, help="calls per graph (≥ 3)")
    ap.add_argument("--samples", type=int, default=15)
    a = ap.parse_args()
    if a.calls < 3:
        ap.error("--calls must be at least 3")
    if a.moe_route_in and ("0" in a.moe_direct.split(",") or a.moe.split(",") != ["1"]):
        ap.error("--moe-route-in needs --moe 1 and --moe-direct without 0 (routing in the kernel is DIRECT's, at T=1)")
    if not torch.cuda.is_available():
        raise SystemExit("probe_timeline: needs a CUDA GPU (the probes read %globaltimer)")
    gbps = hardware.ceilings().read_gbps
    results = []
    for shape in [x for x in a.attention.split(",") if x]:
        b, s = (int(v) for v in shape.lower().split("x"))
        results.append(probe_attention(b, s, a.calls, gbps, a.samples))
        print(results[-1], flush=True)
    for t in [int(x) for x in a.moe.split(",") if x]:
        for d in [int(x) for x in a.moe_direct.split(",") if x]:
            results.append(probe_moe(t, a.calls, gbps, a.samples, a.moe_shape, d, a.moe_route_in))
            print(results[-1], flush=True)
    path = timing.save_result("probe-timeline", {"read_gbps": gbps, "calls": a.calls, "results": results})
    print("saved", path)
    for r in results:
        tl_ = r["timeline_us"]
        print(f"{r['case']:<34} floor {r['floor_us']:>6} µs  per call {r['us_per_call_probe_off']:>6} "
              f"(probed {r['us_per_call_probe_on']})  " + "  ".join(f"{k}={v}" for k, v in tl_.items()))


if __name__ == "__main__":
    main()
