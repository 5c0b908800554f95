"""The decode loop: moelab's kernels against transformers, device-side sampling, random weights, the CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch

from moelab import ops
from moelab.engine import Sampling, build, engine_config, random_weights, resolve
from moelab.engine.generate import sample
from moelab.engine.model import Model
from moelab.engine.cache import KVCache
from moelab.errors import UserError
from moelab.kernels import pdl_supported
from moelab.kernels.linear import DOT_MIN_T

from test_parity import REL_TOL, hf_greedy, rel_err

NEEDED_OPS = ("add_rmsnorm", "rmsnorm", "qk_norm_rope", "rope", "decode_attention", "route", "fused_moe")


def _count_launches(monkeypatch, module, name: str, key: str = "T") -> list:
    """Wrap module.name (a Triton kernel) so each launch appends its `key` argument (None if it has none) to the
    returned list: the switches must have reached the kernel they name."""
    real, calls = getattr(module, name), []

    class Counting:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                calls.append(kwargs.get(key))
                return real[grid](*args, **kwargs)
            return launch

    monkeypatch.setattr(module, name, Counting())
    return calls


# The A/B switches: the tensor-core linear from T=1 (so also at these decode steps of 1-2 rows), and the
# post-attention norm inside the router's launch (`MoE.with_norm`).
SWITCHES = {"MOELAB_LINEAR_DOT_MIN_T": "1", "MOELAB_NORM_ROUTER_MAX_T": "8"}


@pytest.mark.parametrize("family,batch,switches", [("qwen3_moe", 2, False), ("qwen2_moe", 2, False),
                                                   ("qwen3_moe", 1, False), ("qwen3_moe", 2, True),
                                                   ("qwen3_moe", 1, True), ("qwen3_5_moe_text", 1, False),
                                                   ("qwen3_5_moe_text", 2, False), ("qwen3_next", 1, False)])
def test_moelab_kernels_match_transformers(checkpoint, family, batch, switches, monkeypatch):
    """impl="moelab": the Triton kernels (interpreted on CPU) in the whole model. Kept tiny: 6 decode steps.
    qwen3_moe: per-head q/k norm; qwen2_moe: shared expert, RoPE only; batch 1: the engine's T=1 expert kernel;
    both batches: the one-launch router (up to fused_router_max_t rows); switches: the tensor-core linear from T=1
    (SWITCHES), counted to have run at the decode steps' T, and the norm in the router's launch up to 8 rows rather
    than 1 (counted: which router calls got the norm). Every case: greedy_emit ends each decode step, and the experts
    never check the router's ids on the host (a sync)."""
    for name, value in SWITCHES.items():
        if switches:
            monkeypatch.setenv(name, value)
        else:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("MOELAB_FUSED_ROUTER_MAX_T", raising=False)
    from moelab.kernels import linear as linear_mod, router as router_mod, sample as sample_mod
    dot_launches = _count_launches(monkeypatch, linear_mod, "_linear_dot_kernel")
    routers = _count_launches(monkeypatch, router_mod, "_router_kernel", key="T_PAD")  # rows, padded to 2ⁿ
    normed = _count_launches(monkeypatch, router_mod, "_router_kernel", key="NORM")
    emits = _count_launches(monkeypatch, sample_mod, "_greedy_emit_kernel")
    import moelab.kernels.moe as moe_mod
    checks, check = [], moe_mod.check_moe_args  # the ids' host check: never on ids the engine's own router made
    monkeypatch.setattr(moe_mod, "check_moe_args", lambda *a, **kw: (checks.append(kw["check_ids"]), check(*a, **kw))[1])
    known = ops.names()  # loads the op modules
    missing = [n for n in NEEDED_OPS if n not in known or ops.REGISTRY[n].kernel is None]
    if missing:
        pytest.skip(f"no moelab kernel yet for {missing}")
    model, folder = checkpoint(family)
    steps, prompt = 6, torch.randint(0, 128, (batch, 5), generator=torch.Generator().manual_seed(7))
    ref_prompt, ref_steps, ref_tokens = hf_greedy(model, prompt, steps)
    # On a GPU machine the kernels run compiled on CUDA; elsewhere under the interpreter on the CPU.
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    eng = build(folder, batch=batch, max_len=5 + steps + 1, impl="moelab", device=dev, keep_logits=True)
    with torch.inference_mode():
        assert rel_err(eng.model.prefill(prompt.to(dev), eng.cache, all_logits=True).cpu(), ref_prompt) <= REL_TOL
    tokens = eng.generate(prompt.to(dev), steps + 1).cpu()
    assert max(rel_err(g.cpu(), r) for g, r in zip(eng.step_logits, ref_steps)) <= REL_TOL
    assert torch.equal(tokens, ref_tokens)
    assert checks and not any(checks)  # no sync a layer for it in an eager prefill
    assert (batch in dot_launches) == switches  # decode: T = batch rows, below DOT_MIN_T unless switched
    assert any(t >= DOT_MIN_T for t in dot_launches)  # the prefill's 5-10 rows: from DOT_MIN_T on tensor cores
    if dev == "cpu":  # one per decode step after the first token; the one-launch router in every MoE layer of
        assert len(emits) == steps  # every decode step (and the prefill: 5 or 10 rows)
        assert len(routers) >= steps * sum(eng.cfg.is_moe(i) for i in range(eng.cfg.layers)) > 0
        assert [bool(n) for n in normed] == [t <= (8 if switches else 1) for t in routers]
    else:  # a CUDA graph's replays launch nothing the counter sees: only the warm-up and capture calls
        assert emits and routers


def test_conv_in_proj_rule(monkeypatch):
    """The conv in the input projection at one row by default (batch 8 lost on the H100); $MOELAB_GDN_CONV_IN_PROJ sets
    the most rows (0: never), never beyond DENSE_MAX_T."""
    from moelab.engine.model import DENSE_MAX_T, conv_in_proj
    monkeypatch.delenv("MOELAB_GDN_CONV_IN_PROJ", raising=False)
    assert conv_in_proj(1) and not conv_in_proj(2) and not conv_in_proj(8)
    monkeypatch.setenv("MOELAB_GDN_CONV_IN_PROJ", "0")
    assert not conv_in_proj(1)
    monkeypatch.setenv("MOELAB_GDN_CONV_IN_PROJ", "8")
    assert conv_in_proj(8) and not conv_in_proj(9)
    monkeypatch.setenv("MOELAB_GDN_CONV_IN_PROJ", str(10 * DENSE_MAX_T))
    assert not conv_in_proj(DENSE_MAX_T + 1)


@pytest.mark.parametrize("family,batch", [("qwen3_5_moe_text", 1), ("qwen3_next", 2)])
def test_gdn_conv_inside_the_input_projection(checkpoint, family, batch, monkeypatch):
    """At decode of up to GDN_CONV_IN_PROJ_MAX_T rows (1; $MOELAB_GDN_CONV_IN_PROJ, rows, for batch 2 here) the Gated
    DeltaNet's causal conv runs in its input projection's epilogue (`linear(conv=...)`), not as a launch of its own;
    the greedy tokens and logits stay transformers'. Counted: every decode step's linear-attention layers launch the
    GEMV with the conv, and the conv kernel runs only in the prefill."""
    if batch == 1:
        monkeypatch.delenv("MOELAB_GDN_CONV_IN_PROJ", raising=False)  # the default
    else:
        monkeypatch.setenv("MOELAB_GDN_CONV_IN_PROJ", str(batch))
    from moelab.kernels import gdn as gdn_mod, linear as linear_mod
    convs = _count_launches(monkeypatch, gdn_mod, "_gdn_conv_kernel")
    fused = _count_launches(monkeypatch, linear_mod, "_linear_kernel", key="CONV")
    model, folder = checkpoint(family)
    steps, prompt = 4, torch.randint(0, 128, (batch, 5), generator=torch.Generator().manual_seed(3))
    ref_prompt, ref_steps, ref_tokens = hf_greedy(model, prompt, steps)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    eng = build(folder, batch=batch, max_len=5 + steps + 1, impl="moelab", device=dev, keep_logits=True)
    tokens = eng.generate(prompt.to(dev), steps + 1).cpu()
    assert max(rel_err(g.cpu(), r) for g, r in zip(eng.step_logits, ref_steps)) <= REL_TOL
    assert torch.equal(tokens, ref_tokens)
    gdn_layers = eng.cfg.layers - eng.cfg.attention_layers
    if dev == "cpu":  # (a CUDA graph's replays launch nothing the counters see)
        assert len(convs) == gdn_layers  # the prefill's, once a layer; none at decode
        assert fused.count(True) == steps * gdn_layers > 0


@pytest.mark.parametrize("chain", [None, 16])
def test_batch_16_matches_transformers(checkpoint, chain, monkeypatch):
    """Batch 16 with impl="moelab": the census MoE kernel after dense + route, the tensor-core linear, attention at
    16 rows. chain=16 (a Hopper GPU only: the interpreter has no PDL) puts the whole step in the PDL chain to 16 rows
    (MOELAB_CHAIN_MAX_T), as session 19's batch-16 A/B ran it (ab-chain-…T191253: its bf16 tokens differed from the
    default's, the linear's whole-K split summing in another order); here in fp32, against transformers."""
    if chain and not (torch.cuda.is_available() and pdl_supported(torch.device("cuda"))):
        pytest.skip("the PDL chain runs on a Hopper GPU only")
    if chain:
        monkeypatch.setenv("MOELAB_CHAIN_MAX_T", str(chain))
    else:
        monkeypatch.delenv("MOELAB_CHAIN_MAX_T", raising=False)
    model, folder = checkpoint("qwen3_moe")
    steps, prompt = 4, torch.randint(0, 128, (16, 5), generator=torch.Generator().manual_seed(11))
    ref_prompt, ref_steps, ref_tokens = hf_greedy(model, prompt, steps)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    eng = build(folder, batch=16, max_len=5 + steps + 1, impl="moelab", device=dev, keep_logits=True)
    with torch.inference_mode():
        assert rel_err(eng.model.prefill(prompt.to(dev), eng.cache, all_logits=True).cpu(), ref_prompt) <= REL_TOL
    tokens = eng.generate(prompt.to(dev), steps + 1).cpu()
    assert max(rel_err(g.cpu(), r) for g, r in zip(eng.step_logits, ref_steps)) <= REL_TOL
    assert torch.equal(tokens, ref_tokens)


# ------------------------------------------------------------------------------------------ sampling

def test_greedy_and_tiny_top_p_are_argmax():
    logits = torch.randn(5, 50, generator=torch.Generator().manual_seed(0))
    assert torch.equal(sample(logits, Sampling(), None), logits.argmax(-1))
    g = torch.Generator().manual_seed(1)
    assert torch.equal(sample(logits, Sampling(temperature=1.0, top_p=1e-6), g), logits.argmax(-1))


def test_sampling_follows_the_distribution():
    """Frequencies of 40k draws match softmax(logits / T), and top-p keeps exactly the nucleus."""
    probs = torch.tensor([0.4, 0.3, 0.2, 0.1])
    logits = probs.log().expand(40000, 4).contiguous()
    g = torch.Generator().manual_seed(2)
    freq = torch.bincount(sample(logits, Sampling(temperature=1.0), g), minlength=4).float() / 40000
    assert (freq - probs).abs().max() < 0.01, freq
    # T=0.5 sharpens: p^2 normalised
    sharp = probs ** 2 / (probs ** 2).sum()
    freq = torch.bincount(sample(logits, Sampling(temperature=0.5), g), minlength=4).float() / 40000
    assert (freq - sharp).abs().max() < 0.01, freq
    # top_p=0.5: {0.4, 0.3} reach it; renormalised to 4/7, 3/7; the tail never drawn
    freq = torch.bincount(sample(logits, Sampling(temperature=1.0, top_p=0.5), g), minlength=4).float() / 40000
    assert freq[2:].sum() == 0 and abs(freq[0] - 4 / 7) < 0.01, freq


def test_bad_sampling_flags():
    with pytest.raises(UserError, match="--temperature"):
        Sampling(temperature=-1)
    with pytest.raises(UserError, match="--top-p"):
        Sampling(temperature=1, top_p=0)


def test_sampled_generation_is_seeded(checkpoint):
    _, folder = checkpoint("mixtral")
    prompt = torch.randint(0, 128, (2, 4), generator=torch.Generator().manual_seed(0))

    def run(seed):
        eng = build(folder, batch=2, max_len=16, impl="eager", device="cpu",
                    sampling=Sampling(temperature=1.0, top_p=0.9, seed=seed))
        return eng.generate(prompt, 12), eng.generate(prompt, 12)

    a1, a2 = run(1)
    b1, _ = run(2)
    assert torch.equal(a1, a2)  # same engine, same seed: same tokens
    assert not torch.equal(a1, b1)  # another seed draws other tokens (24 draws from ~100 likely tokens)


# ------------------------------------------------------------------------------------------ random weights

@pytest.mark.parametrize("family,layers", [("qwen3_moe", 48), ("qwen3_5_moe_text", 40)])
def test_random_weights_keep_activations_unit_size(checkpoint, family, layers):
    """Qwen3-30B-A3B's and Qwen3.5-35B-A3B's depths at tiny width: the residual stream's RMS stays O(1) in every
    layer (for Qwen3.5: (1 + w) norms drawn at w = 0, Gated DeltaNet's A and dt_bias as transformers draws them)."""
    _, folder = checkpoint(family, num_hidden_layers=layers)
    cfg = engine_config(*resolve(folder))
    w = random_weights(cfg, torch.bfloat16, torch.device("cpu"), seed=0)
    model = Model(cfg, w, impl="eager")
    rms = []
    inner = model.add_rmsnorm

    def recording(x, residual, weight, eps, **kw):
        out, res = inner(x, residual, weight, eps, **kw)
        rms.append(res.float().pow(2).mean().sqrt().item())
        return out, res

    model.add_rmsnorm = recording
    cache = KVCache(cfg, 1, 16, torch.bfloat16, torch.device("cpu"))
    with torch.inference_mode():
        logits = model.prefill(torch.arange(16).view(1, 16), cache, all_logits=True)
    assert len(rms) == 2 * layers + 1
    assert all(0.3 < r < 5.0 for r in rms), (min(rms), max(rms))
    assert torch.isfinite(logits).all() and 0.2 < logits.float().std().item() < 5.0


def test_moe_layers_hand_the_next_weight_to_the_experts(checkpoint):
    """moelab's MoE layers pass their experts' kernel the weight read right after them (a hint it may ask L2 for,
    `moe_pairs.pairs_next_pf_bytes`): the next layer's qkv after an attention layer's turn, its Gated DeltaNet input
    projection, and the LM head after the last layer; the eager model passes nothing."""
    _, folder = checkpoint("qwen3_5_moe_text", num_hidden_layers=5)
    cfg = engine_config(*resolve(folder))
    w = random_weights(cfg, torch.float32, torch.device("cpu"), seed=0)
    model = Model(cfg, w, impl="moelab")
    kinds = [type(m).__name__ for m, *_ in model.layers]
    assert "Attention" in kinds and "GatedDeltaNet" in kinds
    for i, (_, mlp, _, _) in enumerate(model.layers):
        got = mlp.moe_kw["prefetch"]
        if i + 1 == len(model.layers):
            assert got is model.lm_head
        else:
            nxt = model.layers[i + 1][0]
            assert got is (nxt.qkv if kinds[i + 1] == "Attention" else nxt.w_in), (i, kinds[i + 1])
    assert all(mlp.moe_kw == {} for _, mlp, _, _ in Model(cfg, w, impl="eager").layers)


# ------------------------------------------------------------------------------------------ the command

def _invoke(args):
    from typer.testing import CliRunner

    import moelab.cli as cli

    cli._load_commands()
    return CliRunner().invoke(cli.app, ["decode", *args])


def test_cli_json(checkpoint, tmp_path):
    model, folder = checkpoint("olmoe")
    r = _invoke([str(folder), "--impl", "eager", "--batch", "2", "--prompt-len", "5", "--new-tokens", "4",
                 "--repeats", "1", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert len(out["tokens"]) == 2 and all(len(t) == 4 for t in out["tokens"])
    s = out["summary"]
    assert s["batch"] == 2 and s["prompt_len"] == 5 and s["impl"] == "eager" and s["deterministic"]
    assert s["prefill_ms"] > 0 and s["decode_ms_per_token"] > 0 and s["tokens_per_s"] > 0
    assert s["floor_ms_per_step"] is None  # fp32 on a CPU: no floor, and the summary says why
    # the same prompt as ids from a file decodes the same way as transformers' greedy
    ids = [[3, 17, 99, 5, 64]]
    (tmp_path / "ids.json").write_text(json.dumps(ids))
    r = _invoke([str(folder), "--impl", "eager", "--prompt-ids", str(tmp_path / "ids.json"), "--new-tokens", "3",
                 "--repeats", "1", "--json"])
    assert r.exit_code == 0, r.output
    _, _, ref_tokens = hf_greedy(model, torch.tensor(ids), 2)
    assert json.loads(r.output)["tokens"] == ref_tokens.tolist()


def test_cli_text_prompt_with_tokenizer(checkpoint, tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    _, folder = checkpoint("mixtral")
    d = shutil.copytree(folder, tmp_path / "ck")
    vocab = {f"w{i}": i for i in range(127)} | {"[UNK]": 127}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(d / "tokenizer.json"))
    r = _invoke([str(d), "--impl", "eager", "--prompt", "w1 w2 w3", "--new-tokens", "3", "--repeats", "1", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["text"][0] == " ".join(f"w{t}" if t < 127 else "[UNK]" for t in out["tokens"][0])


def test_cli_user_errors_are_one_line(checkpoint, tmp_path):
    _, folder = checkpoint("mixtral")
    (tmp_path / "ids.txt").write_text("1 2 500\n")
    cases = [
        (["qwen3-30b-a3b"], "pass --weights DIR"),
        ([str(folder), "--weights", str(tmp_path / "missing"), "--prompt-len", "300"], "missing: no such folder"),
        ([str(folder), "--prompt-ids", str(tmp_path / "ids.txt")], "token id 500 is outside the vocabulary"),
        ([str(folder), "--prompt", "hello"], "--prompt needs a tokenizer.json"),
        ([str(folder), "--impl", "fast"], "--impl must be moelab or eager"),
        ([str(folder), "--batch", "0"], "--batch must be at least 1"),
        ([str(folder), "--prompt-len", "300", "--new-tokens", "10"], "max_position_embeddings 256"),
    ]
    if not torch.cuda.is_available():  # the interpreter has no bf16 tl.dot: said before any weight is made
        cases.append(([str(folder), "--dtype", "bf16"], "cannot run bf16"))
    for args, msg in cases:
        p = subprocess.run([sys.executable, "-m", "moelab", "decode", *args], capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.count("\n") == 1 and msg in p.stderr and "Traceback" not in p.stderr, p.stderr


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA GPU")
@pytest.mark.parametrize("family", ["qwen3_moe", "qwen3_5_moe_text"])  # the latter: states the warm-up must restore
def test_graph_replay_matches_eager_launches(checkpoint, family):
    _, folder = checkpoint(family)
    prompt = torch.randint(0, 128, (2, 7), generator=torch.Generator().manual_seed(3)).cuda()
    a = build(folder, batch=2, max_len=48, impl="moelab", device="cuda", use_graphs=False).generate(prompt, 33)
    eng = build(folder, batch=2, max_len=48, impl="moelab", device="cuda", use_graphs=True)
    b = eng.generate(prompt, 33)  # captures the graph
    assert torch.equal(a, b)
    # Replaying the captured loop must not synchronise with the host once.
    first = b[:, 0].clone()
    torch.cuda.set_sync_debug_mode("error")
    try:
        c = eng.decode(first, 32)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(c, b[:, 1:])


def test_hybrid_decode_runs_restart_from_the_prefill(checkpoint):
    """Qwen3.5's Gated DeltaNet states advance in place: a second decode run from the same prefill (as `moelab
    decode` times several) starts from the prefill's states again and gives the same tokens."""
    _, folder = checkpoint("qwen3_5_moe_text")
    eng = build(folder, batch=2, max_len=16, impl="eager", device="cpu")
    prompt = torch.randint(0, 128, (2, 5), generator=torch.Generator().manual_seed(4))
    tokens = eng.generate(prompt, 6)
    for _ in range(2):
        assert torch.equal(eng.decode(tokens[:, 0], 5), tokens[:, 1:])


@pytest.mark.parametrize("batch,qkv_switch", [(1, None), (1, "0"), (2, None)])
def test_early_release_only_where_the_next_kernel_reads_nothing_of_this_step(checkpoint, batch, qkv_switch,
                                                                             monkeypatch):
    """At decode of up to EARLY_RELEASE_MAX_T rows the engine asks the o projection and the Gated DeltaNet's input
    (with its conv) and output projections to release the next kernel as they start, and qkv too where the split's
    placement rule gives it stages (`early_release_stages`; the tiny model's head_dim 16 gets none, so the rule's answer
    is set to 5 here); then the split runs at those stages. Never the router or lm_head; above that many rows, none;
    with $MOELAB_QKV_EARLY_RELEASE=0, not qkv. Counted on the launcher calls (on the CPU `use_pdl` is off, so the
    kernel's EARLY stays off: `test_chain.py`)."""
    monkeypatch.delenv("MOELAB_EARLY_RELEASE_MAX_T", raising=False)
    if qkv_switch is None:
        monkeypatch.delenv("MOELAB_QKV_EARLY_RELEASE", raising=False)
    else:
        monkeypatch.setenv("MOELAB_QKV_EARLY_RELEASE", qkv_switch)
    from moelab.ops import attention as ops_attention
    from moelab.ops import linear as ops_linear
    real, calls = ops_linear._linear_kernel, []

    def spy(x, weight, bias=None, **kw):
        calls.append((x.shape[0], tuple(weight.shape), kw.get("conv") is not None, kw.get("release_early", False)))
        return real(x, weight, bias, **kw)

    monkeypatch.setattr(ops_linear, "_linear_kernel", spy)
    monkeypatch.setattr(ops_attention, "early_release_stages", lambda *shape: 5)
    model, folder = checkpoint("qwen3_5_moe_text")
    cfg = model.config
    dev = "cuda" if torch.cuda.is_available() else "cpu"  # (on the GPU the calls are counted as the graph is captured)
    eng = build(folder, batch=batch, max_len=8, impl="moelab", device=dev)
    from moelab.engine.model import Attention, GatedDeltaNet
    stages = []
    for m, *_ in eng.model.layers:
        if isinstance(m, Attention):
            attn = m.decode_attention_kv
            m.decode_attention_kv = lambda *a, _f=attn, **kw: (stages.append(kw.get("num_stages")), _f(*a, **kw))[1]
    eng.generate(torch.randint(0, 128, (batch, 3), generator=torch.Generator().manual_seed(5)).to(dev), 2)
    hidden = cfg.hidden_size
    o_like = {(hidden, cfg.num_attention_heads * cfg.head_dim),
              (hidden, cfg.linear_num_value_heads * cfg.linear_value_head_dim)}  # o, the GDN output projection
    qkv_shape = ((2 * cfg.num_attention_heads + 2 * cfg.num_key_value_heads) * cfg.head_dim, hidden)  # q ×2: the gate
    qkv_early = batch == 1 and qkv_switch is None
    decode = [c for c in calls if c[0] == batch]
    assert decode and any(c[1] == qkv_shape for c in decode)
    for rows, shape, conv, early in decode:
        want = batch == 1 and (conv or shape in o_like or (shape == qkv_shape and qkv_early))
        assert early == want, (rows, shape, conv, early)
    assert stages and all(s == (5 if qkv_early else None) for s in stages), stages
    gdn_mixers = [m for m, *_ in eng.model.layers if isinstance(m, GatedDeltaNet)]
    assert gdn_mixers and all(m.rec_kw == {"state_early": True} for m in gdn_mixers)  # the kernel side: test_chain.py
