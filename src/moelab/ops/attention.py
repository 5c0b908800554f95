"""Decode attention against a KV cache: the plain-torch reference.

Layout (HF static cache): k_cache, v_cache [B, Hk, S_max, D]; sequence b holds `seq_lens[b]` valid tokens at
positions 0 .. seq_lens[b]-1, and its Q new query tokens are the last Q of them (already written to the cache),
so query i sits at position `seq_lens[b] - Q + i` and attends causally to keys at positions <= its own.
GQA: query head h reads KV head h // (Hq // Hk).

Optional: `sinks` [Hq] (gpt-oss attention sinks: one extra logit per head in the softmax denominator, with no value)
and `window` (sliding window: a query at position p sees keys p-window+1 .. p, as HF's sliding mask does).

The reference computes scores and the weighted sum in fp32 over the whole cache with a mask, so it needs no host
sync (it is CUDA-graph capturable); it reads the full S_max, which is fine for a reference.
"""

from __future__ import annotations

import math

import torch

from moelab import ops
from moelab.kernels import env_int
from moelab.kernels.attention import decode_attention as _decode_attention_kernel
from moelab.kernels.attention import decode_attention_kv as _decode_attention_kv_kernel
from moelab.kernels.attention import early_release_stages, sm_count
from moelab.kernels.gate import attn_gate as _attn_gate_kernel
from moelab.kernels.rope import check_kv_args
from moelab.ops.linear import releases_early


def decode_attention_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    scale: float | None = None,
    sinks: torch.Tensor | None = None,
    window: int | None = None,
) -> torch.Tensor:
    """softmax(q·Kᵀ·scale [+ sink]) · V per sequence, fp32 accumulate, output in q's dtype.

    Shapes: q [B, Hq, D] (one new token) or [B, Q, Hq, D]; k_cache/v_cache [B, Hk, S_max, D];
    seq_lens [B] (int, each in [Q, S_max]); sinks [Hq] or None. Returns q's shape.
    `scale` defaults to 1/sqrt(D).
    """
    one_token = q.dim() == 3
    q4 = q.unsqueeze(1) if one_token else q  # [B, Q, Hq, D]
    b, nq, hq, d = q4.shape
    hk, s_max = k_cache.shape[1], k_cache.shape[2]
    g = hq // hk
    scale = 1.0 / math.sqrt(d) if scale is None else scale

    # [B, Hk, G*Q, D]: the query rows that share one KV head, so K and V are never repeated.
    qf = q4.float().permute(0, 2, 1, 3).reshape(b, hk, g * nq, d)
    scores = torch.matmul(qf, k_cache.float().transpose(-1, -2)) * scale  # [B, Hk, G*Q, S_max]
    scores = scores.view(b, hk, g, nq, s_max)

    lens = seq_lens.to(device=q.device, dtype=torch.int64)
    qpos = lens[:, None] - nq + torch.arange(nq, device=q.device)[None, :]  # [B, Q]
    kpos = torch.arange(s_max, device=q.device)
    visible = kpos[None, None, :] <= qpos[:, :, None]  # [B, Q, S_max]
    if window is not None:
        visible &= kpos[None, None, :] > qpos[:, :, None] - window
    scores = scores.masked_fill(~visible[:, None, None], float("-inf"))

    if sinks is not None:
        sink = sinks.float().view(1, hk, g, 1, 1).expand(b, hk, g, nq, 1)
        probs = torch.softmax(torch.cat((scores, sink), dim=-1), dim=-1)[..., :-1]
    else:
        probs = torch.softmax(scores, dim=-1)

    out = torch.matmul(probs.view(b, hk, g * nq, s_max), v_cache.float())  # [B, Hk, G*Q, D]
    out = out.view(b, hk, g, nq, d).permute(0, 3, 1, 2, 4).reshape(b, nq, hq, d).to(q.dtype)
    return out[:, 0] if one_token else out


ops.register(
    "decode_attention",
    decode_attention_reference,
    _decode_attention_kernel,
    doc="Flash-decoding attention over a [B, Hk, S_max, D] KV cache with per-sequence lengths, GQA, "
    "optional sinks and sliding window.",
)


def decode_attention_kv_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_weight: torch.Tensor | None,
    k_weight: torch.Tensor | None,
    positions: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    *,
    eps: float,
    rope_theta: float,
    rotary_dim: int | None = None,
    offset: bool = False,
    scale: float | None = None,
    sinks: torch.Tensor | None = None,
    window: int | None = None,
) -> torch.Tensor:
    """A decode step's attention from the raw q, k, v [B, H·, D] of the projection: the q/k prologue with the KV
    append (`qk_norm_rope_kv`), then attention over positions 0 .. positions[b]. The two references, composed."""
    from moelab.ops.rope import qk_norm_rope_kv_reference  # ops.rope imports nothing from here; no cycle either way

    check_kv_args("decode_attention_kv", k_cache, v_cache, k, v, positions)  # errors named after this op
    q = qk_norm_rope_kv_reference(q, k, v, q_weight, k_weight, positions, k_cache, v_cache, eps=eps,
                                  rope_theta=rope_theta, rotary_dim=rotary_dim, offset=offset)
    return decode_attention_reference(q, k_cache, v_cache, positions + 1, scale=scale, sinks=sinks, window=window)


ops.register(
    "decode_attention_kv",
    decode_attention_kv_reference,
    _decode_attention_kv_kernel,
    doc="Decode: q/k RMSNorm (optional) + RoPE + the KV append + flash-decoding attention, in the split kernel's "
    "launch (and the combine's).",
)


def qkv_release_stages(x: torch.Tensor, k_cache: torch.Tensor) -> int | None:
    """moelab's decode step (the engine's and `moelab profile`'s chained step): the attention split's pipeline stages
    when the qkv projection of x [B, H] releases it as qkv starts, or None where qkv does not release it early. The
    rows rule is the other projections' (`ops.linear.releases_early`: one row), the placement rule the split's own
    (`kernels.attention.early_release_stages`, at the cache's length, k_cache [B, Hk, S_max, D]).
    $MOELAB_QKV_EARLY_RELEASE=0 (an A/B switch, read at each call) turns it off."""
    if not releases_early(x, bool(env_int("MOELAB_QKV_EARLY_RELEASE", 1))):
        return None
    b, hk, s_max, d = k_cache.shape
    return early_release_stages(b, hk, s_max, d, k_cache.element_size(), sm_count(k_cache.device))


def attn_gate_reference(out: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """Qwen3.5 / Qwen3-Next attention output gate, as transformers: `out * torch.sigmoid(gate)` in the activation
    dtype. out [T, H·D], gate [T, H, D] -> [T, H·D]."""
    return out * torch.sigmoid(gate.reshape(out.shape))


ops.register("attn_gate", attn_gate_reference, _attn_gate_kernel,
             doc="Qwen3.5's attention output gate out · sigmoid(gate), one launch in the decode step's PDL chain.")
