"""`ModelSpec`: a model's architecture as the roofline and the op graph need it, read from a config.json.

A spec comes from a Hugging Face `config.json` (a path to the file, or to a checkpoint folder holding
it) or from a shipped preset (`presets/<name>.json`, the real models' files). Every family is mapped
onto one flat dataclass: per-layer `layer_types` ("full_attention", "sliding_attention",
"linear_attention") and a per-layer `moe_layers` mask say how layers differ; `attention` says whether
full-attention layers are grouped-query ("gqa") or DeepSeek's multi-head latent attention ("mla").

Any problem with the file is a `UserError` naming the file and the field, never a traceback.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from moelab.errors import UserError

PRESET_DIR = Path(__file__).parent / "presets"

SUPPORTED = ("qwen3_moe", "qwen2_moe", "mixtral", "olmoe", "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text", "deepseek_v2",
             "deepseek_v3", "gpt_oss", "llama", "qwen3")
LAYER_TYPES = ("full_attention", "sliding_attention", "linear_attention")


@dataclass(frozen=True)
class ModelSpec:
    """One model's decode-relevant architecture. Validated on construction (bad values: `UserError`).

    Widths are per model (before tensor-parallel sharding). `expert_intermediate` is one routed
    expert's width I (its gate/up weight is [2I, H]); `shared_intermediate` is the total width of the
    shared expert(s) (DeepSeek: n_shared_experts · I); `dense_intermediate` is the MLP width of the
    layers that are not MoE (0 when there are none).
    """

    name: str
    model_type: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tie_word_embeddings: bool = False
    rms_eps: float = 1e-6
    rope_theta: float = 10000.0
    partial_rotary_factor: float = 1.0
    max_positions: int = 0
    dtype: str = "bfloat16"
    source: str = ""
    # attention
    attention: str = "gqa"  # full-attention layers: "gqa" | "mla"
    qk_norm: str = "none"  # "none" | "head" (RMSNorm per head, Qwen3) | "full" (over all heads, OLMoE)
    attn_bias: bool = False  # q/k/v (and o, gpt-oss) projections carry biases
    attn_output_gate: bool = False  # Qwen3-Next/3.5: q_proj also emits a sigmoid gate on the output
    attn_sinks: bool = False  # gpt-oss: one learned sink logit per head
    sliding_window: int | None = None
    layer_types: tuple[str, ...] = ()
    # MLA (DeepSeek-V2/V3)
    q_lora_rank: int | None = None
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # MLP and MoE
    num_experts: int = 0  # 0: dense model
    top_k: int = 0
    expert_intermediate: int = 0
    dense_intermediate: int = 0
    shared_intermediate: int = 0
    shared_gate: bool = False  # shared expert output scaled by sigmoid(x · w), Qwen2-MoE/Next/3.5
    norm_topk_prob: bool = False  # renormalise the top-k weights to sum to 1
    scoring: str = "softmax"  # router score: "softmax" | "sigmoid" (DeepSeek-V3)
    n_group: int = 1  # DeepSeek grouped routing: experts in n_group groups, tokens pick topk_group groups
    topk_group: int = 1
    routed_scaling_factor: float = 1.0
    router_bias: bool = False  # gpt-oss router bias / DeepSeek-V3 score-correction bias
    expert_bias: bool = False  # gpt-oss experts carry biases
    activation: str = "swiglu"  # "swiglu" | "swiglu_clamped" (gpt-oss: clamp, alpha 1.702, (up + 1))
    moe_layers: tuple[bool, ...] = ()  # per layer: True when its MLP is MoE
    # Gated DeltaNet (linear-attention layers of Qwen3-Next / Qwen3.5)
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    mtp_layers: int = 0  # multi-token-prediction layers shipped with the checkpoint (not in decode)
    extra: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        where = self.source or self.name
        for f in ("hidden", "layers", "heads", "kv_heads", "head_dim", "vocab"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise UserError(f"{where}: {f} must be a positive integer, got {v!r}")
        if self.heads % self.kv_heads:
            raise UserError(f"{where}: num_attention_heads {self.heads} is not a multiple of "
                            f"num_key_value_heads {self.kv_heads}")
        if len(self.layer_types) != self.layers:
            raise UserError(f"{where}: layer_types has {len(self.layer_types)} entries for {self.layers} layers")
        bad = [t for t in self.layer_types if t not in LAYER_TYPES]
        if bad:
            raise UserError(f"{where}: layer_types: unknown layer type {bad[0]!r}")
        if "sliding_attention" in self.layer_types and not self.sliding_window:
            raise UserError(f"{where}: sliding_window: sliding-attention layers need a window size")
        if len(self.moe_layers) != self.layers:
            raise UserError(f"{where}: the MoE layer mask has {len(self.moe_layers)} entries for {self.layers} layers")
        if self.num_experts:
            if not 0 < self.top_k <= self.num_experts:
                raise UserError(f"{where}: num_experts_per_tok {self.top_k} must be in 1..{self.num_experts}")
            if self.expert_intermediate <= 0:
                raise UserError(f"{where}: moe_intermediate_size must be positive")
        elif any(self.moe_layers):
            raise UserError(f"{where}: MoE layers listed but num_experts is 0")
        if not all(self.moe_layers) and self.dense_intermediate <= 0:
            raise UserError(f"{where}: intermediate_size: dense MLP layers need a positive width")
        if self.attention not in ("gqa", "mla"):
            raise UserError(f"{where}: attention must be gqa or mla, not {self.attention!r}")
        if self.attention == "mla" and min(self.kv_lora_rank, self.qk_nope_head_dim, self.qk_rope_head_dim,
                                           self.v_head_dim) <= 0:
            raise UserError(f"{where}: kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim "
                            "must be positive for MLA")
        if "linear_attention" in self.layer_types and min(
                self.linear_key_heads, self.linear_value_heads, self.linear_key_head_dim,
                self.linear_value_head_dim, self.linear_conv_kernel) <= 0:
            raise UserError(f"{where}: linear_num_key_heads, linear_num_value_heads, linear_key_head_dim, "
                            "linear_value_head_dim and linear_conv_kernel_dim must be positive")
        if self.qk_norm not in ("none", "head", "full"):
            raise UserError(f"{where}: qk_norm must be none, head or full, not {self.qk_norm!r}")
        if self.scoring not in ("softmax", "sigmoid"):
            raise UserError(f"{where}: scoring_func must be softmax or sigmoid, not {self.scoring!r}")
        if not 0 < self.partial_rotary_factor <= 1:
            raise UserError(f"{where}: partial_rotary_factor must be in (0, 1], got {self.partial_rotary_factor}")

    # ---- derived sizes -------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def rotary_dim(self) -> int:
        d = self.qk_rope_head_dim if self.attention == "mla" else self.head_dim
        return int(d * self.partial_rotary_factor) if self.attention == "gqa" else d

    def layer_count(self, layer_type: str) -> int:
        return sum(t == layer_type for t in self.layer_types)

    # ---- parameter counts (see params.py for the formulas) --------------------------------------
    def param_breakdown(self) -> dict[str, int]:
        """Parameters by part: embedding, lm_head, attention, linear_attention, router, experts, shared,
        dense_mlp, norms. Totals are over all layers (MTP layers excluded)."""
        from moelab.models.params import breakdown
        return breakdown(self)

    def total_params(self) -> int:
        """Every parameter of the decoding model (input embedding and lm_head once each, or once if tied).

        Multi-token-prediction layers (DeepSeek-V3, Qwen3-Next/3.5) are not counted: decode without
        speculation does not run them, and DeepSeek's "671 B" excludes them too."""
        return sum(self.param_breakdown().values())

    def active_params(self, embedding: str = "lm_head") -> int:
        """Parameters one token uses: attention, router, top_k routed experts, shared and dense MLPs, norms,
        plus the vocabulary matrices as `embedding` says:

        - "lm_head" (default): the lm_head counted, the input embedding not — what one decoded token
          reads (one embedding row is negligible). OpenAI's gpt-oss figures (3.6 B / 5.1 B) use this.
        - "both": the input embedding table counted as well — Qwen3-30B-A3B's 3.3 B, OLMoE's 1.3 B and
          Mixtral's 12.9 B are only reproduced this way.
        - "none": neither (the "non-embedding" convention).
        A tied embedding is counted once under "lm_head" and "both".
        """
        from moelab.models.params import active
        return active(self, embedding)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["layer_types"] = list(self.layer_types)
        d["moe_layers"] = list(self.moe_layers)
        return d


# ---- loading -----------------------------------------------------------------------------------

def list_presets() -> list[str]:
    """Names of the shipped presets (file stems under models/presets), sorted."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.json"))


def load_spec(model: str | Path) -> ModelSpec:
    """A `ModelSpec` from a config.json path, a checkpoint folder holding one, or a preset name.

    Preset names are case-insensitive (`Qwen3-30B-A3B` = `qwen3-30b-a3b`). Raises `UserError` when the
    name is neither an existing path nor a preset, and for unreadable, non-JSON or incomplete files.
    """
    path = Path(model).expanduser()
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            raise UserError(f"{path.parent}: folder has no config.json")
        return spec_from_config(_read_json(path), source=str(path), name=path.parent.name)
    if path.is_file():
        return spec_from_config(_read_json(path), source=str(path),
                                name=path.stem if path.name != "config.json" else path.parent.name)
    key = str(model).lower()
    preset = PRESET_DIR / f"{key}.json"
    if preset.is_file():
        return spec_from_config(_read_json(preset), source=f"preset {key}", name=key)
    raise UserError(f"unknown model {str(model)!r}: not a config.json, a checkpoint folder, or a preset "
                    f"({', '.join(list_presets())})")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read ({e.__class__.__name__}: {e})") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    if not isinstance(obj, dict):
        raise UserError(f"{path}: expected a JSON object at the top level, got {type(obj).__name__}")
    return obj


class _Fields:
    """Typed access to a config dict; every failure names the file and the field (with its prefix)."""

    def __init__(self, cfg: dict[str, Any], source: str, prefix: str = "") -> None:
        self.cfg, self.source, self.prefix = cfg, source, prefix

    def _fail(self, key: str, why: str) -> UserError:
        return UserError(f"{self.source}: field '{self.prefix}{key}' {why}")

    def has(self, key: str) -> bool:
        return self.cfg.get(key) is not None

    def int(self, key: str, default: int | None = None) -> int:
        v = self.cfg.get(key)
        if v is None:
            if default is None:
                raise self._fail(key, "is missing")
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v:
            raise self._fail(key, f"must be an integer, got {v!r}")
        return int(v)

    def float(self, key: str, default: float | None = None) -> float:
        v = self.cfg.get(key)
        if v is None:
            if default is None:
                raise self._fail(key, "is missing")
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self._fail(key, f"must be a number, got {v!r}")
        return float(v)

    def bool(self, key: str, default: bool) -> bool:
        v = self.cfg.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise self._fail(key, f"must be true or false, got {v!r}")
        return v

    def str(self, key: str, default: str) -> str:
        v = self.cfg.get(key)
        if v is None:
            return default
        if not isinstance(v, str):
            raise self._fail(key, f"must be a string, got {v!r}")
        return v

    def int_list(self, key: str) -> list[int]:
        v = self.cfg.get(key) or []
        if not isinstance(v, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in v):
            raise self._fail(key, f"must be a list of integers, got {v!r}")
        return v

    def str_list(self, key: str) -> list[str] | None:
        v = self.cfg.get(key)
        if v is None:
            return None
        if not isinstance(v, list) or not all(isinstance(i, str) for i in v):
            raise self._fail(key, f"must be a list of strings, got {v!r}")
        return v

    def dict(self, key: str) -> dict[str, Any]:
        v = self.cfg.get(key)
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise self._fail(key, f"must be an object, got {v!r}")
        return v


def spec_from_config(cfg: dict[str, Any], source: str = "config.json", name: str = "") -> ModelSpec:
    """Map a Hugging Face config dict onto a `ModelSpec` (see `load_spec`). `source` names it in errors."""
    top = _Fields(cfg, source)
    model_type = top.str("model_type", "")
    if not model_type:
        raise UserError(f"{source}: field 'model_type' is missing")
    if model_type not in SUPPORTED:
        raise UserError(f"{source}: field 'model_type' is {model_type!r}, not one of {', '.join(SUPPORTED)}")
    f = top
    if model_type == "qwen3_5_moe":
        tc = top.dict("text_config")
        if not tc:
            raise UserError(f"{source}: field 'text_config' is missing (qwen3_5_moe keeps the model there)")
        f = _Fields(tc, source, "text_config.")
    from moelab.models.families import build_fields
    fields = build_fields(model_type, f, top)
    return ModelSpec(name=name or model_type, model_type=model_type, source=source, **fields)
