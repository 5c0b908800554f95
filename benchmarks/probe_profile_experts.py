"""Why `moelab profile`'s experts unit (Qwen3-30B-A3B, T=1) times ~5 µs above `moelab bench moe`'s route + experts.

One process, one GPU, graph-replayed, the same shapes; each variant twice, interleaved:
  profile   the profile's unit as built: int64 ids (`Rand.ids`), sets_for_l2 rotation sets (until session 48 the
            launcher cast int64 ids to int32, a launch of its own before the kernel; now the kernel reads them);
  ids32     the same with int32 ids (what the engine's router hands the experts): a tie with "profile" expected;
  ids32x8   int32 ids over 8 rotation sets;
  block     route + experts from fresh logits over 8 sets (`moe_block`, as `bench moe` times it).

    python benchmarks/probe_profile_experts.py [--samples 15]
"""

from __future__ import annotations

import argparse

import torch

from moelab import timing
from moelab.kernels.moe import fused_moe, moe_block
from moelab.profile.impls import Rand


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=15)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("probe_profile_experts: needs a CUDA GPU (it times graph replays)")
    dev = torch.device("cuda")
    timing.prime_graphs(dev)
    E, H, I, k = 128, 2048, 768, 8
    r = Rand(dev, torch.bfloat16, seed=0)
    per_set = k * 3 * H * I * 2
    n_l2 = timing.sets_for_l2(per_set)

    def moe_sets(n: int, ids32: bool):
        out = []
        for _ in range(n):
            ids = r.ids(1, E, k)
            out.append((r.t(1, H), r.w(E, 2 * I, H), r.w(E, H, I), torch.softmax(r.t(1, k, dtype=torch.float32), -1),
                        ids.to(torch.int32) if ids32 else ids))
        return out

    variants = {
        "profile": (lambda x, w13, w2, w, ids: fused_moe(x, w13, w2, w, ids, None), lambda: moe_sets(n_l2, False)),
        "ids32": (lambda x, w13, w2, w, ids: fused_moe(x, w13, w2, w, ids, None), lambda: moe_sets(n_l2, True)),
        "ids32x8": (lambda x, w13, w2, w, ids: fused_moe(x, w13, w2, w, ids, None), lambda: moe_sets(8, True)),
        "block": (lambda x, lg, w13, w2: moe_block(x, lg, w13, w2, k)[0],
                  lambda: [(r.t(1, H), r.t(1, E), r.w(E, 2 * I, H), r.w(E, H, I)) for _ in range(8)]),
    }
    rows = {name: [] for name in variants}
    for _ in range(2):
        for name, (fn, make) in variants.items():
            sets = make()
            m = timing.measure(fn, sets, mode="graph", samples=a.samples)
            rows[name].append((m.median_us, m.q3_us - m.q1_us, len(sets)))
            del sets
            torch.cuda.empty_cache()
    print(f"{torch.cuda.get_device_name()}: Qwen3-30B-A3B T=1, graph-replayed, µs (median, IQR, sets), two passes")
    for name, v in rows.items():
        print(f"  {name:8s} " + "   ".join(f"{md:6.2f} ±{iqr:4.2f} ({n})" for md, iqr, n in v))


if __name__ == "__main__":
    main()
