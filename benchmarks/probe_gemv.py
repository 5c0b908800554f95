"""How fast can a Triton GEMV stream a T=1 MoE layer's gate/up bytes? Three load forms over the same weights.

    python benchmarks/probe_gemv.py [--rows 12288[,18432,...]] [--hidden 2048] [--samples 15] [--quick]

y[r] = W[r, :] · x for W [rows, H] bf16 (default 12,288 × 2,048 = 50 MB: Qwen3-30B-A3B's 8 routed experts' gate and
up rows at T=1), graph-replayed, L2 defeated by rotating weight copies, side by side in one process:
  * ptr      — a program per BLOCK rows, H in chunks through registers (the pair kernel's phase-1 form);
  * tma      — the same programs, weight chunks by tensor descriptor through a pipelined ring in shared memory (the
               form session 13 measured slower inside the pair kernel: 27.2 against 25.3 µs at T=1);
  * tma-persist — NP programs (a few per SM), each walking its rows in one flattened (row block, chunk) loop, so the
               pipeliner keeps chunks in flight across row blocks and no program start or ramp is paid per block;
  * torch.mv — cuBLAS;
  * stream_read — the read-ceiling kernel of `moelab hw` (no GEMV work) over the same bytes.
Printed: µs, spread, % of the measured read bandwidth. The question it answers: is a program's start and ramp (the
pair kernel launches ~1,300 short programs at T=1) what holds T=1 at ~65 % of the floor, or the load form?
"""

from __future__ import annotations

import argparse
import json
import os

import torch
import triton
import triton.language as tl

from moelab import hardware, timing


@triton.jit
def _ptr_kernel(w_ptr, x_ptr, y_ptr, H, BLOCK: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for k0 in range(0, H, BLOCK_K):
        offs = k0 + tl.arange(0, BLOCK_K)
        w = tl.load(w_ptr + rows[:, None].to(tl.int64) * H + offs[None, :], eviction_policy="evict_first")
        acc += tl.sum(w.to(tl.float32) * tl.load(x_ptr + offs).to(tl.float32)[None, :], axis=1)
    tl.store(y_ptr + rows, acc)


@triton.jit
def _tma_kernel(w_desc, x_ptr, y_ptr, H, BLOCK: tl.constexpr, BLOCK_K: tl.constexpr, STAGES: tl.constexpr):
    row0 = tl.program_id(0) * BLOCK
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for k0 in tl.range(0, H, BLOCK_K, num_stages=STAGES):
        offs = k0 + tl.arange(0, BLOCK_K)
        w = w_desc.load([row0, k0])
        acc += tl.sum(w.to(tl.float32) * tl.load(x_ptr + offs).to(tl.float32)[None, :], axis=1)
    tl.store(y_ptr + row0 + tl.arange(0, BLOCK), acc)


@triton.jit
def _tma_persist_kernel(w_desc, x_ptr, y_ptr, H, N_BLK, NP, BLOCK: tl.constexpr, BLOCK_K: tl.constexpr,
                        NCH: tl.constexpr, STAGES: tl.constexpr):
    p = tl.program_id(0)
    mine = tl.cdiv(N_BLK - p, NP)  # row blocks p, p + NP, p + 2·NP, ...
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for it in tl.range(0, mine * NCH, num_stages=STAGES):
        c = it % NCH
        row0 = (p + (it // NCH) * NP) * BLOCK
        offs = c * BLOCK_K + tl.arange(0, BLOCK_K)
        w = w_desc.load([row0, c * BLOCK_K])
        part = tl.sum(w.to(tl.float32) * tl.load(x_ptr + offs).to(tl.float32)[None, :], axis=1)
        acc = tl.where(c == 0, part, acc + part)
        # A masked store, not an `if`: a branch in the loop body stops Triton 3.6 from pipelining it.
        tl.store(y_ptr + row0 + tl.arange(0, BLOCK), acc, mask=(tl.arange(0, BLOCK) < BLOCK) & (c == NCH - 1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="12288", help="comma-separated: one table per size")
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="only the best form of each kind (session 13's BI) and cuBLAS")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("probe_gemv needs a CUDA GPU")
    sizes = [int(r) for r in a.rows.split(",")]
    if any(r % 64 for r in sizes) or a.hidden % 1024:
        raise SystemExit("probe_gemv: --rows must be multiples of 64 and --hidden of 1024 (the tiles are unmasked)")
    ceil = hardware.ceilings()
    results = [probe(r, a.hidden, a.samples, a.quick, ceil) for r in sizes]
    if os.environ.get("MOELAB_RESULTS_DIR"):
        path = timing.save_result("probe-gemv", dict(sizes=results, H=a.hidden, read_gbps=ceil.read_gbps))
        print("saved", path)


def probe(R: int, H: int, samples: int, quick: bool, ceil) -> dict:
    from triton.tools.tensor_descriptor import TensorDescriptor

    nbytes = R * H * 2
    sets = [((torch.randn(R, H, device="cuda") * H ** -0.5).bfloat16(), torch.randn(H, device="cuda").bfloat16())
            for _ in range(timing.sets_for_l2(nbytes))]
    floor = nbytes / (ceil.read_gbps * 1e3)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    y = torch.empty(R, device="cuda")
    from moelab.kernels.stream import stream_read
    # The kernel the read ceiling itself is measured with (`moelab hw`: a persistent grid-stride sum of a large
    # buffer), over these bytes: what one kernel streaming this much can reach, with no GEMV work at all.
    fns = {"torch.mv": lambda w, x: torch.mv(w, x), "stream_read": lambda w, x: stream_read(w)}
    for blk, bk in ((8, 1024),) if quick else ((16, 1024), (8, 1024), (16, 512)):
        fns[f"ptr {blk}x{bk}"] = lambda w, x, blk=blk, bk=bk: _ptr_kernel[(R // blk,)](w, x, y, H, BLOCK=blk, BLOCK_K=bk,
                                                                                         num_warps=4)
    for blk, bk, st, nw in ((32, 256, 3, 4),) if quick else ((16, 256, 4, 4), (8, 256, 4, 2), (32, 256, 3, 4),
                                                              (16, 128, 6, 4)):
        def f(w, x, blk=blk, bk=bk, st=st, nw=nw):
            d = TensorDescriptor.from_tensor(w, [blk, bk])
            _tma_kernel[(R // blk,)](d, x, y, H, BLOCK=blk, BLOCK_K=bk, STAGES=st, num_warps=nw)
        fns[f"tma {blk}x{bk} s{st} w{nw}"] = f
    persist = [(16, 256, 4, 4, 2), (16, 256, 6, 4, 2), (16, 256, 4, 4, 4), (32, 256, 4, 4, 2), (8, 256, 8, 2, 4),
               (16, 128, 8, 4, 4), (32, 128, 6, 4, 2), (64, 128, 4, 4, 1)]
    for blk, bk, st, nw, per_sm in persist[:1] if quick else persist:
        def f(w, x, blk=blk, bk=bk, st=st, nw=nw, per_sm=per_sm):
            d = TensorDescriptor.from_tensor(w, [blk, bk])
            n_blk = R // blk
            npg = min(n_blk, per_sm * sms)
            _tma_persist_kernel[(npg,)](d, x, y, H, n_blk, npg, BLOCK=blk, BLOCK_K=bk, NCH=H // bk, STAGES=st,
                                        num_warps=nw)
        fns[f"tma-persist {blk}x{bk} s{st} w{nw} {per_sm}/SM"] = f
    want = sets[0][0].float() @ sets[0][1].float()
    rows = []
    for name, f in fns.items():
        y.fill_(float("nan"))  # a form that writes nothing cannot inherit the last one's answer
        out = f(*sets[0])
        got = out.float() if name == "torch.mv" else y
        err = 0.0 if name == "stream_read" else float((got - want).norm() / want.norm())
        if not err < 1e-2:  # nan too
            raise SystemExit(f"probe_gemv: {name} is wrong (relative error {err:.2e}): not timed")
        m = timing.measure(f, sets, samples=samples)
        rows.append(dict(form=name, us=m.median_us, iqr_us=m.iqr_us, pct_read=100 * floor / m.median_us, err=err))
    rows.sort(key=lambda r: r["us"])
    print(f"GEMV stream {R} x {H} bf16 = {nbytes / 1e6:.1f} MB, floor {floor:.2f} us at {ceil.read_gbps:.0f} GB/s")
    for r in rows:
        print(f"  {r['us']:8.2f} us ±{r['iqr_us']:.2f}  {r['pct_read']:5.1f} %  err {r['err']:.1e}  {r['form']}")
    return dict(rows=rows, R=R, MB=nbytes / 1e6, floor_us=floor)


if __name__ == "__main__":
    main()
