"""Tensor-parallel decode on the CPU: gloo, 2 and 4 processes, tiny models of each family.

The sharded engine must give the unsharded engine's logits (fp32: relative error <= 1e-5) for a whole
prompt and for every greedy decode step, and the same greedy tokens, with and without the overlapped
(two half-batch) decode. Plus the loader's slice reads and the sharding rules' errors, in-process.
"""

from __future__ import annotations

import pytest
import torch

from moelab.engine import build, engine_config, resolve
from moelab.engine.tp import launch, load_shard, local_config, shard_specs, shard_tensor
from moelab.engine.weights import Checkpoint, load_checkpoint
from moelab.errors import UserError

REL_TOL = 1e-5
PROMPT_LEN, STEPS, BATCH = 5, 6, 3  # batch 3: the overlapped decode splits it unevenly (1 + 2)
# (family, HF config overrides): every family, and a Qwen3-MoE with a dense MLP layer
CASES = [("qwen3_moe", {}), ("qwen2_moe", {}), ("olmoe", {}), ("mixtral", {}),
         ("qwen3_moe", {"mlp_only_layers": [1]})]


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def _prompt() -> torch.Tensor:
    return torch.randint(0, 128, (BATCH, PROMPT_LEN), generator=torch.Generator().manual_seed(5))


@torch.inference_mode()
def _run(eng) -> dict:
    prompt = _prompt()
    logits = eng.model.prefill(prompt, eng.cache, all_logits=True)
    tokens = eng.generate(prompt, STEPS + 1)
    return {"prompt_logits": logits, "step_logits": torch.stack(eng.step_logits), "tokens": tokens}


def _rank_worker(folders: list[str], out_dir: str) -> None:
    """One rank: every case with and without overlap; each rank saves what it computed."""
    import os

    from moelab.engine.comm import Comm
    from moelab.engine.tp import build_tp, init_distributed

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = init_distributed(rank, world, rank, device="cpu")
    comm = Comm(device=dev)
    results = {}
    for i, folder in enumerate(folders):
        for overlap in (False, True):
            eng = build_tp(folder, comm=comm, batch=BATCH, max_len=PROMPT_LEN + STEPS + 1, impl="eager",
                           keep_logits=True, overlap=overlap)
            results[(i, overlap)] = _run(eng)
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
        for overlap in (False, True):
            what = f"{family}{over or ''} tp={tp} overlap={overlap}"
            got = ranks[0][(i, overlap)]
            e = rel_err(got["prompt_logits"], ref["prompt_logits"])
            assert e <= REL_TOL, f"{what}: prompt logits rel err {e:.2e}"
            e = max(rel_err(g, r) for g, r in zip(got["step_logits"], ref["step_logits"]))
            assert e <= REL_TOL, f"{what}: decode logits rel err {e:.2e}"
            assert torch.equal(got["tokens"], ref["tokens"]), what
            for r in range(1, tp):  # every rank decoded the same tokens
                assert torch.equal(ranks[r][(i, overlap)]["tokens"], got["tokens"]), f"{what}: rank {r}"
    assert "CUDA" in ranks[0]["oneshot"]
    # the all-reduces really ran (2 per layer per step at least), and the logits were gathered
    assert ranks[0]["calls"]["nccl"] > 0 and ranks[0]["calls"]["all_gather"] > 0


def test_load_shard_reads_only_slices(checkpoint, monkeypatch):
    """Each rank's shard equals the slice of the fully loaded tensor, and no whole tensor is read."""
    _, folder = checkpoint("qwen2_moe")
    cfg = engine_config(*resolve(folder))
    full = load_checkpoint(cfg, folder, torch.float32, torch.device("cpu"))
    full.setdefault("lm_head", full["embed"])
    monkeypatch.setattr(Checkpoint, "read", lambda self, name: pytest.fail(f"whole tensor {name} read"))
    tp = 4
    for rank in range(tp):
        got = load_shard(cfg, folder, torch.float32, torch.device("cpu"), tp, rank)
        specs = shard_specs(cfg, tp, rank)
        for key, t in full.items():
            want = shard_tensor(key, t, specs[key], rank)
            if want is None:
                assert key not in got
                continue
            assert torch.equal(got[key], want), f"rank {rank}: {key}"
    # the shards of w13 tile the full tensor: gate and up halves of each rank, in order
    I = cfg.moe_intermediate // tp
    w13 = full["layers.0.w13"]
    parts = [load_shard(cfg, folder, torch.float32, torch.device("cpu"), tp, r)["layers.0.w13"] for r in range(tp)]
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
