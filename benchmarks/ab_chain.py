"""A/B of `MOELAB_*` switches on the end-to-end decode step, in one process on the same weights.

    python benchmarks/ab_chain.py [--batch 1] [--variants base,X=MOELAB_SOME_SWITCH,Y=MOELAB_A+MOELAB_B:2] [--rounds 3]

Each variant is a set of `MOELAB_*` environment switches read at launch time (so at graph capture): an experiment
adds one to a launcher for the A/B, and the switch goes once it is decided. (Session 6 decided the PDL chain of
`kernels.chain_pdl` this way: ab-chain-…T165231, …T170042, …T170247, …T170336.) The engine is built once;
for every round, every variant in turn sets its switches, re-captures the decode graph, and times 255 decode steps
(median of 3 runs, as `moelab decode` times them). The rounds interleave the variants, so a drift of the machine
shows in every variant alike. Reported per variant: the median over rounds of ms per token, its spread over the
rounds, the ratio to the first variant, and whether its greedy tokens equal the first variant's (they need not:
a switch that changes a reduction's order changes roundings).

A re-captured graph runs ~2 % slower than an engine's first capture (session 32, benchmarks/probe_round1.py; the cause
is not known). So the engine's first capture runs untimed before the rounds, and every timed run is a re-capture (until
session 32 the first variant's first round was the first capture, a fast outlier the median left out). The ratios
compare re-captures. (`moelab decode` captures once, but then times an eager prefill before the decode, which may
slow the graph the same way: session 33, benchmarks/probe_round1.py's "after a prefill".)
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
from pathlib import Path

import torch

from moelab import report, timing
from moelab.engine import build


@functools.cache
def _source_text() -> str:
    return "\n".join(p.read_text() for p in (Path(__file__).parents[1] / "src" / "moelab").rglob("*.py"))


def parse_variants(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """"base,W=MOELAB_A,WA=MOELAB_A+MOELAB_B:2" -> [("base", ()), ("W", ("MOELAB_A",)), ("WA", (...))]; a switch
    is set to 1, or to the value after its colon."""
    out = []
    for item in text.split(","):
        name, _, sw = item.partition("=")
        names = tuple(s for s in sw.split("+") if s)
        bad = [s for s in names if not s.startswith("MOELAB_")]
        if bad:
            raise SystemExit(f"switch {bad[0]!r} is not a MOELAB_* environment variable")
        unread = [s for s in names if s.partition(":")[0] not in _source_text()]
        if unread:  # a removed switch would time two identical runs
            raise SystemExit(f"switch {unread[0].partition(':')[0]} is read nowhere in src/moelab")
        out.append((name, names))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen3-30b-a3b")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variants", default="base")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    variants = parse_variants(args.variants)  # a mistyped switch is named before anything else
    if not torch.cuda.is_available():
        raise SystemExit("ab_chain needs a CUDA GPU")
    switches = sorted({s.partition(":")[0] for _, sw in variants for s in sw})
    eng = build(args.model, random=True, batch=args.batch, max_len=args.prompt_len + args.new_tokens + 8)
    prompt = torch.randint(0, eng.cfg.vocab, (args.batch, args.prompt_len), generator=torch.Generator().manual_seed(0))
    prompt = prompt.to(eng.device)
    steps = args.new_tokens - 1
    times: dict[str, list[float]] = {name: [] for name, _ in variants}
    tokens: dict[str, torch.Tensor] = {}

    def set_switches(sw: tuple[str, ...]) -> None:
        for s in switches:
            os.environ.pop(s, None)
        for s in sw:
            key, _, val = s.partition(":")
            os.environ[key] = val or "1"

    # The engine's first capture, untimed: it runs ~2 % faster than any re-capture (session 32, probe_round1.py), so
    # timed, it made the first variant's first round an outlier. Every timed run below is a re-capture.
    set_switches(variants[0][1])
    eng.generate(prompt, args.new_tokens)
    for _ in range(args.rounds):
        for name, sw in variants:
            set_switches(sw)
            eng._graph = None  # re-capture under this variant's switches
            toks = eng.generate(prompt, args.new_tokens)
            tokens.setdefault(name, toks)
            first = toks[:, 0].clone()

            def decode_run() -> None:
                eng.reseed()
                eng.decode(first, steps)

            t = timing.measure(decode_run, mode="host", warmup=1, samples=3)
            times[name].append(t.median_us / 1e3 / steps)
    for s in switches:
        os.environ.pop(s, None)
    base = variants[0][0]
    base_ms = statistics.median(times[base])
    rows = []
    for name, sw in variants:
        ms = statistics.median(times[name])
        rows.append({"variant": name, "switches": "+".join(sw) or "-", "ms_per_token": ms,
                     "spread_pct": 100 * (max(times[name]) - min(times[name])) / ms,
                     "tokens_per_s": args.batch * 1e3 / ms, "vs_first": ms / base_ms,
                     "same_tokens": bool(torch.equal(tokens[name], tokens[base])), "rounds_ms": times[name]})
    report.table(rows, ["variant", "switches", "ms_per_token", "spread_pct", "tokens_per_s", "vs_first", "same_tokens"],
                 title=f"launch-chain A/B, {args.model}, batch {args.batch}, prompt {args.prompt_len}, "
                       f"{args.new_tokens} tokens, {args.rounds} rounds")
    if not args.no_save:
        path = timing.save_result("ab-chain", {"model": args.model, "batch": args.batch, "prompt_len": args.prompt_len,
                                               "new_tokens": args.new_tokens, "rounds": args.rounds, "rows": rows})
        print(f"saved {path}")


if __name__ == "__main__":
    with torch.inference_mode():
        main()
