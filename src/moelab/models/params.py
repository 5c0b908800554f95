"""Parameter counts of a `ModelSpec`, part by part (the formulas behind `total_params`/`active_params`).

Counts follow the Hugging Face module layout of each family: biases, norm weights, attention sinks,
GDN's A_log/dt_bias and DeepSeek's score-correction bias included. The op graph (graph.py) derives its
weight bytes independently, per op and per tensor-parallel shard; tests check the two agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from moelab.models.spec import ModelSpec


def gqa_attention(s: ModelSpec) -> int:
    """One grouped-query attention layer: q (doubled with an output gate), k, v, o, biases, q/k norms, sinks."""
    h, hd = s.hidden, s.head_dim
    q_out = s.heads * hd * (2 if s.attn_output_gate else 1)
    n = h * q_out + 2 * h * s.kv_heads * hd + s.heads * hd * h
    if s.attn_bias:
        n += q_out + 2 * s.kv_heads * hd
        if s.model_type != "qwen2_moe":
            n += h  # o_proj's bias follows attention_bias, except Qwen2-MoE (q/k/v biases only)
    if s.qk_norm == "head":
        n += 2 * hd
    elif s.qk_norm == "full":
        n += (s.heads + s.kv_heads) * hd
    if s.attn_sinks:
        n += s.heads
    return n


def mla_attention(s: ModelSpec) -> int:
    """One multi-head latent attention layer (DeepSeek-V2/V3): q (LoRA or plain), kv_a, kv_b, o, norms."""
    h, nh = s.hidden, s.heads
    qk = s.qk_nope_head_dim + s.qk_rope_head_dim
    q = h * s.q_lora_rank + s.q_lora_rank + s.q_lora_rank * nh * qk if s.q_lora_rank else h * nh * qk
    kv_a = h * (s.kv_lora_rank + s.qk_rope_head_dim) + s.kv_lora_rank
    kv_b = s.kv_lora_rank * nh * (s.qk_nope_head_dim + s.v_head_dim)
    return q + kv_a + kv_b + nh * s.v_head_dim * h


def gdn(s: ModelSpec) -> int:
    """One Gated DeltaNet layer: in_proj (q, k, v, z and the b, a gates), depthwise conv, A_log, dt_bias,
    the gated RMSNorm weight, out_proj."""
    h = s.hidden
    kd, vd = s.linear_key_heads * s.linear_key_head_dim, s.linear_value_heads * s.linear_value_head_dim
    in_proj = h * (2 * kd + 2 * vd) + h * 2 * s.linear_value_heads
    conv = (2 * kd + vd) * s.linear_conv_kernel
    return in_proj + conv + 2 * s.linear_value_heads + s.linear_value_head_dim + vd * h


def expert(s: ModelSpec) -> int:
    """One routed expert: gate, up [I, H] and down [H, I] (+ their biases for gpt-oss)."""
    n = 3 * s.hidden * s.expert_intermediate
    return n + (2 * s.expert_intermediate + s.hidden if s.expert_bias else 0)


def router(s: ModelSpec) -> int:
    return s.hidden * s.num_experts + (s.num_experts if s.router_bias else 0)


def shared(s: ModelSpec) -> int:
    return 3 * s.hidden * s.shared_intermediate + (s.hidden if s.shared_gate else 0)


def breakdown(s: ModelSpec) -> dict[str, int]:
    """Parameters by part, summed over layers (see `ModelSpec.param_breakdown`)."""
    n_moe = sum(s.moe_layers)
    n_dense = s.layers - n_moe
    attn_layers = s.layers - s.layer_count("linear_attention")
    attn = mla_attention(s) if s.attention == "mla" else gqa_attention(s)
    vh = s.vocab * s.hidden
    return {
        "embedding": vh,
        "lm_head": 0 if s.tie_word_embeddings else vh,
        "attention": attn_layers * attn,
        "linear_attention": s.layer_count("linear_attention") * gdn(s) if s.linear_value_heads else 0,
        "router": n_moe * router(s),
        "experts": n_moe * s.num_experts * expert(s) if s.num_experts else 0,
        "shared_experts": n_moe * shared(s),
        "dense_mlp": n_dense * 3 * s.hidden * s.dense_intermediate,
        "norms": (2 * s.layers + 1) * s.hidden,
    }


def active(s: ModelSpec, embedding: str = "lm_head") -> int:
    """Parameters one token uses (see `ModelSpec.active_params` for the `embedding` conventions)."""
    if embedding not in ("lm_head", "both", "none"):
        raise ValueError(f"embedding must be lm_head, both or none, not {embedding!r}")
    b = breakdown(s)
    n = b["attention"] + b["linear_attention"] + b["router"] + b["shared_experts"] + b["dense_mlp"] + b["norms"]
    n += sum(s.moe_layers) * s.top_k * expert(s) if s.num_experts else 0
    vocab = s.vocab * s.hidden
    if embedding == "lm_head":
        n += vocab
    elif embedding == "both":
        n += vocab if s.tie_word_embeddings else 2 * vocab
    return n
