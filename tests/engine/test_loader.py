"""The loader on every checkpoint layout it must read, and its one-line errors (nothing half-loaded)."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from moelab.engine import build, engine_config, load_checkpoint, resolve, tensor_shapes
from moelab.engine.weights import check_memory
from moelab.errors import UserError

from test_parity import REL_TOL, rel_err


def prefill_matches(model, folder, batch: int = 2, plen: int = 9) -> float:
    prompt = torch.randint(0, 128, (batch, plen), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        ref = model(prompt).logits
    eng = build(folder, batch=batch, max_len=plen, impl="eager", device="cpu")
    with torch.inference_mode():
        got = eng.model.prefill(prompt, eng.cache, all_logits=True)
    return rel_err(got, ref)


def test_fused_expert_layout(checkpoint, tmp_path):
    """transformers 5 keeps experts fused in memory (gate_up_proj [E,2I,H], down_proj [E,H,I]): a checkpoint
    written from its state_dict must load too."""
    model, folder = checkpoint("qwen3_moe")
    shutil.copy(folder / "config.json", tmp_path / "config.json")
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    assert "model.layers.0.mlp.experts.gate_up_proj" in sd  # the layout this test is about
    save_file(sd, str(tmp_path / "model.safetensors"))
    assert prefill_matches(model, tmp_path) <= REL_TOL


def test_sharded_checkpoint(checkpoint, tmp_path):
    model, _ = checkpoint("mixtral")
    model.save_pretrained(tmp_path, max_shard_size="100KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    assert len(list(tmp_path.glob("*.safetensors"))) > 1
    assert prefill_matches(model, tmp_path) <= REL_TOL


def test_tied_embeddings_and_dense_layers(checkpoint):
    """Qwen2-MoE with a dense MLP in layer 1 (mlp_only_layers) and lm_head tied to the embedding."""
    model, folder = checkpoint("qwen2_moe", mlp_only_layers=[1], tie_word_embeddings=True)
    spec, raw = resolve(folder)
    cfg = engine_config(spec, raw)
    assert cfg.dense_layers == (1,) and cfg.tie_embeddings
    assert "lm_head" not in tensor_shapes(cfg)
    assert prefill_matches(model, folder) <= REL_TOL


# ------------------------------------------------------------------------------------------ errors

def _copy(folder, dst):
    shutil.copytree(folder, dst)
    return dst


def test_missing_tensor_is_named(checkpoint, tmp_path):
    _, folder = checkpoint("olmoe")
    d = _copy(folder, tmp_path / "ck")
    sd = load_file(str(d / "model.safetensors"))
    del sd["model.layers.1.self_attn.k_norm.weight"]
    save_file(sd, str(d / "model.safetensors"))
    with pytest.raises(UserError, match=r"tensor model\.layers\.1\.self_attn\.k_norm\.weight is missing"):
        build(d, batch=1, max_len=8, device="cpu", impl="eager")


def test_misshaped_tensor_names_both_shapes(checkpoint, tmp_path):
    _, folder = checkpoint("qwen2_moe")
    d = _copy(folder, tmp_path / "ck")
    sd = load_file(str(d / "model.safetensors"))
    name = "model.layers.0.mlp.experts.5.up_proj.weight"
    sd[name] = torch.zeros(31, 64)
    save_file(sd, str(d / "model.safetensors"))
    with pytest.raises(UserError, match=rf"{name} has shape \[31, 64\], expected \[32, 64\]"):
        build(d, batch=1, max_len=8, device="cpu", impl="eager")


def test_qwen35_text_model_under_language_model(checkpoint, tmp_path):
    """A multimodal Qwen3.5 checkpoint (config qwen3_5_moe with a text_config) keeps the text model under
    model.language_model.: it loads the same, and a missing Gated DeltaNet tensor is named with that prefix (its conv
    weight is a Conv1d's [C, 1, K])."""
    model, folder = checkpoint("qwen3_5_moe_text")
    # The multimodal file's config: model_type qwen3_5_moe, the text model's fields under text_config.
    text = json.loads((folder / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_5_moe", "text_config": text,
                                                      "tie_word_embeddings": text.get("tie_word_embeddings", False)}))
    sd = {k.replace("model.", "model.language_model.", 1): v.contiguous() for k, v in model.state_dict().items()}
    assert sd["model.language_model.layers.0.linear_attn.conv1d.weight"].dim() == 3
    save_file(sd, str(tmp_path / "model.safetensors"))
    assert prefill_matches(model, tmp_path) <= REL_TOL
    del sd["model.language_model.layers.2.linear_attn.conv1d.weight"]
    save_file(sd, str(tmp_path / "model.safetensors"))
    with pytest.raises(UserError, match=r"model\.language_model\.layers\.2\.linear_attn\.conv1d\.weight is missing"):
        build(tmp_path, batch=1, max_len=8, device="cpu", impl="eager")


def test_qwen35_tensor_parallel_shapes_and_what_must_divide():
    """Qwen3.5-35B-A3B at tp=4 (the first worklog's shard): each rank holds 4 of the 16 key heads and 8 of the 32 value
    heads of every Gated DeltaNet layer; a tp that does not divide the linear heads is one line."""
    from moelab.engine.tp import local_config
    cfg = engine_config(*resolve("qwen3.5-35b-a3b"))
    assert cfg.layer_types.count("linear_attention") == 30 and cfg.attn_gate and cfg.offset_norm
    local = local_config(cfg, 4)
    assert (local.linear_key_heads, local.linear_value_heads, local.heads) == (4, 8, 4)
    assert local.conv_channels == cfg.conv_channels // 4
    with pytest.raises(UserError, match="--tp 32 does not divide linear_num_key_heads"):
        local_config(dataclasses.replace(cfg, heads=32), 32)


def test_unsupported_architecture(tmp_path):
    cfg = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 128}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UserError, match="model_type 'llama' is not supported by the decode engine"):
        build(tmp_path, random=True, batch=1, max_len=8, device="cpu")


def test_mla_preset_is_refused_before_allocating():
    with pytest.raises(UserError, match="deepseek_v2.*not supported by the decode engine"):
        build("deepseek-v2-lite", random=True, batch=1, max_len=8, device="cpu")


def test_no_weights_given(checkpoint):
    with pytest.raises(UserError, match="pass --weights DIR .* or --random"):
        build("qwen3-30b-a3b", batch=1, max_len=8, device="cpu")


def test_prompt_longer_than_cache_and_ids_outside_vocab(checkpoint):
    _, folder = checkpoint("mixtral")
    eng = build(folder, batch=1, max_len=10, impl="eager", device="cpu")
    with pytest.raises(UserError, match="prompt of 8 tokens \\+ 3 new tokens = 11 exceeds the cache's context of 10"):
        eng.generate(torch.zeros(1, 8, dtype=torch.long), 3)
    with pytest.raises(UserError, match=r"token id 128 is outside the vocabulary \[0, 128\)"):
        eng.generate(torch.tensor([[1, 2, 128]]), 2)
    with pytest.raises(UserError, match=r"token id -1 is outside"):
        eng.generate(torch.tensor([[-1, 2]]), 2)


def test_not_enough_gpu_memory_says_how_much(monkeypatch):
    """The check runs before any allocation; faked device numbers, so it runs without a GPU."""
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda dev=None: (10 * 1024 ** 3, 80 * 1024 ** 3))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda dev=None: "Fake GPU")
    with pytest.raises(UserError, match=r"not enough GPU memory: the weights and KV cache need 61\.\d\d GiB .*"
                                        r"10\.00 GiB of 80\.00 GiB is free on Fake GPU"):
        check_memory(60 * 1024 ** 3, torch.device("cuda"), "the weights and KV cache")
    check_memory(5 * 1024 ** 3, torch.device("cuda"), "the weights and KV cache")  # fits: no error
