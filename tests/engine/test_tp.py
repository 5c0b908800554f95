"""Tensor-parallel decode on the CPU: gloo, 2 and 4 processes, tiny models of each family.

The sharded engine must give the unsharded engine's logits (fp32: relative error <= 1e-5) for a whole
prompt and for every greedy decode step, and the same greedy tokens: experts sharded along their width,
with and without the overlapped (two half-batch) decode, and whole experts per rank (expert parallel).
Plus, in-process, the loader's slice reads and the sharding rules' errors; and the CLI's own launcher.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys

import pytest
import torch
from safetensors.torch import save_file

from moelab.engine import build, engine_config, resolve
from moelab.engine.tp import launch, load_shard, local_config, shard_specs, shard_tensor
from moelab.engine.weights import Checkpoint, load_checkpoint
from moelab.errors import UserError

REL_TOL = 1e-5
PROMPT_LEN, STEPS, BATCH = 5, 6, 3  # batch 3: the overlapped decode splits it unevenly (1 + 2)
# (family, HF config overrides): every family, and a Qwen2-MoE with a dense MLP layer, lm_head tied to the
# embedding and a vocabulary tp does not divide (the last rank's lm_head shard is padded)
CASES = [("qwen3_moe", {}), ("qwen2_moe", {}), ("olmoe", {}), ("mixtral", {}),
         ("qwen2_moe", {"mlp_only_layers": [1], "tie_word_embeddings": True, "vocab_size": 130}),
         # the hybrids: Gated DeltaNet heads split by key head (4, each serving two value heads), gated attention;
         # Qwen3-Next's grouped input projection read slice by slice
         ("qwen3_5_moe_text", {"linear_num_key_heads": 4, "linear_num_value_heads": 8}),
         ("qwen3_next", {"linear_num_key_heads": 4, "linear_num_value_heads": 8})]
MODES = [(False, False), (True, False), (False, True)]  # (overlap, ep)


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def _prompt() -> torch.Tensor:
    return torch.randint(0, 128, (BATCH, PROMPT_LEN), generator=torch.Generator().manual_seed(5))


@torch.inference_mode()
def _run(eng) -> dict:
    prompt = _prompt().to(eng.device)
    logits = eng.model.prefill(prompt, eng.cache, all_logits=True)
    tokens = eng.generate(prompt, STEPS + 1)
    out = {"prompt_logits": logits, "step_logits": torch.stack(eng.step_logits), "tokens": tokens}
    return {k: v.cpu() for k, v in out.items()}


def _rank_worker(folders: list[str], out_dir: str) -> None:
    """One rank: every case in every MODE; each rank saves what it computed."""
    import os

    from moelab.engine.comm import Comm
    from moelab.engine.tp import build_tp, init_distributed

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = init_distributed(rank, world, rank, device="cpu")
    comm = Comm(device=dev)
    results = {}
    for i, folder in enumerate(folders):
        for overlap, ep in MODES:
            eng = build_tp(folder, comm=comm, batch=BATCH, max_len=PROMPT_LEN + STEPS + 1, impl="eager",
                           keep_logits=True, overlap=overlap, ep=ep)
            results[(i, overlap, ep)] = _run(eng)
    try:  # the one-shot path must refuse the CPU with a clear message
        Comm(device=dev, oneshot_max_bytes=4096)
        results["oneshot"] = None
    except UserError as e:
        results["oneshot"] = str(e)
    results["calls"] = dict(comm.calls)
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))


@pytest.fixture(scope="module")
def references(checkpoint):
    """The unsharded engine's results per case, and the checkpoint folders."""
    folders, refs = [], []
    for family, over in CASES:
        _, folder = checkpoint(family, **over)
        eng = build(folder, batch=BATCH, max_len=PROMPT_LEN + STEPS + 1, impl="eager", device="cpu",
                    keep_logits=True)
        folders.append(str(folder))
        refs.append(_run(eng))
    return folders, refs


@pytest.mark.parametrize("tp", [2, 4])
def test_sharded_forward_matches_unsharded(references, tmp_path, tp):
    folders, refs = references
    launch(tp, _rank_worker, folders, str(tmp_path))
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(tp)]
    for i, ((family, over), ref) in enumerate(zip(CASES, refs)):
        assert len(set(ref["tokens"].flatten().tolist())) > 3  # the token check can fail
        for overlap, ep in MODES:
            what = f"{family}{over or ''} tp={tp} overlap={overlap} ep={ep}"
            got = ranks[0][(i, overlap, ep)]
            e = rel_err(got["prompt_logits"], ref["prompt_logits"])
            assert e <= REL_TOL, f"{what}: prompt logits rel err {e:.2e}"
            e = max(rel_err(g, r) for g, r in zip(got["step_logits"], ref["step_logits"]))
            assert e <= REL_TOL, f"{what}: decode logits rel err {e:.2e}"
            assert torch.equal(got["tokens"], ref["tokens"]), what
            for r in range(1, tp):  # every rank decoded the same tokens
                assert torch.equal(ranks[r][(i, overlap, ep)]["tokens"], got["tokens"]), f"{what}: rank {r}"
    assert "CUDA" in ranks[0]["oneshot"]
    # the all-reduces really ran (2 per layer per step at least), and the logits were gathered
    assert ranks[0]["calls"]["dist"] > 0 and ranks[0]["calls"]["all_gather"] > 0


def _layout(checkpoint, layout: str, tmp_path):
    if layout == "fused":  # transformers 5's in-memory expert layout, written as is
        model, folder = checkpoint("qwen3_moe")
        shutil.copy(folder / "config.json", tmp_path / "config.json")
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp_path / "model.safetensors"))
        return tmp_path
    if layout == "tied+dense":
        return checkpoint("qwen2_moe", mlp_only_layers=[1], tie_word_embeddings=True)[1]
    if layout == "qwen3_next":  # its key-head-grouped input projection: each rank's rows read as slices of it
        return checkpoint("qwen3_next", linear_num_key_heads=4, linear_num_value_heads=8)[1]
    return checkpoint("qwen2_moe")[1]  # the Hub's layout: one tensor per expert and projection


@pytest.mark.parametrize("layout, ep", [("hub", False), ("fused", False), ("tied+dense", False), ("hub", True),
                                        ("fused", True), ("qwen3_next", False)])
def test_load_shard_reads_only_slices(checkpoint, monkeypatch, tmp_path, layout, ep):
    """Each rank's shard equals the slice of the fully loaded tensor, and no whole tensor is read."""
    folder = _layout(checkpoint, layout, tmp_path)
    cfg = engine_config(*resolve(folder))
    full = load_checkpoint(cfg, folder, torch.float32, torch.device("cpu"))
    full.setdefault("lm_head", full["embed"])
    monkeypatch.setattr(Checkpoint, "read", lambda self, name: pytest.fail(f"whole tensor {name} read"))
    tp = 4
    shards = [load_shard(cfg, folder, torch.float32, torch.device("cpu"), tp, r, ep=ep) for r in range(tp)]
    for rank, got in enumerate(shards):
        specs = shard_specs(cfg, tp, rank, ep)
        for key, t in full.items():
            want = shard_tensor(key, t, specs[key], rank)
            if want is None:
                assert key not in got
                continue
            assert torch.equal(got[key], want), f"rank {rank}: {key}"
    # and the shards tile the full tensor: whole experts in order (ep), or each rank's gate and up rows
    w13 = full["layers.0.w13"]
    parts = [g["layers.0.w13"] for g in shards]
    if ep:
        assert torch.equal(torch.cat(parts, dim=0), w13)
    else:
        I = cfg.moe_intermediate // tp
        assert torch.equal(torch.cat([p[:, :I] for p in parts] + [p[:, I:] for p in parts], dim=1), w13)


def test_tp_must_divide_the_shapes(checkpoint):
    _, folder = checkpoint("qwen3_moe")
    cfg = engine_config(*resolve(folder))  # 4 heads, 2 KV heads, experts of width 32
    with pytest.raises(UserError, match="does not divide num_attention_heads"):
        local_config(cfg, 3)
    with pytest.raises(UserError, match="does not divide"):
        local_config(cfg, 8)
    lc = local_config(cfg, 4)  # fewer KV heads than ranks: one replicated KV head per rank
    assert (lc.heads, lc.kv_heads, lc.moe_intermediate) == (1, 1, 8)
    with pytest.raises(UserError, match="num_experts"):  # --ep: whole experts per rank
        local_config(dataclasses.replace(cfg, heads=6, kv_heads=6, experts=10, top_k=2), 3, ep=True)


def _decode_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "moelab", "decode", *args], capture_output=True, text=True,
                          timeout=240)


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.device_count() < 2,
                    reason="with a GPU present, --tp 2 puts one rank per GPU and this machine has one")
def test_cli_starts_the_ranks_itself(checkpoint):
    """`moelab decode --tp 2` (no torchrun) spawns two gloo ranks and prints rank 0's result: the tokens of
    --tp 1, as under torchrun; a bad --tp or a CPU one-shot request is one line on stderr, exit code 2."""
    _, folder = checkpoint("qwen2_moe")
    common = [str(folder), "--impl", "eager", "--batch", "2", "--prompt-len", "4", "--new-tokens", "5",
              "--repeats", "1", "--json"]
    one, two = _decode_cli(*common), _decode_cli(*common, "--tp", "2", "--overlap")
    assert one.returncode == 0 and two.returncode == 0, two.stderr
    a, b = json.loads(one.stdout), json.loads(two.stdout)  # rank 0 alone prints: one JSON document
    assert b["tokens"] == a["tokens"]
    assert b["summary"]["tp"] == 2 and b["summary"]["overlap"] is True
    # under torchrun (its launcher module, as `torchrun` runs it): the same tokens, ranks from the environment
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "moelab",
                        "decode", *common, "--tp", "2"], capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["tokens"] == a["tokens"]
    for extra, msg in [(["--tp", "3"], "--tp 3 does not divide"),
                       (["--tp", "2", "--oneshot-max-bytes", "4096"], "needs CUDA GPUs")]:
        p = _decode_cli(*common, *extra)
        assert p.returncode == 2, (extra, p.stderr)
        assert p.stderr.count("\n") == 1 and msg in p.stderr and "Traceback" not in p.stderr, p.stderr


# ---------------------------------------------------------------- on 2 GPUs (skipped elsewhere)

GPU_MODES = {"dist": ({}, False), "dist+overlap": ({}, True), "oneshot": ({"oneshot_max_bytes": 1 << 20}, False)}


def _gpu_worker(folder: str, out_dir: str) -> None:
    import os

    from moelab.engine.comm import Comm
    from moelab.engine.tp import build_tp, init_distributed

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = init_distributed(rank, world, rank)
    results = {}
    for name, (kw, overlap) in GPU_MODES.items():
        comm = Comm(device=dev, **kw)
        x = torch.full((2, 64), float(rank + 1), dtype=torch.bfloat16, device=dev)
        results[name + ":sum"] = comm.all_reduce(x).float().cpu()  # every element world·(world+1)/2
        eng = build_tp(folder, comm=comm, batch=BATCH, max_len=PROMPT_LEN + STEPS + 1, impl="moelab",
                       dtype="bf16", keep_logits=True, overlap=overlap)
        results[name] = _run(eng)  # decode in CUDA graphs: the collectives are captured too
        results[name + ":calls"] = dict(comm.calls)
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="tensor parallel on GPUs needs 2 CUDA GPUs")
def test_two_gpus_nccl_oneshot_overlap(checkpoint, tmp_path):
    """bf16 on 2 GPUs, moelab kernels and CUDA graphs: NCCL, NCCL + overlap and the one-shot path all sum
    exactly, and give the unsharded engine's prompt logits within 2e-2 (the bf16 parity tolerance) and its
    first greedy tokens."""
    _, folder = checkpoint("qwen3_moe")
    launch(2, _gpu_worker, str(folder), str(tmp_path))
    got = torch.load(tmp_path / "rank0.pt")
    ref = _run(build(folder, batch=BATCH, max_len=PROMPT_LEN + STEPS + 1, impl="moelab", dtype="bf16",
                     device="cuda", keep_logits=True))
    for name in GPU_MODES:
        assert torch.equal(got[name + ":sum"], torch.full((2, 64), 3.0)), name
        e = rel_err(got[name]["prompt_logits"], ref["prompt_logits"])
        assert e <= 2e-2, f"{name}: prompt logits rel err {e:.2e}"
        agree = int((got[name]["tokens"] == ref["tokens"]).all(0).int().cumprod(0).sum())
        assert agree >= 2, f"{name}: the first decoded tokens differ from the unsharded engine's"
    assert got["oneshot:calls"]["oneshot"] > 0 and got["dist:calls"]["oneshot"] == 0
