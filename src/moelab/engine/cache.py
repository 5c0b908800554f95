"""The static decode state: K/V per attention layer, the conv window and recurrent state per Gated DeltaNet layer,
allocated once for batch × context."""

from __future__ import annotations

import torch

from moelab.engine.config import ATTENTION, EngineConfig


class KVCache:
    """K/V for `batch` sequences of up to `max_len` tokens: k[layer], v[layer] are [B, Hk, S_max, D] for an attention
    layer (None for a Gated DeltaNet one); conv[layer] [B, C, K-1] (activation dtype) and state[layer] [B, Hv, Dk, Dv]
    (fp32) for a Gated DeltaNet layer (None for an attention one).

    [B, Hk, S, D] is the layout `ops.decode_attention` reads (and Hugging Face's static cache keeps): one
    KV head's sequence is contiguous, so a program streams it. Positions are written in place; nothing is
    ever reallocated, so the buffers' addresses stay fixed for CUDA-graph replay. A decode step's K and V are
    appended by the attention prologue itself (`ops.decode_attention_kv`); the Gated DeltaNet ops update their
    states in place.
    """

    def __init__(self, cfg: EngineConfig, batch: int, max_len: int, dtype: torch.dtype, device: torch.device):
        self.batch, self.max_len = batch, max_len
        shape = (batch, cfg.kv_heads, max_len, cfg.head_dim)
        attn = [t == ATTENTION for t in cfg.layer_types]
        self.k = [torch.zeros(shape, dtype=dtype, device=device) if a else None for a in attn]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) if a else None for a in attn]
        conv = (batch, cfg.conv_channels, cfg.linear_conv - 1)
        state = (batch, cfg.linear_value_heads, cfg.linear_key_dim, cfg.linear_value_dim)
        self.conv = [None if a else torch.zeros(conv, dtype=dtype, device=device) for a in attn]
        self.state = [None if a else torch.zeros(state, dtype=torch.float32, device=device) for a in attn]
        # The Gated DeltaNet states as the prefill left them: every decode run starts from them (a second run from
        # the same prefill must not continue from where the first stopped, as K/V positions never do).
        self._at_prefill = [t.clone() for t in self.linear_states()]

    @staticmethod
    def nbytes(cfg: EngineConfig, batch: int, max_len: int, dtype: torch.dtype) -> int:
        """K/V, and the Gated DeltaNet states twice (the live ones and the prefill's copy)."""
        elem = torch.empty((), dtype=dtype).element_size()
        return batch * (max_len * cfg.kv_bytes_per_token(elem) + 2 * cfg.linear_state_bytes(elem))

    def write_prefill(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """k, v: [B, P, Hk, D] for positions 0..P-1 of every sequence."""
        P = k.shape[1]
        self.k[layer][:, :, :P].copy_(k.transpose(1, 2))
        self.v[layer][:, :, :P].copy_(v.transpose(1, 2))

    def linear_states(self) -> list[torch.Tensor]:
        """Every Gated DeltaNet state tensor (what a decode step advances in place, unlike K/V's new positions)."""
        return [t for t in self.conv + self.state if t is not None]

    def keep_prefill_states(self) -> None:
        """Remember the Gated DeltaNet states the prefill left (device copies: no host sync)."""
        for dst, src in zip(self._at_prefill, self.linear_states()):
            dst.copy_(src)

    def restore_prefill_states(self) -> None:
        """Back to the states the prefill left: a decode run, or the CUDA graph's warm-up steps, advanced them."""
        for dst, src in zip(self.linear_states(), self._at_prefill):
            dst.copy_(src)
