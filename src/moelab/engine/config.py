"""The engine's view of a model: what the forward pass needs to know, from a `moelab.models.ModelSpec`.

The spec (parsed from a Hugging Face config.json or a preset by `moelab.models.load_spec`) holds the
architecture; this adds the few forward-pass details the roofline does not need (which projections carry
a bias, OLMoE's q/k/v clipping, the RoPE variant) from the same config dict, and refuses what the engine
cannot run yet with one clear line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moelab.errors import UserError
from moelab.models import ModelSpec, load_spec
from moelab.models.spec import PRESET_DIR

FAMILIES = ("qwen3_moe", "qwen2_moe", "olmoe", "mixtral", "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text")
# The families whose RMSNorms apply their weight as (1 + w) in fp32 (the engine and `moelab profile` alike)
OFFSET_NORM_TYPES = ("qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text")

# Layer kinds the engine can build (model.py's MIXERS): attention, and Qwen3.5's Gated DeltaNet. MLA would be a new
# kind there; everything else (cache, loader, generate) is shared.
ATTENTION = "full_attention"
LINEAR = "linear_attention"


@dataclass(frozen=True)
class EngineConfig:
    """A model's architecture as the forward pass sees it. Validated on construction."""

    model_type: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    experts: int
    top_k: int
    moe_intermediate: int  # one routed expert's width I (w13 is [E, 2I, H])
    dense_intermediate: int  # width of the dense MLP in non-MoE layers (0 when every layer is MoE)
    norm_topk_prob: bool  # renormalise the top-k routing weights to sum to 1
    rms_eps: float
    rope_theta: float
    rotary_dim: int
    tie_embeddings: bool
    qk_norm: str = "none"  # "none" | "head" (Qwen3: RMSNorm over each head's D) | "full" (OLMoE: over Hq·D)
    qkv_bias: bool = False
    o_bias: bool = False
    clip_qkv: float | None = None  # OLMoE: q, k, v clamped to ±clip after the norms
    shared_intermediate: int = 0  # shared expert width (Qwen2-MoE); 0 = none
    shared_gate: bool = False  # shared expert output scaled by sigmoid(x · w_gate) (Qwen2-MoE)
    dense_layers: tuple[int, ...] = ()  # layer indices whose MLP is dense, not MoE
    layer_types: tuple[str, ...] = field(default=())  # one per layer; ATTENTION for all four families
    max_positions: int = 0
    sliding_window: int | None = None
    dtype: str = "bfloat16"  # the checkpoint's declared dtype
    offset_norm: bool = False  # Qwen3.5: every RMSNorm but the gated one applies its weight as (1 + w), in fp32
    attn_gate: bool = False  # Qwen3.5: q_proj emits [q | gate] per head; the output is scaled by sigmoid(gate)
    # Gated DeltaNet (LINEAR layers): key/value heads, their dims, the causal conv's width
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_dim: int = 0
    linear_value_dim: int = 0
    linear_conv: int = 0

    def __post_init__(self) -> None:
        for name in ("hidden", "layers", "heads", "kv_heads", "head_dim", "vocab", "experts", "top_k",
                     "moe_intermediate"):
            if getattr(self, name) <= 0:
                raise UserError(f"config: {name} must be positive, got {getattr(self, name)}")
        if self.heads % self.kv_heads:
            raise UserError(f"config: num_attention_heads {self.heads} is not a multiple of "
                            f"num_key_value_heads {self.kv_heads}")
        if self.top_k > self.experts:
            raise UserError(f"config: num_experts_per_tok {self.top_k} exceeds the {self.experts} experts")
        if self.rotary_dim % 2 or self.rotary_dim > self.head_dim:
            raise UserError(f"config: rotary dim {self.rotary_dim} must be even and at most head_dim {self.head_dim}")
        if self.qk_norm not in ("none", "head", "full"):
            raise ValueError(f"qk_norm must be none, head or full, not {self.qk_norm!r}")
        if len(self.layer_types) != self.layers:
            raise UserError(f"config: layer_types has {len(self.layer_types)} entries for {self.layers} layers")
        bad = [t for t in self.layer_types if t not in (ATTENTION, LINEAR)]
        if bad:
            raise UserError(f"config: layer type {bad[0]!r} is not supported by the engine yet")
        if LINEAR in self.layer_types and (min(self.linear_key_heads, self.linear_value_heads, self.linear_key_dim,
                                                self.linear_value_dim, self.linear_conv) <= 0
                                            or self.linear_value_heads % self.linear_key_heads):
            raise UserError("config: linear_attention layers need positive linear_num_key_heads, "
                            "linear_num_value_heads (a multiple of the key heads), linear_key_head_dim, "
                            "linear_value_head_dim and linear_conv_kernel_dim")
        if self.dense_layers and self.dense_intermediate <= 0:
            raise UserError("config: dense MLP layers are listed but intermediate_size is missing")

    def is_moe(self, layer: int) -> bool:
        return layer not in self.dense_layers

    @property
    def attention_layers(self) -> int:
        return sum(t == ATTENTION for t in self.layer_types)

    @property
    def conv_channels(self) -> int:
        """Gated DeltaNet's conv runs over q, k and v: 2·Hk·Dk + Hv·Dv channels."""
        return 2 * self.linear_key_heads * self.linear_key_dim + self.linear_value_heads * self.linear_value_dim

    def kv_bytes_per_token(self, elem_bytes: int) -> int:
        """K and V cache bytes one token occupies across the attention layers."""
        return 2 * self.attention_layers * self.kv_heads * self.head_dim * elem_bytes

    def linear_state_bytes(self, elem_bytes: int) -> int:
        """One sequence's Gated DeltaNet state across the linear layers: the conv window (activation dtype) and the
        fp32 recurrent state [Hv, Dk, Dv]."""
        per = self.conv_channels * (self.linear_conv - 1) * elem_bytes + \
            self.linear_value_heads * self.linear_key_dim * self.linear_value_dim * 4
        return (self.layers - self.attention_layers) * per if self.linear_conv else 0


def resolve(model: str | Path) -> tuple[ModelSpec, dict[str, Any]]:
    """The spec and the raw config dict of `model`: a config.json, a checkpoint folder, or a preset name."""
    spec = load_spec(model)
    path = Path(model).expanduser()
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        path = PRESET_DIR / f"{str(model).lower()}.json"
    raw = json.loads(path.read_text(encoding="utf-8"))  # load_spec has read and checked this file
    return spec, raw


def _rope_type(cfg: dict[str, Any], where: str) -> None:
    # transformers 5 writes rope_parameters{rope_theta, rope_type}; older files have rope_scaling.
    rp = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    rope_type = rp.get("rope_type") or rp.get("type") or "default"
    if rope_type != "default":
        raise UserError(f"{where}: rope_type {rope_type!r} is not supported by the engine yet (only 'default')")


def engine_config(spec: ModelSpec, raw: dict[str, Any]) -> EngineConfig:
    """The engine's config for `spec`; `raw` is the config dict it came from (for bias and clipping)."""
    where = spec.source or spec.name
    if spec.model_type not in FAMILIES:
        raise UserError(f"{where}: model_type {spec.model_type!r} is not supported by the decode engine yet "
                        f"(supported: {', '.join(FAMILIES)})")
    _rope_type(raw, where)
    if spec.model_type == "qwen2_moe":
        # q/k/v carry a bias (`qkv_bias`, always on in Qwen1.5-MoE files that predate the field), o does not.
        qkv_bias, o_bias = bool(raw.get("qkv_bias", True)), False
    else:
        qkv_bias = o_bias = spec.attn_bias  # Qwen3-MoE/OLMoE attention_bias covers o_proj too
    windowed = "sliding_attention" in spec.layer_types
    return EngineConfig(
        model_type=spec.model_type, hidden=spec.hidden, layers=spec.layers, heads=spec.heads,
        kv_heads=spec.kv_heads, head_dim=spec.head_dim, vocab=spec.vocab, experts=spec.num_experts,
        top_k=spec.top_k, moe_intermediate=spec.expert_intermediate, dense_intermediate=spec.dense_intermediate,
        norm_topk_prob=spec.norm_topk_prob, rms_eps=spec.rms_eps, rope_theta=spec.rope_theta,
        rotary_dim=spec.rotary_dim, tie_embeddings=spec.tie_word_embeddings, qk_norm=spec.qk_norm,
        qkv_bias=qkv_bias, o_bias=o_bias,
        clip_qkv=raw.get("clip_qkv") if spec.model_type == "olmoe" else None,
        shared_intermediate=spec.shared_intermediate, shared_gate=spec.shared_gate,
        dense_layers=tuple(i for i, moe in enumerate(spec.moe_layers) if not moe),
        layer_types=tuple(ATTENTION if t == "sliding_attention" else t for t in spec.layer_types),
        max_positions=spec.max_positions, sliding_window=spec.sliding_window if windowed else None,
        dtype=spec.dtype, offset_norm=spec.model_type in OFFSET_NORM_TYPES, attn_gate=spec.attn_output_gate,
        linear_key_heads=spec.linear_key_heads, linear_value_heads=spec.linear_value_heads,
        linear_key_dim=spec.linear_key_head_dim, linear_value_dim=spec.linear_value_head_dim,
        linear_conv=spec.linear_conv_kernel,
    )
