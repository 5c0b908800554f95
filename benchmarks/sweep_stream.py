"""Sweep the streaming-read kernel's launch parameters on this GPU: block × num_warps × programs per SM.

    python benchmarks/sweep_stream.py [--gib 4] [--samples 15] [--top 20] [--json]

Every configuration reads the same random buffer (default 4 GiB, many times the L2) once per call, timed by
`moelab.timing.measure` in CUDA-graph replay; GB/s = buffer bytes / median time. Block sizes are kept where
each thread holds 8-64 int32 words per iteration (2-16 sixteen-byte loads in flight per thread). Before
timing, each (block, num_warps) is checked against `stream_read_reference` on a 64 MiB slice, so a config
that skips bytes cannot win. torch's reductions, a cuBLAS GEMV and dst.copy_(src) are timed alongside as
baselines. Results are saved with `timing.save_result("sweep-stream", ...)`; the winner belongs in
`moelab.hardware.READ_CONFIGS` (and `stream_read_config`), with this run's file named beside it.
About a minute on an H200 (~100 timed configurations, 13 compilations).
"""

from __future__ import annotations

import argparse
import itertools

import torch

from moelab import hardware, report, timing
from moelab.kernels.stream import stream_read, stream_read_reference

BLOCKS = [2048, 4096, 8192, 16384, 32768]
WARPS = [2, 4, 8, 16]
PER_SM = [1, 2, 3, 4, 6, 8, 12, 16]


def warp_size(props) -> int:
    ws, _ = hardware._warp_size(props)
    if ws is None:
        raise SystemExit("warp size unknown on this device: cannot size the blocks")
    return ws


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, default=4.0, help="buffer size in GiB (default 4)")
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--top", type=int, default=20, help="rows of the table (all rows go to the JSON)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("sweep_stream: needs a CUDA GPU")

    dev = torch.device("cuda", torch.cuda.current_device())
    props = torch.cuda.get_device_properties(dev)
    sms, ws = props.multi_processor_count, warp_size(props)
    nbytes = int(args.gib * 2**30) // 2**26 * 2**26
    buf = torch.randn(nbytes // 2, dtype=torch.bfloat16, device=dev)
    piece = buf[: 2**25]
    row = hardware.match_device(props.name)
    datasheet = row.read_gbps if row else None

    def entry(how: str, m: timing.Measurement, amount: float, **cfg) -> dict:
        gbps = amount / m.median_us / 1e3
        return {"how": how, **cfg, "gbps": gbps, "pct_datasheet": 100 * gbps / datasheet if datasheet else None,
                "median_us": m.median_us, "spread_pct": m.spread_pct, "measurement": m.to_dict()}

    rows: list[dict] = []
    for block, warps in itertools.product(BLOCKS, WARPS):
        per_thread = block // (warps * ws)
        if not 8 <= per_thread <= 64:
            continue
        got = stream_read(piece, block=block, num_warps=warps, grid=2 * sms)
        if not torch.equal(got.cpu(), stream_read_reference(piece, block=block, grid=2 * sms).cpu()):
            raise SystemExit(f"stream_read(block={block}, num_warps={warps}) returned wrong sums")
        for per_sm in PER_SM:
            grid = per_sm * sms
            out = torch.empty(grid, dtype=torch.int32, device=dev)
            m = timing.measure(lambda x, o, b=block, w=warps, g=grid: stream_read(x, block=b, num_warps=w, grid=g, out=o),
                               [(buf, out)], samples=args.samples)
            rows.append(entry("triton", m, nbytes, block=block, num_warps=warps, words_per_thread=per_thread,
                              per_sm=per_sm, grid=grid))
        best = max(r["gbps"] for r in rows if (r["block"], r["num_warps"]) == (block, warps))
        if not args.json:
            print(f"block {block:>5}, {warps:>2} warps: best {best:,.0f} GB/s", flush=True)

    k = 8192
    mat, vec = buf.view(-1, k), torch.randn(1, k, dtype=torch.bfloat16, device=dev)
    base = [
        ("torch.sum bf16", lambda x: torch.sum(x, dtype=torch.float32), (buf,), nbytes),
        ("torch.sum int32", lambda x: x.view(torch.int32).sum(), (buf,), nbytes),
        ("cuBLAS GEMV", lambda v, w: torch.matmul(v, w.t()), (vec, mat), nbytes),
    ]
    for how, fn, a, amount in base:
        rows.append(entry(how, timing.measure(fn, [a], samples=args.samples), amount))
    del mat, vec, buf, piece
    torch.cuda.empty_cache()
    src = torch.randint(0, 256, (2**30,), dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    rows.append(entry("copy (r+w)",
                      timing.measure(lambda d, s: d.copy_(s), [(dst, src)], samples=args.samples), 2 * src.numel()))

    rows.sort(key=lambda r: -r["gbps"])
    best_t = next(r for r in rows if r["how"] == "triton")
    payload = {"buffer_bytes": nbytes, "sms": sms, "warp_size": ws, "datasheet_read_gbps": datasheet,
               "best_triton": {k: best_t[k] for k in ("block", "num_warps", "per_sm", "grid", "gbps")},
               "probe_configs": hardware.READ_CONFIGS, "rows": rows}
    path = timing.save_result("sweep-stream", payload)
    if args.json:
        report.emit_json({**payload, "saved": str(path)})
        return
    cols = ["how", "block", "num_warps", "words_per_thread", "per_sm", "grid", "gbps", "pct_datasheet", "spread_pct"]
    report.table(rows[: args.top], cols, title=f"Streaming read on {props.name}, {nbytes / 2**30:.2f} GiB buffer",
                 headers={"how": "impl", "num_warps": "warps", "words_per_thread": "w/thr",
                          "per_sm": "per SM", "gbps": "GB/s", "pct_datasheet": "% dsh", "spread_pct": "IQR %"},
                 caption=f"median of {args.samples} graph replays; torch.sum bf16 = torch.sum(x, dtype=float32), "
                         f"GEMV = torch.matmul([1,{k}], [{k},N]), copy = dst.copy_(src) of 1 GiB with bytes read + "
                         f"written; saved {path}")
    cfg = (best_t["block"], best_t["num_warps"], best_t["per_sm"])
    where = "already in" if cfg in hardware.READ_CONFIGS else "NOT in"
    print(f"best Triton: block {cfg[0]}, {cfg[1]} warps, {cfg[2]} programs/SM: {best_t['gbps']:,.0f} GB/s "
          f"({where} hardware.READ_CONFIGS)")


if __name__ == "__main__":
    main()
