"""Per-family mapping of Hugging Face config fields onto `ModelSpec` fields.

Defaults for fields a config.json may omit are those of the transformers config classes (5.x), so a
file means here what it means to transformers. Fields that decide bytes or FLOPs (widths, counts) have
no default unless transformers has one: a missing one is an error naming the field.
"""

from __future__ import annotations

from typing import Any


def _common(f: Any, top: Any, *, head_dim_required: bool = False) -> dict[str, Any]:
    hidden = f.int("hidden_size")
    heads = f.int("num_attention_heads")
    rope = f.dict("rope_parameters") or f.dict("rope_scaling")
    theta = f.float("rope_theta", None) if f.has("rope_theta") else float(rope.get("rope_theta", 10000.0))
    prf = f.float("partial_rotary_factor", None) if f.has("partial_rotary_factor") else \
        float(rope.get("partial_rotary_factor", 1.0))
    tie = f.bool("tie_word_embeddings", top.bool("tie_word_embeddings", False)) if f is not top else \
        f.bool("tie_word_embeddings", False)
    return dict(
        hidden=hidden,
        layers=f.int("num_hidden_layers"),
        heads=heads,
        kv_heads=f.int("num_key_value_heads", heads),
        head_dim=f.int("head_dim") if head_dim_required else f.int("head_dim", hidden // heads),
        vocab=f.int("vocab_size"),
        tie_word_embeddings=tie,
        rms_eps=f.float("rms_norm_eps", 1e-6),
        rope_theta=theta,
        partial_rotary_factor=prf,
        max_positions=f.int("max_position_embeddings", 0),
        dtype=f.str("torch_dtype", f.str("dtype", top.str("torch_dtype", top.str("dtype", "bfloat16")))),
    )


def _full(n: int) -> tuple[str, ...]:
    return ("full_attention",) * n


def _qwen_moe_layers(f: Any, layers: int, experts: int) -> tuple[bool, ...]:
    """Qwen-style sparsity: MoE when experts > 0, (i + 1) % decoder_sparse_step == 0, i not in mlp_only_layers."""
    step = f.int("decoder_sparse_step", 1)
    if step <= 0:
        raise f._fail("decoder_sparse_step", f"must be positive, got {step}")
    only = set(f.int_list("mlp_only_layers"))
    return tuple(experts > 0 and (i + 1) % step == 0 and i not in only for i in range(layers))


def _hybrid_layer_types(f: Any, layers: int) -> tuple[str, ...]:
    """Qwen3-Next/3.5: `layer_types`, or else every full_attention_interval-th layer is full attention."""
    given = f.str_list("layer_types")
    if given is not None:
        return tuple(given)
    every = f.int("full_attention_interval", 4)
    if every <= 0:
        raise f._fail("full_attention_interval", f"must be positive, got {every}")
    return tuple("full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(layers))


def _qwen_moe(f: Any, top: Any, *, shared: bool, qk_norm: str, attn_bias: bool) -> dict[str, Any]:
    d = _common(f, top)
    # The Hub's files say `num_experts`; transformers 5 writes `num_local_experts` (its attribute_map).
    experts = f.int("num_experts") if f.has("num_experts") else f.int("num_local_experts", 0)
    d.update(
        layer_types=_full(d["layers"]),
        qk_norm=qk_norm,
        attn_bias=f.bool("attention_bias", attn_bias) if qk_norm != "none" else attn_bias,
        num_experts=experts,
        top_k=f.int("num_experts_per_tok") if experts else 0,
        expert_intermediate=f.int("moe_intermediate_size") if experts else 0,
        norm_topk_prob=f.bool("norm_topk_prob", False),
        moe_layers=_qwen_moe_layers(f, d["layers"], experts),
    )
    if not all(d["moe_layers"]):
        d["dense_intermediate"] = f.int("intermediate_size")
    if shared:
        d["shared_intermediate"] = f.int("shared_expert_intermediate_size")
        d["shared_gate"] = True
    return d


def _qwen_hybrid(f: Any, top: Any, *, mtp_key: str | None) -> dict[str, Any]:
    d = _qwen_moe(f, top, shared=True, qk_norm="head", attn_bias=False)
    d["head_dim"] = f.int("head_dim")
    d["attn_bias"] = f.bool("attention_bias", False)
    d["attn_output_gate"] = f.bool("attn_output_gate", True)
    d["layer_types"] = _hybrid_layer_types(f, d["layers"])
    d.update(
        linear_key_heads=f.int("linear_num_key_heads"),
        linear_value_heads=f.int("linear_num_value_heads"),
        linear_key_head_dim=f.int("linear_key_head_dim"),
        linear_value_head_dim=f.int("linear_value_head_dim"),
        linear_conv_kernel=f.int("linear_conv_kernel_dim"),
    )
    if mtp_key:  # Qwen3.5: the router always renormalises its top-k (transformers has no switch for it)
        d["mtp_layers"] = f.int(mtp_key, 0)
        d["norm_topk_prob"] = True
    return d


def _deepseek(f: Any, top: Any, v3: bool) -> dict[str, Any]:
    d = _common(f, top)
    nope, rope = f.int("qk_nope_head_dim"), f.int("qk_rope_head_dim")
    experts = f.int("n_routed_experts", 0)
    moe_inter = f.int("moe_intermediate_size") if experts else 0
    first_dense = f.int("first_k_dense_replace", 0)
    freq = f.int("moe_layer_freq", 1)
    if freq <= 0:
        raise f._fail("moe_layer_freq", f"must be positive, got {freq}")
    layers = d["layers"]
    moe = tuple(experts > 0 and i >= first_dense and i % freq == 0 for i in range(layers))
    d.update(
        head_dim=nope + rope,
        kv_heads=d["heads"],  # MLA: every head reads the one shared latent; kv_heads is nominal
        attention="mla",
        layer_types=_full(layers),
        q_lora_rank=f.int("q_lora_rank") if f.has("q_lora_rank") else None,
        kv_lora_rank=f.int("kv_lora_rank"),
        qk_nope_head_dim=nope,
        qk_rope_head_dim=rope,
        v_head_dim=f.int("v_head_dim"),
        num_experts=experts,
        top_k=f.int("num_experts_per_tok") if experts else 0,
        expert_intermediate=moe_inter,
        dense_intermediate=f.int("intermediate_size") if not all(moe) else 0,
        shared_intermediate=f.int("n_shared_experts", 0) * moe_inter,
        norm_topk_prob=f.bool("norm_topk_prob", False),
        scoring=f.str("scoring_func", "sigmoid" if v3 else "softmax"),
        n_group=f.int("n_group", 1),
        topk_group=f.int("topk_group", 1),
        routed_scaling_factor=f.float("routed_scaling_factor", 1.0),
        router_bias=f.str("topk_method", "noaux_tc" if v3 else "greedy") == "noaux_tc",
        moe_layers=moe,
        mtp_layers=f.int("num_nextn_predict_layers", 0),
    )
    d["partial_rotary_factor"] = 1.0
    return d


def _mixtral(f: Any, top: Any) -> dict[str, Any]:
    d = _common(f, top)
    window = f.int("sliding_window", 0) or None
    d.update(
        layer_types=(("sliding_attention" if window else "full_attention"),) * d["layers"],
        sliding_window=window,
        num_experts=f.int("num_local_experts"),
        top_k=f.int("num_experts_per_tok"),
        expert_intermediate=f.int("intermediate_size"),
        norm_topk_prob=True,  # softmax over the top-k logits == renormalised top-k probabilities
        moe_layers=(True,) * d["layers"],
    )
    return d


def _olmoe(f: Any, top: Any) -> dict[str, Any]:
    d = _common(f, top)
    d.update(
        layer_types=_full(d["layers"]),
        qk_norm="full",
        attn_bias=f.bool("attention_bias", False),
        num_experts=f.int("num_experts"),
        top_k=f.int("num_experts_per_tok"),
        expert_intermediate=f.int("intermediate_size"),
        norm_topk_prob=f.bool("norm_topk_prob", False),
        moe_layers=(True,) * d["layers"],
    )
    return d


def _gpt_oss(f: Any, top: Any) -> dict[str, Any]:
    d = _common(f, top)
    layers = d["layers"]
    given = f.str_list("layer_types")
    types = tuple(given) if given is not None else tuple(
        "sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers))
    k = f.int("num_experts_per_tok") if f.has("num_experts_per_tok") else f.int("experts_per_token")
    d.update(
        layer_types=types,
        sliding_window=f.int("sliding_window", 0) or None,
        attn_bias=f.bool("attention_bias", True),
        attn_sinks=True,
        num_experts=f.int("num_local_experts"),
        top_k=k,
        expert_intermediate=f.int("intermediate_size"),
        norm_topk_prob=True,  # softmax over the top-k logits
        router_bias=True,
        expert_bias=True,
        activation="swiglu_clamped",
        moe_layers=(True,) * layers,
    )
    return d


def _dense(f: Any, top: Any, qk_norm: str) -> dict[str, Any]:
    d = _common(f, top)
    d.update(
        layer_types=_full(d["layers"]),
        qk_norm=qk_norm,
        attn_bias=f.bool("attention_bias", False),
        dense_intermediate=f.int("intermediate_size"),
        moe_layers=(False,) * d["layers"],
    )
    return d


def build_fields(model_type: str, f: Any, top: Any) -> dict[str, Any]:
    """ModelSpec keyword arguments for `model_type`, read through `f` (the model's fields; for
    qwen3_5_moe the `text_config` object) and `top` (the file's top level)."""
    if model_type == "qwen3_moe":
        return _qwen_moe(f, top, shared=False, qk_norm="head", attn_bias=False)
    if model_type == "qwen2_moe":
        return _qwen_moe(f, top, shared=True, qk_norm="none", attn_bias=True)
    if model_type == "qwen3_next":
        return _qwen_hybrid(f, top, mtp_key=None)
    if model_type in ("qwen3_5_moe", "qwen3_5_moe_text"):  # the text model alone (Qwen3_5MoeForCausalLM) is flat
        return _qwen_hybrid(f, top, mtp_key="mtp_num_hidden_layers")
    if model_type in ("deepseek_v2", "deepseek_v3"):
        return _deepseek(f, top, v3=model_type == "deepseek_v3")
    if model_type == "mixtral":
        return _mixtral(f, top)
    if model_type == "olmoe":
        return _olmoe(f, top)
    if model_type == "gpt_oss":
        return _gpt_oss(f, top)
    if model_type == "llama":
        return _dense(f, top, "none")
    if model_type == "qwen3":
        return _dense(f, top, "head")
    raise AssertionError(model_type)  # spec_from_config checked SUPPORTED
