"""The static KV cache: one K and one V buffer per attention layer, allocated once for batch × context."""

from __future__ import annotations

import torch

from moelab.engine.config import EngineConfig


class KVCache:
    """K/V for `batch` sequences of up to `max_len` tokens: k[layer], v[layer] are [B, Hk, S_max, D].

    [B, Hk, S, D] is the layout `ops.decode_attention` reads (and Hugging Face's static cache keeps): one
    KV head's sequence is contiguous, so a program streams it. Positions are written in place; nothing is
    ever reallocated, so the buffers' addresses stay fixed for CUDA-graph replay. A decode step's K and V are
    appended by the attention prologue itself (`ops.decode_attention_kv`).
    """

    def __init__(self, cfg: EngineConfig, batch: int, max_len: int, dtype: torch.dtype, device: torch.device):
        self.batch, self.max_len = batch, max_len
        shape = (batch, cfg.kv_heads, max_len, cfg.head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(cfg.layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(cfg.layers)]

    @staticmethod
    def nbytes(cfg: EngineConfig, batch: int, max_len: int, dtype: torch.dtype) -> int:
        return batch * max_len * cfg.kv_bytes_per_token(torch.empty((), dtype=dtype).element_size())

    def write_prefill(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """k, v: [B, P, Hk, D] for positions 0..P-1 of every sequence."""
        P = k.shape[1]
        self.k[layer][:, :, :P].copy_(k.transpose(1, 2))
        self.v[layer][:, :, :P].copy_(v.transpose(1, 2))
