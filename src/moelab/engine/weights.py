"""Weights: a Hugging Face safetensors checkpoint (or seeded random tensors) in the engine's layout.

The engine's layout, one flat dict `name -> tensor` (shapes for hidden H, heads Hq/Hk × D, experts E × I):

    embed [V,H]   norm [H]   lm_head [V,H] (absent when tied to embed)
    layers.{i}.input_norm [H]  .post_norm [H]
    layers.{i}.qkv [(Hq+2Hk)·D, H]  (.qkv_bias)   .o [H, Hq·D]  (.o_bias)   .q_norm / .k_norm [D] or [H·D]
    layers.{i}.router [E,H]  .w13 [E,2I,H] (gate rows, then up rows)  .w2 [E,H,I]
    layers.{i}.shared_w13 [2Is,H]  .shared_w2 [H,Is]  .shared_gate [1,H]      (Qwen2-MoE)
    layers.{i}.mlp_w13 [2Id,H]  .mlp_w2 [H,Id]                               (dense layers)
    Qwen3.5: qkv's q rows are [q | gate] per head (2·Hq·D); Gated DeltaNet layers instead of qkv/o/q_norm/k_norm:
    layers.{i}.gdn_in [2·Hk·Dk + 2·Hv·Dv + 2·Hv, H] (in_proj_qkv, _z, _b, _a stacked)  .gdn_conv [C,K]
    .gdn_a_log [Hv]  .gdn_dt_bias [Hv]  .gdn_norm [Dv]  .gdn_out [H, Hv·Dv]

q, k, v are fused into one matrix so a decode step reads them in one GEMV; w13 is the transformers-5
fused expert layout that `ops.fused_moe` takes. A checkpoint may store experts one by one (the Hub:
`experts.{e}.gate_proj/up_proj/down_proj`, Mixtral `experts.{e}.w1/w3/w2`) or fused (transformers 5 in
memory: `experts.gate_up_proj [E,2I,H]`, `experts.down_proj [E,H,I]`); both load.

Loading is two-phase so nothing is half-loaded: every tensor's name, shape and dtype is checked from the
safetensors headers (no data read), the memory need is checked, and only then is anything allocated.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from moelab.engine.config import LINEAR, EngineConfig
from moelab.errors import UserError

_FLOAT_DTYPES = {"F32", "F16", "BF16"}
GiB = 1024 ** 3


def tensor_shapes(cfg: EngineConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor of the engine's layout and its shape."""
    H, D, V = cfg.hidden, cfg.head_dim, cfg.vocab
    qkv_rows = (cfg.heads * (2 if cfg.attn_gate else 1) + 2 * cfg.kv_heads) * D
    s: dict[str, tuple[int, ...]] = {"embed": (V, H), "norm": (H,)}
    if not cfg.tie_embeddings:
        s["lm_head"] = (V, H)
    for i in range(cfg.layers):
        p = f"layers.{i}."
        s[p + "input_norm"] = (H,)
        s[p + "post_norm"] = (H,)
        if cfg.layer_types[i] == LINEAR:
            nv, dv = cfg.linear_value_heads, cfg.linear_value_dim
            s[p + "gdn_in"] = (cfg.conv_channels + nv * dv + 2 * nv, H)
            s[p + "gdn_conv"] = (cfg.conv_channels, cfg.linear_conv)
            s[p + "gdn_a_log"] = s[p + "gdn_dt_bias"] = (nv,)
            s[p + "gdn_norm"] = (dv,)
            s[p + "gdn_out"] = (H, nv * dv)
            _mlp_shapes(cfg, i, s)
            continue
        s[p + "qkv"] = (qkv_rows, H)
        if cfg.qkv_bias:
            s[p + "qkv_bias"] = (qkv_rows,)
        s[p + "o"] = (H, cfg.heads * D)
        if cfg.o_bias:
            s[p + "o_bias"] = (H,)
        if cfg.qk_norm == "head":
            s[p + "q_norm"], s[p + "k_norm"] = (D,), (D,)
        elif cfg.qk_norm == "full":
            s[p + "q_norm"], s[p + "k_norm"] = (cfg.heads * D,), (cfg.kv_heads * D,)
        _mlp_shapes(cfg, i, s)
    return s


def _mlp_shapes(cfg: EngineConfig, i: int, s: dict[str, tuple[int, ...]]) -> None:
    p, H = f"layers.{i}.", cfg.hidden
    if cfg.is_moe(i):
        E, I = cfg.experts, cfg.moe_intermediate
        s[p + "router"] = (E, H)
        s[p + "w13"] = (E, 2 * I, H)
        s[p + "w2"] = (E, H, I)
        if cfg.shared_intermediate:
            s[p + "shared_w13"] = (2 * cfg.shared_intermediate, H)
            s[p + "shared_w2"] = (H, cfg.shared_intermediate)
            if cfg.shared_gate:
                s[p + "shared_gate"] = (1, H)
    else:
        s[p + "mlp_w13"] = (2 * cfg.dense_intermediate, H)
        s[p + "mlp_w2"] = (H, cfg.dense_intermediate)


def weight_bytes(cfg: EngineConfig, dtype: torch.dtype) -> int:
    elem = torch.empty((), dtype=dtype).element_size()
    return sum(math.prod(s) for s in tensor_shapes(cfg).values()) * elem


def _host_available() -> int | None:
    try:  # Linux: what the kernel says can be allocated without swapping
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_memory(needed: int, device: torch.device, what: str) -> None:
    """Raise a UserError naming the need when `device` has less free memory than `needed` bytes."""
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        where = f"GPU memory: {what}"
        on = f"of {total / GiB:.2f} GiB is free on {torch.cuda.get_device_name(device)}"
    elif device.type == "cpu" and (avail := _host_available()) is not None:
        free, where, on = avail, f"host memory: {what}", "is available on this machine"
    else:
        return
    # Keep a little room for activations, the CUDA graph pool and cuBLAS workspaces.
    margin = max(512 * 1024 ** 2, needed // 50)
    if needed + margin > free:
        raise UserError(f"not enough {where} need {(needed + margin) / GiB:.2f} GiB "
                        f"(incl. {margin / GiB:.2f} GiB working room), {free / GiB:.2f} GiB {on}")


# ---------------------------------------------------------------- the checkpoint on disk

class Checkpoint:
    """The tensors of a safetensors checkpoint folder: names, shapes, dtypes (headers only until read)."""

    def __init__(self, folder: str | Path):
        from safetensors import safe_open

        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise UserError(f"{self.folder}: not a checkpoint folder")
        index = self.folder / "model.safetensors.index.json"
        if index.is_file():
            try:
                weight_map = json.loads(index.read_text())["weight_map"]
            except (OSError, ValueError, KeyError, TypeError):
                raise UserError(f"{index}: not a safetensors index (no 'weight_map')") from None
            files = sorted(set(weight_map.values()))
        else:
            files = sorted(p.name for p in self.folder.glob("*.safetensors"))
            if not files:
                raise UserError(f"{self.folder}: no model.safetensors or model.safetensors.index.json")
        self._handles = {}
        self.where: dict[str, str] = {}  # tensor name -> file
        for f in files:
            path = self.folder / f
            if not path.is_file():
                raise UserError(f"{index}: shard {f} is missing")
            try:
                h = self._handles[f] = safe_open(str(path), framework="pt")
            except Exception as e:  # safetensors raises its own error types for corrupt headers
                raise UserError(f"{path}: not a readable safetensors file ({e})") from None
            for name in h.keys():
                self.where[name] = f

    def __contains__(self, name: str) -> bool:
        return name in self.where

    def info(self, name: str) -> tuple[tuple[int, ...], str]:
        sl = self._handles[self.where[name]].get_slice(name)
        return tuple(sl.get_shape()), sl.get_dtype()

    def read(self, name: str) -> torch.Tensor:
        return self._handles[self.where[name]].get_tensor(name)

    def read_slice(self, name: str, index: tuple) -> torch.Tensor:
        """Only the part `index` (slices) of tensor `name`: safetensors reads just those bytes (tensor
        parallelism loads each rank's shard this way)."""
        return self._handles[self.where[name]].get_slice(name)[index]


@dataclass(frozen=True)
class Part:
    """One checkpoint tensor and where it goes inside an engine tensor."""

    name: str
    shape: tuple[int, ...]
    dst: tuple  # index into the engine tensor (ints and slices)
    src: tuple = ()  # the rows of the checkpoint tensor it takes (all of it when empty): Qwen3-Next's grouped rows


def _attn_parts(cfg: EngineConfig, i: int, prefix: str) -> dict[str, list[Part]]:
    pre = f"{prefix}layers.{i}.self_attn."
    H, D = cfg.hidden, cfg.head_dim
    q, kv = cfg.heads * D * (2 if cfg.attn_gate else 1), cfg.kv_heads * D  # q_proj: [q | gate] per head
    o_in = cfg.heads * D
    rows = [("q_proj", 0, q), ("k_proj", q, q + kv), ("v_proj", q + kv, q + 2 * kv)]
    out = {"qkv": [Part(f"{pre}{n}.weight", (b - a, H), (slice(a, b),)) for n, a, b in rows],
           "o": [Part(pre + "o_proj.weight", (H, o_in), ())]}
    if cfg.qkv_bias:
        out["qkv_bias"] = [Part(f"{pre}{n}.bias", (b - a,), (slice(a, b),)) for n, a, b in rows]
    if cfg.o_bias:
        out["o_bias"] = [Part(pre + "o_proj.bias", (H,), ())]
    if cfg.qk_norm != "none":
        qn, kn = (D, D) if cfg.qk_norm == "head" else (o_in, kv)
        out["q_norm"] = [Part(pre + "q_norm.weight", (qn,), ())]
        out["k_norm"] = [Part(pre + "k_norm.weight", (kn,), ())]
    return out


def _gdn_in_grouped(cfg: EngineConfig, pre: str) -> list[Part]:
    """Qwen3-Next stores the input projection as in_proj_qkvz and in_proj_ba, grouped by key head: for key head g,
    [q_g, k_g, v and z of its value heads] and [b, a of its value heads]. The engine's gdn_in is [q | k | v | z | b | a],
    each over all heads in order (value head g·rep + r), as Qwen3.5 stores it: the parts move each group's rows."""
    H, nk, nv, dk, dv = cfg.hidden, cfg.linear_key_heads, cfg.linear_value_heads, cfg.linear_key_dim, cfg.linear_value_dim
    rep, C = nv // nk, cfg.conv_channels
    width = 2 * dk + 2 * rep * dv
    qkvz, ba = (pre + "in_proj_qkvz.weight", (nk * width, H)), (pre + "in_proj_ba.weight", (nk * 2 * rep, H))
    parts = []
    for g in range(nk):
        s0 = g * width
        for src_at, n, dst_at in ((s0, dk, g * dk), (s0 + dk, dk, nk * dk + g * dk),
                                  (s0 + 2 * dk, rep * dv, 2 * nk * dk + g * rep * dv),
                                  (s0 + 2 * dk + rep * dv, rep * dv, C + g * rep * dv)):
            parts.append(Part(*qkvz, (slice(dst_at, dst_at + n),), (slice(src_at, src_at + n),)))
        for src_at, dst_at in ((2 * rep * g, C + nv * dv + g * rep), (2 * rep * g + rep, C + nv * dv + nv + g * rep)):
            parts.append(Part(*ba, (slice(dst_at, dst_at + rep),), (slice(src_at, src_at + rep),)))
    return parts


def _gdn_parts(cfg: EngineConfig, i: int, prefix: str) -> dict[str, list[Part]]:
    pre = f"{prefix}layers.{i}.linear_attn."
    H, C, nv, dv = cfg.hidden, cfg.conv_channels, cfg.linear_value_heads, cfg.linear_value_dim
    rows = [("in_proj_qkv", 0, C), ("in_proj_z", C, C + nv * dv), ("in_proj_b", C + nv * dv, C + nv * dv + nv),
            ("in_proj_a", C + nv * dv + nv, C + nv * dv + 2 * nv)]
    grouped = cfg.model_type == "qwen3_next"
    return {"gdn_in": _gdn_in_grouped(cfg, pre) if grouped else
            [Part(f"{pre}{n}.weight", (b - a, H), (slice(a, b),)) for n, a, b in rows],
            "gdn_conv": [Part(pre + "conv1d.weight", (C, 1, cfg.linear_conv), ())],  # a depthwise Conv1d's [C, 1, K]
            "gdn_a_log": [Part(pre + "A_log", (nv,), ())], "gdn_dt_bias": [Part(pre + "dt_bias", (nv,), ())],
            "gdn_norm": [Part(pre + "norm.weight", (dv,), ())], "gdn_out": [Part(pre + "out_proj.weight", (H, nv * dv), ())]}


def _swiglu_parts(pre: str, names: tuple[str, str, str], inter: int, H: int, lead: tuple = ()) -> tuple[list, list]:
    gate, up, down = names
    w13 = [Part(f"{pre}{gate}.weight", (inter, H), (*lead, slice(0, inter))),
           Part(f"{pre}{up}.weight", (inter, H), (*lead, slice(inter, 2 * inter)))]
    return w13, [Part(f"{pre}{down}.weight", (H, inter), lead)]


def _moe_parts(cfg: EngineConfig, i: int, ckpt: Checkpoint, prefix: str) -> dict[str, list[Part]]:
    H, E, I = cfg.hidden, cfg.experts, cfg.moe_intermediate
    # The Hub's Mixtral files say block_sparse_moe; transformers 5 says mlp for every family.
    pre = f"{prefix}layers.{i}.mlp."
    if f"{prefix}layers.{i}.block_sparse_moe.gate.weight" in ckpt:
        pre = f"{prefix}layers.{i}.block_sparse_moe."
    out = {"router": [Part(pre + "gate.weight", (E, H), ())]}
    if pre + "experts.gate_up_proj" in ckpt:
        out["w13"] = [Part(pre + "experts.gate_up_proj", (E, 2 * I, H), ())]
        out["w2"] = [Part(pre + "experts.down_proj", (E, H, I), ())]
    else:
        names = ("w1", "w3", "w2") if f"{pre}experts.0.w1.weight" in ckpt else ("gate_proj", "up_proj", "down_proj")
        out["w13"], out["w2"] = [], []
        for e in range(E):
            a, b = _swiglu_parts(f"{pre}experts.{e}.", names, I, H, lead=(e,))
            out["w13"] += a
            out["w2"] += b
    if cfg.shared_intermediate:
        out["shared_w13"], out["shared_w2"] = _swiglu_parts(
            pre + "shared_expert.", ("gate_proj", "up_proj", "down_proj"), cfg.shared_intermediate, H)
        if cfg.shared_gate:
            out["shared_gate"] = [Part(pre + "shared_expert_gate.weight", (1, H), ())]
    return out


def plan(cfg: EngineConfig, ckpt: Checkpoint) -> dict[str, list[Part]]:
    """For every engine tensor, the checkpoint tensors it is assembled from."""
    H, V = cfg.hidden, cfg.vocab
    # A multimodal Qwen3.5 checkpoint keeps the text model under model.language_model.
    m = "model.language_model." if "model.language_model.embed_tokens.weight" in ckpt else "model."
    p: dict[str, list[Part]] = {"embed": [Part(m + "embed_tokens.weight", (V, H), ())],
                                "norm": [Part(m + "norm.weight", (H,), ())]}
    if not cfg.tie_embeddings:
        p["lm_head"] = [Part("lm_head.weight", (V, H), ())]
    for i in range(cfg.layers):
        layer = {"input_norm": [Part(f"{m}layers.{i}.input_layernorm.weight", (H,), ())],
                 "post_norm": [Part(f"{m}layers.{i}.post_attention_layernorm.weight", (H,), ())],
                 **(_gdn_parts(cfg, i, m) if cfg.layer_types[i] == LINEAR else _attn_parts(cfg, i, m))}
        if cfg.is_moe(i):
            layer.update(_moe_parts(cfg, i, ckpt, m))
        else:
            layer["mlp_w13"], layer["mlp_w2"] = _swiglu_parts(
                f"{m}layers.{i}.mlp.", ("gate_proj", "up_proj", "down_proj"), cfg.dense_intermediate, H)
        p.update({f"layers.{i}.{k}": v for k, v in layer.items()})
    return p


def _parts(pl: dict[str, list[Part]]) -> Iterator[Part]:
    for parts in pl.values():
        yield from parts


def validate(pl: dict[str, list[Part]], ckpt: Checkpoint) -> None:
    """Every needed tensor is present, floating point, and of the expected shape — or one clear error."""
    for part in _parts(pl):
        if part.name not in ckpt:
            raise UserError(f"{ckpt.folder}: tensor {part.name} is missing from the checkpoint")
        shape, dt = ckpt.info(part.name)
        if dt not in _FLOAT_DTYPES:
            raise UserError(f"{ckpt.folder}: tensor {part.name} is stored as {dt}; only bf16/fp16/fp32 "
                            "checkpoints are supported")
        if shape != part.shape:
            raise UserError(f"{ckpt.folder}: tensor {part.name} has shape {list(shape)}, "
                            f"expected {list(part.shape)}")


def load_checkpoint(cfg: EngineConfig, folder: str | Path, dtype: torch.dtype, device: torch.device,
                    reserve_bytes: int = 0) -> dict[str, torch.Tensor]:
    """Read a checkpoint folder into the engine's layout (see the module docstring) on `device`.

    Raises UserError, before allocating anything, for a missing or mis-shaped tensor (naming it and both
    shapes), a non-float tensor, or too little GPU memory for the weights plus `reserve_bytes` (the cache).
    """
    ckpt = Checkpoint(folder)
    pl = plan(cfg, ckpt)
    validate(pl, ckpt)
    check_memory(weight_bytes(cfg, dtype) + reserve_bytes, device, "the weights and KV cache")
    shapes = tensor_shapes(cfg)
    out: dict[str, torch.Tensor] = {}
    for key, parts in pl.items():
        t = torch.empty(shapes[key], dtype=dtype, device=device)
        for part in parts:  # (reshape: the conv's [C, 1, K] into [C, K]; validate checked both shapes)
            src = ckpt.read_slice(part.name, part.src) if part.src else ckpt.read(part.name)
            t[part.dst].copy_(src.to(dtype).reshape(t[part.dst].shape))
        out[key] = t
    return out


# ---------------------------------------------------------------- seeded random weights

def random_weights(cfg: EngineConfig, dtype: torch.dtype, device: torch.device, seed: int = 0,
                   reserve_bytes: int = 0, shard=None, need_bytes: int | None = None) -> dict[str, torch.Tensor]:
    """Seeded Gaussian weights at the model's real shapes, scaled so activations stay O(1) in every layer.

    Input projections get std 1/sqrt(fan_in), so each output is about unit-size for a unit-RMS input (every
    block's input is RMS-normalised). The two projections that write into the residual stream (o, w2 and
    the dense/shared down projections) get a further 1/sqrt(2·layers), so the stream's RMS stays near
    1 after all layers instead of growing like sqrt(2·layers). Norm weights are 1, biases 0.

    Tensor parallelism: `shard(key, full_tensor) -> this rank's part or None (dropped)` is applied to each
    tensor as it is drawn, so every rank holds a slice of the very model tp=1 draws with the same seed, and
    only one full tensor at a time; `need_bytes` is then the rank's weight bytes for the memory check.
    """
    need = weight_bytes(cfg, dtype) if need_bytes is None else need_bytes
    check_memory(need + reserve_bytes, device, "the weights and KV cache")
    g = torch.Generator(device=device).manual_seed(seed)
    depth = 1.0 / math.sqrt(2 * cfg.layers)
    out: dict[str, torch.Tensor] = {}
    for key, shape in tensor_shapes(cfg).items():
        kind = key.rsplit(".", 1)[-1]
        if kind.endswith("norm"):  # (1 + w) norms start at w = 0; the gated norm's plain weight at 1
            zero = cfg.offset_norm and kind != "gdn_norm"
            out[key] = (torch.zeros if zero else torch.ones)(shape, dtype=dtype, device=device)
        elif kind == "gdn_a_log":  # transformers' init: A uniform in [0.01, 16], stored as log A
            out[key] = torch.empty(shape, device=device).uniform_(0.01, 16, generator=g).log().to(dtype)
        elif kind == "gdn_dt_bias":
            out[key] = torch.ones(shape, dtype=dtype, device=device)
        elif kind.endswith("bias"):
            out[key] = torch.zeros(shape, dtype=dtype, device=device)
        else:
            std = 1.0 if kind == "embed" else 1.0 / math.sqrt(shape[-1])
            if kind in ("o", "w2", "shared_w2", "mlp_w2", "gdn_out"):
                std *= depth
            t = torch.empty(shape, dtype=dtype, device=device)
            out[key] = t.normal_(0.0, std, generator=g)
        if shard is not None:
            part = shard(key, out.pop(key))
            if part is not None:
                out[key] = part
    return out
