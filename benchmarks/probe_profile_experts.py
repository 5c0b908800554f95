"""Why `moelab profile`'s experts unit (Qwen3-30B-A3B, T=1) times ~5 µs above `moelab bench moe`'s route + experts.

One process, one GPU, graph-replayed, the same shapes; each variant twice, interleaved:
  profile   the profile's own unit (`build_units`): int64 ids (`Rand.ids`), sets_for_l2 rotation sets (until session 48 the
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
from moelab.kernels.moe import moe_block
from moelab.models import decode_step_ops
from moelab.models.spec import load_spec
from moelab.profile.impls import Rand, build_units, dims


def experts_unit(device: torch.device):
    """`moelab profile qwen3-30b-a3b --batch 1 --ctx 1024`'s experts unit, built as the profile builds it."""
    spec = load_spec("qwen3-30b-a3b")
    graph = decode_step_ops(spec, batch=1, ctx=1024, tp=1, dtype="bf16")
    units = build_units(spec, graph, dims(spec, 1, 1024, 1), device, torch.bfloat16, ("eager", "moelab"))
    return next(u for u in units if u.name == "experts")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=15)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("probe_profile_experts: needs a CUDA GPU (it times graph replays)")
    dev = torch.device("cuda")
    timing.prime_graphs(dev)
    unit = experts_unit(dev)
    fn = unit.fns["moelab"]
    n_l2 = timing.sets_for_l2(unit.bytes_per_set)  # as the profile's runner rotates them

    def unit_sets(n: int, ids32: bool):
        sets = [unit.make_args(i) for i in range(n)]  # (x, w13, w2, weights, ids, shared)
        return [s[:4] + (s[4].to(torch.int32),) + s[5:] for s in sets] if ids32 else sets

    E, H, k = 128, 2048, 8
    r = Rand(dev, torch.bfloat16, seed=1)
    variants = {
        "profile": (fn, lambda: unit_sets(n_l2, False)),
        "ids32": (fn, lambda: unit_sets(n_l2, True)),
        "ids32x8": (fn, lambda: unit_sets(8, True)),
        "block": (lambda x, lg, w13, w2: moe_block(x, lg, w13, w2, k)[0],
                  lambda: [(r.t(1, H), r.t(1, E)) + unit.make_args(i)[1:3] for i in range(8)]),
    }
    rows = {name: [] for name in variants}
    for _ in range(2):
        for name, (f, make) in variants.items():
            sets = make()
            m = timing.measure(f, sets, mode="graph", samples=a.samples)
            rows[name].append((m.median_us, m.q3_us - m.q1_us, len(sets)))
            del sets
            torch.cuda.empty_cache()
    print(f"{torch.cuda.get_device_name()}: Qwen3-30B-A3B T=1, graph-replayed, µs (median, IQR, sets), two passes")
    for name, v in rows.items():
        print(f"  {name:8s} " + "   ".join(f"{md:6.2f} ±{iqr:4.2f} ({n})" for md, iqr, n in v))


if __name__ == "__main__":
    main()
