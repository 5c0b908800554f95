"""The decode engine: weights (HF safetensors or seeded random), a static KV cache, the forward pass built
from `moelab.ops`, and a prefill + decode loop with device-side sampling and CUDA graphs.

    eng = build("path/to/checkpoint", batch=1, max_len=512, impl="moelab")
    tokens = eng.generate(prompt_ids, new_tokens=256)       # [B, 256]

Files: config.py (what the forward needs, from `moelab.models.ModelSpec`), weights.py (loading and random
init), cache.py (KV cache), model.py (layers and forward), generate.py (the loop, sampling, graphs).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from moelab.engine.cache import KVCache
from moelab.engine.config import EngineConfig, engine_config, resolve
from moelab.engine.generate import Engine, Sampling, sample
from moelab.engine.model import Model
from moelab.engine.weights import load_checkpoint, random_weights, tensor_shapes, weight_bytes
from moelab.errors import UserError

DTYPES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16,
          "fp32": torch.float32, "float32": torch.float32}

__all__ = ["DTYPES", "Engine", "EngineConfig", "KVCache", "Model", "Sampling", "build", "engine_config",
           "load_checkpoint", "random_weights", "resolve", "sample", "tensor_shapes", "weight_bytes"]


def parse_dtype(name: str) -> torch.dtype:
    try:
        return DTYPES[name.lower()]
    except KeyError:
        raise UserError(f"dtype must be one of bf16, fp16, fp32, not {name!r}") from None


def build(model: str | Path, *, weights: str | Path | None = None, random: bool = False,
          dtype: str | None = None, device: str | torch.device | None = None, batch: int = 1,
          max_len: int = 2048, impl: str = "moelab", sampling: Sampling = Sampling(), use_graphs: bool = True,
          seed: int = 0, keep_logits: bool = False) -> Engine:
    """An `Engine` for `model` (config.json, checkpoint folder or preset name) on `device`.

    Weights come from `weights` (a checkpoint folder), from `model` itself when it is a folder holding
    safetensors, or are seeded random at the real shapes when `random`. `dtype` defaults to the
    checkpoint's declared dtype (bf16 for random weights). The KV cache holds `batch` × `max_len` tokens.
    Errors (UserError, before anything large is allocated): unsupported architecture, missing or
    mis-shaped tensors, too little GPU memory.
    """
    spec, raw = resolve(model)
    cfg = engine_config(spec, raw)
    if random and weights is not None:
        raise UserError("pass either --weights DIR or --random, not both")
    if not random and weights is None:
        folder = Path(model).expanduser()
        folder = folder.parent if folder.is_file() else folder  # a config.json beside its weights
        if folder.is_dir() and (any(folder.glob("*.safetensors")) or (folder / "model.safetensors.index.json").is_file()):
            weights = folder
        else:
            raise UserError(f"{model}: no weights here; pass --weights DIR (a safetensors checkpoint) or --random")
    dt = parse_dtype(dtype) if dtype else (torch.bfloat16 if random else parse_dtype(cfg.dtype))
    dev = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if impl not in ("moelab", "eager"):
        raise UserError(f"impl must be moelab or eager, not {impl!r}")
    if impl == "moelab" and dev.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise UserError("--impl moelab runs Triton kernels: it needs a CUDA GPU (or TRITON_INTERPRET=1 to "
                        "interpret them on the CPU, slowly); use --impl eager here")
    if impl == "moelab" and dev.type != "cuda" and dt == torch.bfloat16:
        raise UserError("--impl moelab on the CPU (the Triton interpreter) cannot run bf16: its tensor-core kernels "
                        "would give garbage there; pass --dtype fp32 or fp16")
    if max_len < 1:
        raise UserError(f"context length must be at least 1, got {max_len}")
    if batch < 1:
        raise UserError(f"batch must be at least 1, got {batch}")
    if cfg.max_positions and max_len > cfg.max_positions:
        raise UserError(f"context {max_len} exceeds the model's max_position_embeddings {cfg.max_positions}")
    cache_bytes = KVCache.nbytes(cfg, batch, max_len, dt)
    if random:
        w = random_weights(cfg, dt, dev, seed=seed, reserve_bytes=cache_bytes)
    else:
        w = load_checkpoint(cfg, weights, dt, dev, reserve_bytes=cache_bytes)
    eng = Engine(cfg, w, batch=batch, max_len=max_len, impl=impl, sampling=sampling, use_graphs=use_graphs,
                 keep_logits=keep_logits)
    eng.spec = spec  # the roofline's view of the same model, for the run summary
    return eng
