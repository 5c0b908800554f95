"""The decode-step op graph: bytes checked against a hand computation, sharding, expert counting, errors."""

from __future__ import annotations

import pytest

from moelab.errors import UserError
from moelab.models import GROUPS, decode_step_ops, expected_distinct_experts, list_presets, load_spec
from moelab.models.graph import KINDS


def _by_name(ops):
    return {o.name: o for o in ops}


def _step(ops, attr):
    return sum(getattr(o, attr) * o.count for o in ops)


# ---- Qwen3-30B-A3B, B=1, S=1024: the numbers written out by hand -------------------------------------
# hidden 2048, 48 layers, 32 q / 4 kv heads x 128, 128 experts top-8, expert width 768, vocab 151,936.

def test_qwen3_30b_tp1_bytes_by_hand():
    ops = decode_step_ops(load_spec("qwen3-30b-a3b"), batch=1, ctx=1024, tp=1, dtype="bf16")
    per_layer = (
        2048 * (32 + 4 + 4) * 128  # qkv_proj        10,485,760
        + 4096 * 2048  # o_proj                         8,388,608
        + 2 * 128  # q_norm, k_norm                           256
        + 2048 * 128  # router                            262,144
        + 8 * 3 * 2048 * 768  # 8 experts: gate, up, down  37,748,736
        + 2 * 2048  # input and post-attention norms         4,096
    )
    assert per_layer == 56_889_600
    weights = 2 * (48 * per_layer + 151_936 * 2048 + 2048)  # + lm_head + final norm, 2 bytes each
    assert weights == 6_083_735_552  # FACTS.md: ~3.05 B params = 6.1 GB per token
    assert _step(ops, "weight_bytes") == weights
    kv = 48 * 1024 * 4 * 128 * 2 * 2  # layers x S x kv heads x D x (K, V) x 2 bytes
    assert kv == 100_663_296
    assert _step(ops, "cache_bytes") == kv
    activations = _step(ops, "bytes") - weights - kv
    assert 0 < activations < 0.005 * weights
    # FLOPs: 2 per weight of every matmul, + attention 2 x 2 x 32 heads x 1024 x 128 per layer
    matmul_params = 48 * (per_layer - 256 - 4096) + 151_936 * 2048
    flops = sum(o.flops * o.count for o in ops if o.kind == "compute")
    assert flops == 2 * matmul_params + 48 * 4 * 32 * 1024 * 128


def test_qwen3_30b_tp4_bytes_by_hand():
    ops = decode_step_ops(load_spec("qwen3-30b-a3b"), batch=1, ctx=1024, tp=4, dtype="bf16")
    per_layer = (
        2048 * (8 + 1 + 1) * 128  # qkv_proj: 8 q heads and 1 kv head per rank   2,621,440
        + 1024 * 2048  # o_proj: 8 heads x 128 in                          2,097,152
        + 2 * 128  # q/k norm weights (replicated)                              256
        + 2048 * 128  # router, replicated                                  262,144
        + 8 * 3 * 2048 * 192  # 8 experts, width 768/4 = 192              9,437,184
        + 2 * 2048  # norms                                                   4,096
    )
    assert per_layer == 14_422_272
    weights = 2 * (48 * per_layer + 37_984 * 2048 + 2048)  # lm_head: 151,936 / 4 = 37,984 rows
    assert _step(ops, "weight_bytes") == weights == 1_540_124_672
    assert _step(ops, "cache_bytes") == 48 * 1024 * 1 * 128 * 2 * 2  # 1 kv head per rank
    comm = [o for o in ops if o.group == "communication"]
    assert {o.name: o.count for o in comm} == {"allreduce.attention": 48, "allreduce.moe": 48, "allgather.logits": 1}
    ar = _by_name(ops)["allreduce.attention"]
    assert ar.shapes["message_bytes"] == 2048 * 2 and ar.bytes == 2 * 3 * 4096 // 4  # ring: 2(tp-1)/tp
    ag = _by_name(ops)["allgather.logits"]
    assert ag.shapes["message_bytes"] == 151_936 * 2 and ag.bytes == 3 * 151_936 * 2 // 4
    assert all(o.kind == "comm" for o in comm)


def test_order_groups_kinds_and_counts():
    spec = load_spec("qwen3-30b-a3b")
    ops = decode_step_ops(spec, batch=3, ctx=77, tp=2)
    names = [o.name for o in ops]
    assert names[0] == "embedding" and names[-3:] == ["lm_head", "allgather.logits", "sample.argmax"]
    assert names.index("qkv_proj") < names.index("attention") < names.index("o_proj") < names.index("router") \
        < names.index("experts.gate_up") < names.index("experts.down") < names.index("final_norm")
    assert len(names) == len(set(names))
    for o in ops:
        assert o.group in GROUPS and o.kind in KINDS and o.count >= 1 and o.bytes > 0
    assert _by_name(ops)["add_rmsnorm"].count == 2 * 48


@pytest.mark.parametrize("name", list_presets())
@pytest.mark.parametrize("tp", [1, 2])
def test_every_preset_builds(name, tp):
    ops = decode_step_ops(load_spec(name), batch=5, ctx=300, tp=tp)
    assert ops and all(o.group in GROUPS for o in ops)
    assert any(o.group == "communication" for o in ops) == (tp > 1)


def test_distinct_experts_formula_and_override():
    assert expected_distinct_experts(128, 8, 1) == pytest.approx(8)
    assert expected_distinct_experts(128, 8, 8) == pytest.approx(128 * (1 - (120 / 128) ** 8))  # ~51
    assert expected_distinct_experts(128, 8, 10_000) == pytest.approx(128)
    spec = load_spec("qwen3-30b-a3b")
    one_expert = 3 * 2048 * 768 * 2
    for b in (1, 8, 64):
        ops = _by_name(decode_step_ops(spec, batch=b, ctx=16))
        read = ops["experts.gate_up"].weight_bytes + ops["experts.down"].weight_bytes
        assert read == pytest.approx(expected_distinct_experts(128, 8, b) * one_expert, abs=2)
    ops = _by_name(decode_step_ops(spec, batch=8, ctx=16, distinct_experts=40))
    assert ops["experts.gate_up"].weight_bytes + ops["experts.down"].weight_bytes == 40 * one_expert
    with pytest.raises(UserError, match="distinct experts"):
        decode_step_ops(spec, batch=1, distinct_experts=20)  # one token cannot hit 20 experts


def test_fp8_halves_linear_weights_but_not_lm_head_or_router():
    spec = load_spec("qwen3-30b-a3b")
    b16, f8 = _by_name(decode_step_ops(spec, dtype="bf16")), _by_name(decode_step_ops(spec, dtype="fp8"))
    for n in ("qkv_proj", "o_proj", "experts.gate_up", "experts.down"):
        assert f8[n].weight_bytes * 2 == b16[n].weight_bytes and f8[n].dtype == "fp8"
    for n in ("lm_head", "router"):
        assert f8[n].weight_bytes == b16[n].weight_bytes
    assert f8["attention"].cache_bytes == b16["attention"].cache_bytes


def test_kv_heads_replicated_when_fewer_than_tp():
    spec = load_spec("qwen3-30b-a3b")  # 4 kv heads
    ops = _by_name(decode_step_ops(spec, ctx=100, tp=8))
    assert ops["attention"].shapes["kv_heads"] == 1 and ops["attention"].shapes["q_heads"] == 4
    assert ops["attention"].cache_bytes == 100 * 1 * 128 * 2 * 2


def test_attention_cache_grows_with_context_and_batch():
    spec = load_spec("qwen3-30b-a3b")
    a = _by_name(decode_step_ops(spec, batch=2, ctx=1000))["attention"]
    b = _by_name(decode_step_ops(spec, batch=2, ctx=4000))["attention"]
    assert b.cache_bytes == 4 * a.cache_bytes == 4 * 2 * 1000 * 4 * 128 * 2 * 2


def test_sliding_window_caps_the_cache_read():
    ops = _by_name(decode_step_ops(load_spec("gpt-oss-20b"), ctx=4096))
    assert ops["attention.sliding"].count == ops["attention"].count == 12
    assert ops["attention.sliding"].cache_bytes == 128 * 8 * 64 * 2 * 2
    assert ops["attention"].cache_bytes == 4096 * 8 * 64 * 2 * 2


def test_mla_reads_the_latent_cache():
    ops = _by_name(decode_step_ops(load_spec("deepseek-v3"), batch=2, ctx=1000, tp=4))
    assert ops["attention.mla"].cache_bytes == 2 * 1000 * (512 + 64) * 2  # replicated latent
    assert ops["mla.q_absorb"].weight_bytes == 32 * 128 * 512 * 2  # 128 heads / 4 ranks
    assert ops["mla.kv_a_proj"].weight_bytes == 7168 * 576 * 2  # replicated
    assert ops["experts.gate_up"].count == 58 and ops["mlp.gate_up"].count == 3
    assert ops["mlp.gate_up"].group == "other" and ops["shared_expert.down"].group == "moe"


def test_gated_deltanet_state_and_groups():
    ops = _by_name(decode_step_ops(load_spec("qwen3-next-80b-a3b"), batch=3, ctx=1000, tp=2))
    rec = ops["gdn.recurrence"]
    assert rec.count == 36 and rec.group == "linear_attention"
    assert rec.cache_bytes == 2 * 3 * 16 * 128 * 128 * 4  # read + write the fp32 state, 32/2 value heads
    assert ops["attention"].count == 12 and ops["attn_output_gate"].count == 12
    assert ops["shared_expert.gate"].count == 48


@pytest.mark.parametrize("kwargs,fragment", [
    ({"batch": 0}, "--batch"), ({"ctx": 0}, "--ctx"), ({"tp": 0}, "--tp"), ({"dtype": "fp4"}, "--dtype"),
    ({"tp": 3}, "--tp 3 does not divide"),
])
def test_bad_arguments(kwargs, fragment):
    with pytest.raises(UserError, match=fragment):
        decode_step_ops(load_spec("qwen3-30b-a3b"), **kwargs)
