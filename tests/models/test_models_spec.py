"""ModelSpec parsing: every preset, the family quirks, and one clear error per kind of bad file."""

from __future__ import annotations

import json
import shutil

import pytest

from moelab.errors import UserError
from moelab.models import ModelSpec, list_presets, load_spec
from moelab.models.spec import PRESET_DIR

REQUIRED_PRESETS = ["qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-next-80b-a3b", "qwen3.5-35b-a3b", "mixtral-8x7b",
                    "olmoe-1b-7b", "deepseek-v2-lite", "deepseek-v3", "gpt-oss-20b", "gpt-oss-120b"]


def test_every_required_preset_ships():
    assert set(REQUIRED_PRESETS) <= set(list_presets())


@pytest.mark.parametrize("name", list_presets())
def test_preset_parses_and_is_consistent(name):
    s = load_spec(name)
    assert s.name == name and s.source == f"preset {name}"
    assert len(s.layer_types) == len(s.moe_layers) == s.layers
    assert s.heads % s.kv_heads == 0
    if s.is_moe:
        assert 0 < s.top_k <= s.num_experts and s.expert_intermediate > 0


def test_preset_names_are_case_insensitive():
    assert load_spec("Qwen3-30B-A3B") == load_spec("qwen3-30b-a3b")


def test_qwen3_30b_fields():
    s = load_spec("qwen3-30b-a3b")
    assert (s.hidden, s.layers, s.heads, s.kv_heads, s.head_dim, s.vocab) == (2048, 48, 32, 4, 128, 151936)
    assert (s.num_experts, s.top_k, s.expert_intermediate) == (128, 8, 768)
    assert s.qk_norm == "head" and s.norm_topk_prob and not s.tie_word_embeddings
    assert all(s.moe_layers) and s.rope_theta == 1e6 and s.rms_eps == 1e-6


def test_hybrid_layers_every_fourth_is_full_attention():
    for name, layers in (("qwen3-next-80b-a3b", 48), ("qwen3.5-35b-a3b", 40)):
        s = load_spec(name)
        assert s.layers == layers
        assert [i for i, t in enumerate(s.layer_types) if t == "full_attention"] == list(range(3, layers, 4))
        assert s.layer_count("linear_attention") == layers * 3 // 4
        assert s.attn_output_gate and s.shared_gate and s.shared_intermediate == 512
        assert (s.linear_key_heads, s.linear_value_heads, s.linear_conv_kernel) == (16, 32, 4)
        assert s.partial_rotary_factor == 0.25 and s.rotary_dim == 64


def test_qwen3_5_reads_text_config_and_falls_back_to_interval(tmp_path):
    raw = json.loads((PRESET_DIR / "qwen3.5-35b-a3b.json").read_text())
    del raw["text_config"]["layer_types"]
    raw["text_config"]["full_attention_interval"] = 2
    p = tmp_path / "config.json"
    p.write_text(json.dumps(raw))
    s = load_spec(p)
    assert s.layer_types[:4] == ("linear_attention", "full_attention", "linear_attention", "full_attention")
    assert s.vocab == 248320 and s.num_experts == 256


def test_deepseek_mla_and_grouped_routing():
    v3 = load_spec("deepseek-v3")
    assert v3.attention == "mla" and v3.q_lora_rank == 1536 and v3.kv_lora_rank == 512
    assert (v3.qk_nope_head_dim, v3.qk_rope_head_dim, v3.v_head_dim) == (128, 64, 128)
    assert v3.scoring == "sigmoid" and (v3.n_group, v3.topk_group) == (8, 4) and v3.routed_scaling_factor == 2.5
    assert v3.moe_layers[:4] == (False, False, False, True) and sum(v3.moe_layers) == 58
    assert v3.shared_intermediate == 2048 and v3.router_bias and v3.mtp_layers == 1
    lite = load_spec("deepseek-v2-lite")
    assert lite.q_lora_rank is None and lite.scoring == "softmax" and not lite.router_bias
    assert lite.moe_layers[0] is False and sum(lite.moe_layers) == 26 and lite.shared_intermediate == 2 * 1408


def test_gpt_oss_sliding_alternates_and_has_biases_and_sinks():
    s = load_spec("gpt-oss-20b")
    assert s.layer_types[:2] == ("sliding_attention", "full_attention") and s.sliding_window == 128
    assert s.attn_sinks and s.attn_bias and s.expert_bias and s.router_bias and s.activation == "swiglu_clamped"
    assert (s.num_experts, s.top_k, s.head_dim) == (32, 4, 64)
    assert load_spec("gpt-oss-120b").num_experts == 128


def test_dense_models_have_no_moe_layers():
    for name in ("llama-3.1-8b", "qwen3-8b"):
        s = load_spec(name)
        assert not s.is_moe and not any(s.moe_layers) and s.dense_intermediate > 0


def test_load_from_file_and_from_checkpoint_folder(tmp_path):
    shutil.copy(PRESET_DIR / "mixtral-8x7b.json", tmp_path / "config.json")
    by_dir, by_file = load_spec(tmp_path), load_spec(tmp_path / "config.json")
    assert by_dir.num_experts == by_file.num_experts == 8 and by_dir.source.endswith("config.json")
    assert by_dir.name == tmp_path.name


def _write(tmp_path, text: str):
    p = tmp_path / "config.json"
    p.write_text(text)
    return p


def _one_line_error(path_or_name, *fragments):
    with pytest.raises(UserError) as e:
        load_spec(path_or_name)
    msg = str(e.value)
    assert "\n" not in msg
    for f in fragments:
        assert f in msg, msg
    return msg


def test_error_missing_field_names_file_and_field(tmp_path):
    raw = json.loads((PRESET_DIR / "qwen3-30b-a3b.json").read_text())
    del raw["moe_intermediate_size"]
    p = _write(tmp_path, json.dumps(raw))
    _one_line_error(p, str(p), "moe_intermediate_size", "missing")


def test_error_missing_field_inside_text_config(tmp_path):
    raw = json.loads((PRESET_DIR / "qwen3.5-35b-a3b.json").read_text())
    del raw["text_config"]["linear_num_value_heads"]
    p = _write(tmp_path, json.dumps(raw))
    _one_line_error(p, str(p), "text_config.linear_num_value_heads")


def test_error_unknown_model_type(tmp_path):
    p = _write(tmp_path, json.dumps({"model_type": "bert", "hidden_size": 8}))
    _one_line_error(p, str(p), "model_type", "'bert'")


def test_error_missing_model_type(tmp_path):
    p = _write(tmp_path, json.dumps({"hidden_size": 8}))
    _one_line_error(p, str(p), "model_type")


def test_error_not_json(tmp_path):
    p = _write(tmp_path, "{ this is not json")
    _one_line_error(p, str(p), "not valid JSON", "line 1")


def test_error_json_not_an_object(tmp_path):
    p = _write(tmp_path, "[1, 2, 3]")
    _one_line_error(p, str(p), "JSON object")


def test_error_wrong_type(tmp_path):
    raw = json.loads((PRESET_DIR / "qwen3-30b-a3b.json").read_text())
    raw["num_experts"] = "many"
    p = _write(tmp_path, json.dumps(raw))
    _one_line_error(p, "num_experts", "integer")


def test_error_inconsistent_values(tmp_path):
    raw = json.loads((PRESET_DIR / "qwen3-30b-a3b.json").read_text())
    raw["num_experts_per_tok"] = 200
    p = _write(tmp_path, json.dumps(raw))
    _one_line_error(p, str(p), "num_experts_per_tok")


def test_error_folder_without_config(tmp_path):
    _one_line_error(tmp_path, "config.json")


def test_error_unknown_name_lists_presets():
    _one_line_error("no-such-model", "no-such-model", "qwen3-30b-a3b")


def test_spec_validates_on_construction():
    with pytest.raises(UserError, match="layer_types"):
        ModelSpec(name="x", model_type="llama", hidden=8, layers=2, heads=2, kv_heads=2, head_dim=4, vocab=10,
                  layer_types=("full_attention",), moe_layers=(False, False), dense_intermediate=16)


def test_expert_count_under_the_transformers_5_key(tmp_path):
    """transformers 5 saves Qwen3-MoE's `num_experts` as `num_local_experts`: both mean the same model."""
    cfg = json.loads((PRESET_DIR / "qwen3-30b-a3b.json").read_text())
    cfg["num_local_experts"] = cfg.pop("num_experts")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    spec = load_spec(str(tmp_path))
    assert spec.num_experts == 128 and spec.top_k == 8 and spec.expert_intermediate == 768
