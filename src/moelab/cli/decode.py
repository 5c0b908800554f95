"""`moelab decode`: run a MoE model end to end — prefill, then decode — and measure it against the floor."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from moelab.cli import app
from moelab.errors import UserError


def _read_prompt_ids(path: Path) -> list[list[int]]:
    """Token ids from a file: a JSON list (one prompt) or list of lists, or whitespace-separated ids,
    one prompt per line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read prompt ids ({e.__class__.__name__})") from None
    try:
        obj = json.loads(text)
        rows = obj if obj and isinstance(obj[0], list) else [obj]
    except (json.JSONDecodeError, TypeError, IndexError, KeyError):
        rows = [line.split() for line in text.splitlines() if line.strip()]
    try:
        ids = [[int(t) for t in row] for row in rows]
    except (TypeError, ValueError):
        raise UserError(f"{path}: prompt ids must be integers (JSON list, or whitespace-separated)") from None
    if not ids or any(len(r) == 0 for r in ids):
        raise UserError(f"{path}: an empty prompt")
    if len({len(r) for r in ids}) > 1:
        raise UserError(f"{path}: prompts of a batch must have the same length, got {sorted({len(r) for r in ids})}")
    return ids


def _tokenizer(folder: Path | None):
    if folder is None or not (folder / "tokenizer.json").is_file():
        return None
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(folder / "tokenizer.json"))


@app.command()
def decode(
    model: str = typer.Argument(..., help="A checkpoint folder, a config.json, or a preset name (see `moelab models`)."),
    weights: Path | None = typer.Option(None, "--weights", help="Safetensors checkpoint folder (HF layout)."),
    random: bool = typer.Option(False, "--random", help="Seeded random weights at the model's real shapes."),
    batch: int = typer.Option(1, "--batch", help="Sequences decoded together."),
    prompt_len: int = typer.Option(128, "--prompt-len", help="Length of a seeded random prompt."),
    prompt_ids: Path | None = typer.Option(None, "--prompt-ids", help="File of prompt token ids (JSON or text)."),
    prompt: str | None = typer.Option(None, "--prompt", help="Text prompt (needs tokenizer.json in the folder)."),
    new_tokens: int = typer.Option(256, "--new-tokens", help="Tokens to generate per sequence (no EOS stop)."),
    impl: str = typer.Option("moelab", "--impl", help="moelab (kernels) or eager (plain-torch references)."),
    no_graphs: bool = typer.Option(False, "--no-graphs", help="Launch each decode step from Python "
                                   "(always so with --impl eager, whose reference ops sync the host)."),
    temperature: float = typer.Option(0.0, "--temperature", help="0 = greedy; else softmax temperature."),
    top_p: float = typer.Option(1.0, "--top-p", help="Nucleus sampling mass (with --temperature)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random prompt, random weights and sampling."),
    dtype: str | None = typer.Option(None, "--dtype", help="bf16, fp16 or fp32 (default: the checkpoint's; bf16 for --random)."),
    repeats: int = typer.Option(3, "--repeats", help="Timed repetitions of prefill and of the decode loop."),
    gpu: str | None = typer.Option(None, "--gpu", help="Ceilings for the floor: 'measured' (default on a GPU) or a GPU name."),
    as_json: bool = typer.Option(False, "--json", help="Print the tokens and the summary as JSON."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel ranks, one GPU each (torch.distributed: NCCL; gloo "
                           "on the CPU). Under torchrun pass its --nproc-per-node; without it, moelab starts "
                           "the N processes itself."),
    overlap: bool = typer.Option(False, "--overlap/--no-overlap", help="With --tp: decode the batch as two "
                                 "halves in alternation so one half's all-reduce runs while the other computes "
                                 "(batch >= 2; no effect at batch 1)."),
    ep: bool = typer.Option(False, "--ep", help="With --tp: whole routed experts per rank (expert parallel) "
                            "instead of every expert split along its width."),
    oneshot_max_bytes: int = typer.Option(0, "--oneshot-max-bytes", help="With --tp on GPUs: all-reduce "
                                          "messages up to this size go through the one-shot symmetric-memory "
                                          "path, larger ones through NCCL (0 = always NCCL, the default until "
                                          "the crossover is measured)."),
) -> None:
    """Prefill a prompt batch, decode NEW_TOKENS per sequence with a static KV cache (CUDA graphs, sampling on
    the device, no host sync in the loop), and report prefill ms, decode ms/token, tokens/s, effective
    bandwidth and percent of the roofline floor for this model, batch and context.

    Families: qwen3_moe, qwen2_moe, olmoe, mixtral, qwen3_next and qwen3_5_moe. `--impl eager` runs
    the same model on the plain-torch reference ops: the "before" of every comparison.

    Tensor parallel: `torchrun --nproc-per-node N -m moelab decode MODEL --tp N ...`, or `moelab decode MODEL
    --tp N ...` (starts N processes). Attention by heads, experts and MLPs along their width, lm_head by
    vocabulary; one all-reduce after attention and one after the MoE block per layer. Rank 0 prints.
    """
    import torch

    from moelab.engine import Sampling, build, engine_config, resolve
    from moelab.engine.run import measure_run

    if impl not in ("moelab", "eager"):
        raise UserError(f"--impl must be moelab or eager, not {impl!r}")
    if sum(x is not None for x in (prompt_ids, prompt)) > 1:
        raise UserError("pass at most one of --prompt-ids and --prompt")
    if batch < 1:
        raise UserError(f"--batch must be at least 1, got {batch}")
    if new_tokens < 1:
        raise UserError(f"--new-tokens must be at least 1, got {new_tokens}")
    if repeats < 1:
        raise UserError(f"--repeats must be at least 1, got {repeats}")
    if tp < 1:
        raise UserError(f"--tp must be at least 1, got {tp}")
    if ep and tp == 1:
        raise UserError("--ep places experts on several ranks: it needs --tp 2 or more")
    if oneshot_max_bytes < 0:
        raise UserError(f"--oneshot-max-bytes must be >= 0, got {oneshot_max_bytes}")
    if weights is not None and not weights.expanduser().is_dir():  # before the context and prompt checks
        raise UserError(f"--weights {weights}: no such folder")
    sampling = Sampling(temperature, top_p, seed)
    mp = Path(model).expanduser()
    folder = weights or (mp if mp.is_dir() else mp.parent if mp.is_file() else None)
    tok = _tokenizer(folder)
    if prompt is not None:
        if tok is None:
            raise UserError("--prompt needs a tokenizer.json in the checkpoint folder; use --prompt-ids instead")
        rows = [tok.encode(prompt).ids]
        if not rows[0]:
            raise UserError("--prompt encodes to no tokens")
    elif prompt_ids is not None:
        rows = _read_prompt_ids(prompt_ids)
    else:
        if prompt_len < 1:
            raise UserError(f"--prompt-len must be at least 1, got {prompt_len}")
        rows = None
    if rows is not None and len(rows) not in (1, batch):
        raise UserError(f"{len(rows)} prompts given for --batch {batch}")
    P = prompt_len if rows is None else len(rows[0])
    cfg = engine_config(*resolve(model))
    if rows is None:  # ids drawn from the whole vocabulary, seeded
        ids = torch.randint(0, cfg.vocab, (batch, P), generator=torch.Generator().manual_seed(seed))
    else:
        ids = torch.tensor(rows * (batch if len(rows) == 1 else 1), dtype=torch.long)
        bad = ids[(ids < 0) | (ids >= cfg.vocab)]
        if bad.numel():  # before any weight is read
            raise UserError(f"token id {int(bad[0])} is outside the vocabulary [0, {cfg.vocab})")
    opts = dict(model=model, weights=weights, random=random, dtype=dtype, batch=batch, max_len=P + new_tokens,
                impl=impl, sampling=sampling, use_graphs=not no_graphs, seed=seed, ids=ids, new_tokens=new_tokens,
                repeats=repeats, gpu=gpu, as_json=as_json, folder=folder)
    from moelab.engine.comm import env_world

    world = env_world()
    if world is not None and world[1] > 1:  # started by torchrun: this process is one rank
        if tp != world[1]:
            raise UserError(f"--tp {tp}, but torchrun started {world[1]} processes: pass --tp {world[1]}")
        _tp_rank(opts, overlap, oneshot_max_bytes, ep)
        return
    if tp > 1:
        from moelab.engine.tp import launch, local_config

        local_config(cfg, tp, ep)  # tp must divide the heads and widths: say so before starting anything
        launch(tp, _tp_rank, opts, overlap, oneshot_max_bytes, ep)
        return
    eng = build(model, weights=weights, random=random, dtype=dtype, batch=batch, max_len=P + new_tokens,
                impl=impl, sampling=sampling, use_graphs=not no_graphs, seed=seed)
    tokens, summary = measure_run(eng, ids.to(eng.device), new_tokens, repeats=repeats, gpu=gpu)
    _print(tokens, summary, tok, as_json)


def _tp_rank(opts: dict, overlap: bool, oneshot_max_bytes: int, ep: bool = False) -> None:
    """One tensor-parallel rank of `moelab decode` (torchrun's environment variables name it)."""
    from moelab.engine.comm import Comm, env_world
    from moelab.engine.run import measure_run
    from moelab.engine.tp import build_tp, group_scope, init_distributed

    rank, world, local_rank = env_world()
    o = dict(opts)
    dev = init_distributed(rank, world, local_rank)  # cuda:LOCAL_RANK when there are GPUs, else the CPU
    with group_scope():
        comm = Comm(device=dev, oneshot_max_bytes=oneshot_max_bytes)
        ids, new_tokens, repeats, gpu, as_json, folder = (o.pop(k) for k in
                                                          ("ids", "new_tokens", "repeats", "gpu", "as_json", "folder"))
        model = o.pop("model")
        eng = build_tp(model, comm=comm, overlap=overlap, ep=ep, **o)
        tokens, summary = measure_run(eng, ids.to(dev), new_tokens, repeats=repeats, gpu=gpu)
        if rank == 0:
            _print(tokens, summary, _tokenizer(folder), as_json)


def _print(tokens, summary: dict, tok, as_json: bool) -> None:
    from moelab import report

    out_tokens = tokens.cpu().tolist()
    texts = [tok.decode(t) for t in out_tokens] if tok is not None else None
    if as_json:
        report.emit_json({"summary": summary, "tokens": out_tokens, "text": texts})
        return
    for b, row in enumerate(texts or out_tokens):
        report.console.print(f"[bold]seq {b}[/]: {row if texts else ' '.join(map(str, row))}")
    rows_out = [{"metric": k, "value": v} for k, v in summary.items()]
    report.table(rows_out, ["metric", "value"], title=f"moelab decode: {summary['model']}",
                 caption=summary.get("floor_note") or None)
