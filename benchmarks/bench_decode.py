"""End-to-end decode, side by side in one process on one GPU, on the same random weights:

  hf-eager     transformers `generate` (dynamic cache, no compile)
  hf-compile   transformers `generate` with a static cache, which transformers 5 compiles (torch.compile)
  moelab-eager moelab's engine on the plain-torch reference ops (`--impl eager`, no CUDA graphs: the
               references sync the host, e.g. the MoE reference loops over the experts hit)
  moelab       moelab's engine on its Triton kernels, one CUDA graph per decode step

Weights: seeded random bf16 at the model's real shapes (`moelab.engine.random_weights`); the transformers
model is built on the meta device and its parameters are VIEWS of the engine's tensors (the engine keeps
transformers 5's fused expert layout, and q/k/v are row blocks of the fused qkv), so both read the very
same bytes and the GPU holds one copy (Qwen3-30B-A3B: 61 GB).

Per row: prefill ms, decode ms per token, tokens/s, effective bandwidth (bytes one decode step must read,
from `moelab.models.decode_step_ops` at the mean context, / time per step) and % of the roofline floor.
Transformers rows are timed as whole `generate` calls of N and of 1 new tokens: decode per token =
(t_N − t_1) / (N − 1), prefill = t_1. Correctness: transformers' and moelab's prefill logits are compared
(bf16: relative error ≤ 2e-2) and the greedy tokens' agreement is recorded.

    python benchmarks/bench_decode.py                      # Qwen3-30B-A3B, batch 1, prompt 128, 256 tokens
    python benchmarks/bench_decode.py --batch 1,8,32 --rows moelab,hf-compile
"""

from __future__ import annotations

import argparse
import time

import torch

from moelab import timing
from moelab.engine import Engine, Sampling, engine_config, random_weights, resolve
from moelab.engine.cache import KVCache
from moelab.engine.run import floor_for, measure_run
from moelab.engine.weights import plan

# moelab first: the rows that matter most are measured before the slow baselines (a run cut short by a time
# limit keeps what it measured: the record is rewritten after every row).
ROWS = ("moelab", "moelab-eager", "hf-compile", "hf-eager")
BF16_LOGIT_TOL = 2e-2  # the GPU criterion for bf16 logits


def hf_model_on(raw: dict, cfg, w: dict[str, torch.Tensor], device: torch.device):
    """A transformers model of `raw` whose parameters are views of the engine weights `w` (no copy)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    hf_cfg = AutoConfig.for_model(raw["model_type"], **{k: v for k, v in raw.items() if k != "model_type"})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_cfg, dtype=w["embed"].dtype)
    names = set(model.state_dict().keys())
    for key, parts in plan(cfg, names).items():
        for part in parts:
            if part.src:  # Qwen3-Next's key-head-grouped projection: the engine reorders its rows, so no view fits
                raise SystemExit(f"bench_decode: transformers' {part.name} cannot be a view of the engine's weights "
                                 f"({cfg.model_type} stores it grouped by key head); run --rows moelab,moelab-eager")
            view = w[key][part.dst]
            mod_name, _, pname = part.name.rpartition(".")
            mod = model.get_submodule(mod_name)
            old = getattr(mod, pname)
            if tuple(old.shape) != tuple(view.shape) and old.numel() == view.numel() and view.is_contiguous():
                view = view.view(old.shape)  # Qwen3.5's depthwise conv: [C, 1, K] there, [C, K] in the engine
            if tuple(old.shape) != tuple(view.shape):
                raise RuntimeError(f"{part.name}: transformers has {tuple(old.shape)}, engine view {tuple(view.shape)}")
            mod._parameters[pname] = torch.nn.Parameter(view, requires_grad=False)
    # Non-persistent buffers (the rotary inverse frequencies) were made on the meta device: remake them.
    # With the model's own (text) config: Qwen3.5's top-level config nests it (`text_config`).
    with torch.device(device):
        model.model.rotary_emb = type(model.model.rotary_emb)(config=model.model.config)
    left = [n for n, t in list(model.named_parameters()) + list(model.named_buffers()) if t.is_meta]
    if left:
        raise RuntimeError(f"transformers tensors not mapped to engine weights: {left[:5]}")
    return model.eval()


def hf_row(model, name: str, prompt: torch.Tensor, n: int, repeats: int) -> dict:
    static = name == "hf-compile"

    def gen(k: int):
        kw = dict(max_new_tokens=k, min_new_tokens=k, do_sample=False, pad_token_id=0)
        kw.update(cache_implementation="static") if static else kw.update(disable_compile=True)
        with torch.inference_mode():
            return model.generate(prompt, **kw)

    t0 = time.perf_counter()
    tokens = gen(n)[:, prompt.shape[1]:]  # also the first compile
    first_s = time.perf_counter() - t0
    m1 = timing.measure(lambda: gen(1), mode="host", warmup=1, samples=repeats)
    mn = timing.measure(lambda: gen(n), mode="host", warmup=1, samples=repeats)
    step_ms = (mn.median_us - m1.median_us) / 1e3 / (n - 1)
    return {"row": name, "new_tokens": n, "prefill_ms": m1.median_us / 1e3, "decode_ms_per_token": step_ms,
            "decode_spread_pct": mn.spread_pct, "tokens_per_s": prompt.shape[0] * 1e3 / step_ms,
            "first_call_s": first_s, "experts_implementation": getattr(model.config, "_experts_implementation", None),
            "tokens": tokens}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen3-30b-a3b")
    ap.add_argument("--batch", default="1", help="comma list, e.g. 1,8,32")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--hf-eager-new-tokens", type=int, default=64,
                    help="the eager rows (hf-eager, moelab-eager) are ~100 ms/token: their per-token time is taken "
                         "over fewer tokens")
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--gpu", default=None, help="ceilings for the floor: measured (default) or a GPU name")
    ap.add_argument("--hf-experts", default=None,
                    help="transformers experts_implementation (eager, grouped_mm, ...); default: its own default")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_decode needs a CUDA GPU")
    rows_asked = [r for r in args.rows.split(",") if r]
    bad = [r for r in rows_asked if r not in ROWS]
    if bad:
        raise SystemExit(f"unknown rows {bad}; known: {ROWS}")
    batches = [int(b) for b in args.batch.split(",")]

    dev, dt = torch.device("cuda"), torch.bfloat16
    spec, raw = resolve(args.model)
    cfg = engine_config(spec, raw)
    max_len = args.prompt_len + args.new_tokens
    w = random_weights(cfg, dt, dev, seed=args.seed,
                       reserve_bytes=KVCache.nbytes(cfg, max(batches), max_len, dt) * 2)
    hf = hf_model_on(raw, cfg, w, dev) if any(r.startswith("hf") for r in rows_asked) else None
    if hf is not None and args.hf_experts:
        hf.set_experts_implementation(args.hf_experts)

    results = []
    env = timing.env_record()  # one env (hence one file name) for every rewrite of the record

    def save(complete: bool) -> None:
        if not args.no_save:
            path = timing.save_result("bench-decode", {"env": env, "model": spec.name, "prompt_len": args.prompt_len,
                                                        "new_tokens": args.new_tokens, "seed": args.seed,
                                                        "complete": complete, "rows": results})
            print(f"saved {path}{'' if complete else ' (partial)'}", flush=True)

    for B in batches:
        prompt = torch.randint(0, cfg.vocab, (B, args.prompt_len), generator=torch.Generator().manual_seed(args.seed)).to(dev)
        fl = floor_for(spec, B, args.prompt_len + args.new_tokens // 2, 2, args.gpu)
        ref_tokens = hf_logits = None
        if hf is not None:
            with torch.inference_mode():
                hf_logits = hf(prompt, logits_to_keep=1).logits[:, -1].float()
        for name in rows_asked:
            torch.cuda.reset_peak_memory_stats()
            if name.startswith("hf"):
                n = args.hf_eager_new_tokens if name == "hf-eager" else args.new_tokens
                r = hf_row(hf, name, prompt, n, args.repeats)
                tokens = r.pop("tokens")
            else:
                eng = Engine(cfg, w, batch=B, max_len=max_len, impl="eager" if name == "moelab-eager" else "moelab",
                             sampling=Sampling(), use_graphs=name == "moelab")
                eng.spec = spec
                n = args.hf_eager_new_tokens if name == "moelab-eager" else args.new_tokens
                tokens, s = measure_run(eng, prompt, n, repeats=args.repeats, gpu=args.gpu)
                with torch.inference_mode():
                    logits = eng.prefill(prompt).float()
                r = {"row": name, "new_tokens": n, "graphs": s["graphs"],
                     "prefill_ms": s["prefill_ms"], "decode_ms_per_token": s["decode_ms_per_token"],
                     "decode_spread_pct": s["decode_spread_pct"], "tokens_per_s": s["tokens_per_s"],
                     "deterministic": s["deterministic"]}
                if hf_logits is not None:
                    err = ((logits - hf_logits).norm() / hf_logits.norm()).item()
                    r["prefill_logits_rel_err_vs_hf"] = err
                    r["logits_ok"] = err <= BF16_LOGIT_TOL
                del eng
            if ref_tokens is None:
                ref_tokens = tokens
            else:  # greedy bf16 paths drift apart after a while; how long they agree is worth seeing
                k = min(tokens.shape[1], ref_tokens.shape[1])
                same = (tokens[:, :k] == ref_tokens[:, :k]).all(0)
                r["tokens_agree_with_first_row"] = int(same.int().cumprod(0).sum())
            step_s = r["decode_ms_per_token"] / 1e3
            r.update(batch=B, prompt_len=args.prompt_len, bytes_per_step=fl["bytes_per_step"],
                     effective_gbps=fl["bytes_per_step"] / step_s / 1e9,
                     pct_of_floor=100 * fl["floor_ms_per_step"] / r["decode_ms_per_token"] if fl.get("floor_ms_per_step") else None,
                     floor_ms_per_step=fl.get("floor_ms_per_step"), ceilings=fl.get("ceilings"),
                     peak_gpu_mem_gib=torch.cuda.max_memory_allocated() / 1024 ** 3)
            results.append(r)
            print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}, flush=True)
            save(complete=False)
        by = {r["row"]: r for r in results if r["batch"] == B}
        if "moelab" in by:
            for base in ("hf-eager", "hf-compile", "moelab-eager"):
                if base in by:
                    by["moelab"][f"speedup_vs_{base}"] = by[base]["decode_ms_per_token"] / by["moelab"]["decode_ms_per_token"]

    from moelab import report

    report.table(results, ["batch", "row", "prefill_ms", "decode_ms_per_token", "tokens_per_s", "effective_gbps",
                           "pct_of_floor", "decode_spread_pct", "prefill_logits_rel_err_vs_hf"],
                 title=f"decode, {spec.name}, prompt {args.prompt_len}, {args.new_tokens} new tokens, random bf16")
    save(complete=True)


if __name__ == "__main__":
    main()
