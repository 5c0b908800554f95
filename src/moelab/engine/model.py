"""The forward pass, built from `moelab.ops` so `impl="eager"` and `impl="moelab"` run the same code.

A decoder layer is a token mixer (attention, or Qwen3.5's Gated DeltaNet; MLA would be a new `MIXERS` entry)
followed by an MLP (routed experts, optionally a shared expert, or dense), each behind a fused residual-add +
RMSNorm. Tokens travel flat: prefill is [B·P, H] (B prompts of P tokens), decode [B, H].

Which code runs where:
  * norms, q/k norm + RoPE, decode attention (at decode one op with the q/k prologue and the KV-cache append),
    router + routing, experts: `ops.get(name, impl)`;
  * dense projections (qkv, o, lm_head, dense MLPs, the router's logits beyond `fused_router_max_t(E)` rows, 8 or 1):
    `moelab.ops.linear.dense_for(impl)` — moelab's decode kernel up to 16 rows (the GEMV below 4, its tensor-core
    form from 4; cuBLAS was at 32-48 % of the floor on qkv/o in the H200 profile, docs/worklog.md), cuBLAS above
    and for prefill; plain `F.linear` under impl="eager";
  * prefill attention (many query tokens, causal): `prefill_attention_sdpa` below, torch's SDPA —
    a prefill attention kernel is out of this round's scope;
  * Gated DeltaNet (`GatedDeltaNet`): its projections on `dense`, the conv, the recurrence and the gated norm
    `ops.get(name, impl)` (moelab: one launch each, at decode and in a prefill, where each walks the prompt's tokens
    in order with the state in registers; no chunked form of the rule yet).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from moelab import ops
from moelab.engine.cache import KVCache
from moelab.engine.config import ATTENTION, LINEAR, EngineConfig
from moelab.kernels import env_int
from moelab.kernels.router import fused_router_max_t
from moelab.ops.attention import qkv_release_stages
from moelab.ops.linear import DENSE_MAX_T, dense_for

# The post-attention norm inside the router's launch (`MoE.with_norm`) up to this many rows (and fused_router_max_t(E)).
# H200, session 22, benchmarks/ab_chain.py, three rounds: batch 1 2.364 → 2.344 ms a token (ab-chain-…T174526; predicted
# −0.03..−0.06), batch 8 7.515 → 7.550 (…T174604: lost, each of the 128 router programs normalising 8 rows). The bf16
# tokens differ from the two launches' (the sum of squares reduces in another layout); in fp32 the engine matches
# transformers either way (tests/engine/test_generate.py). $MOELAB_NORM_ROUTER_MAX_T (read at each call) overrides it.
NORM_ROUTER_MAX_T = 1

# The Gated DeltaNet's causal conv inside its input projection's launch at decode (`linear(conv=...)`: the GEMV's
# epilogue convolves the q/k/v columns and advances the conv window) up to this many rows: one launch fewer a
# linear-attention layer (30 a step at Qwen3.5-35B-A3B). Predicted (session 29) batch 1 −0.03..−0.06 ms a token.
# Measured (benchmarks/ab_chain.py, Qwen3.5-35B-A3B, the same greedy tokens): H200 batch 1 2.35 → 2.32 ms (five rounds,
# against a second base at 2.35 ± 0.01 %, ab-chain-…T070032; three rounds, …T065815, the same); H100 2.85 → 2.83
# (h100/ab-chain-…T064458). Batch 8 lost on the H100, 8.54 → 8.70 (…T064606: the tensor-core form's epilogue), as did
# the op alone there (bench_gdn, gdn.in_proj+conv: tp=1 batch 1 20.3 → 18.8 µs, batch 8 24.9 → 29.5). So one row.
# $MOELAB_GDN_CONV_IN_PROJ (rows; 0 off; read at each call, so at graph capture) overrides it for an A/B.
GDN_CONV_IN_PROJ_MAX_T = 1


def conv_in_proj(rows: int) -> bool:
    """Whether moelab's decode of `rows` sequences runs the Gated DeltaNet conv inside the input projection's launch
    (up to GDN_CONV_IN_PROJ_MAX_T or $MOELAB_GDN_CONV_IN_PROJ rows, never beyond DENSE_MAX_T); `moelab profile`'s
    chained step follows it."""
    return rows <= min(DENSE_MAX_T, env_int("MOELAB_GDN_CONV_IN_PROJ", GDN_CONV_IN_PROJ_MAX_T))


def norm_router_max_t(E: int) -> int:
    """The most rows whose post-attention norm runs inside the router's launch: NORM_ROUTER_MAX_T, or
    $MOELAB_NORM_ROUTER_MAX_T (read at each call: an A/B switch), and never beyond fused_router_max_t(E)."""
    return min(env_int("MOELAB_NORM_ROUTER_MAX_T", NORM_ROUTER_MAX_T), fused_router_max_t(E))


def prefill_attention_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Causal GQA attention of a whole prompt: q [B,P,Hq,D], k/v [B,P,Hk,D] -> [B,P,Hq,D] (torch SDPA)."""
    g = q.shape[2] // k.shape[2]
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if g > 1:
        kt, vt = kt.repeat_interleave(g, dim=1), vt.repeat_interleave(g, dim=1)
    return F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, scale=scale).transpose(1, 2)


class DecodeStep:
    """Per-step index tensors, made once per step rather than once per layer (each is a kernel launch)."""

    def __init__(self, positions: torch.Tensor):
        self.positions = positions  # [B] int64: where each sequence's new token goes (attention reads 0 .. it)


class Attention:
    """GQA self-attention with the family's q/k treatment; K/V go to the static cache."""

    def __init__(self, cfg: EngineConfig, w: dict[str, torch.Tensor], i: int, impl: str):
        self.cfg, self.i = cfg, i
        p = f"layers.{i}."
        self.qkv, self.qkv_bias = w[p + "qkv"], w.get(p + "qkv_bias")
        self.o, self.o_bias = w[p + "o"], w.get(p + "o_bias")
        self.q_norm, self.k_norm = w.get(p + "q_norm"), w.get(p + "k_norm")
        self.scale = cfg.head_dim ** -0.5
        self.qk_norm_rope = ops.get("qk_norm_rope", impl) if cfg.qk_norm == "head" else None
        self.rope = None if cfg.qk_norm == "head" else ops.get("rope", impl)  # Qwen2, Mixtral, OLMoE
        # Decode: q/k norm + RoPE + the KV append + attention in one op (the split kernel's launch, moelab).
        self.decode_attention_kv = ops.get("decode_attention_kv", impl)
        self.rmsnorm = ops.get("rmsnorm", impl)
        self.attn_gate = ops.get("attn_gate", impl)
        self.dense = dense_for(impl)
        self.moelab = impl == "moelab"

    def full_norm(self, t: torch.Tensor, weight: torch.Tensor, which: str) -> torch.Tensor:
        """OLMoE's RMSNorm over all heads of q or k (`which`); tensor parallelism replaces it on the
        instance with a norm whose sum of squares spans every rank's heads (engine.tp)."""
        return self.rmsnorm(t, weight, self.cfg.rms_eps)

    def _project(self, x: torch.Tensor, release_early: bool = False):
        """q [T, Hq, D], k and v [T, Hk, D], gate [T, Hq, D] or None: the projection and what comes before the
        per-head norm and RoPE. With an output gate (Qwen3.5) q_proj's rows are [q | gate] per head."""
        cfg = self.cfg
        T, D = x.shape[0], cfg.head_dim
        qkv = self.dense(x, self.qkv, self.qkv_bias, release_early=release_early)  # [T, (Hq+2Hk)·D] (q ×2 with gate)
        qw = cfg.heads * D * (2 if cfg.attn_gate else 1)
        q, k, v = qkv.split([qw, cfg.kv_heads * D, cfg.kv_heads * D], dim=-1)
        if cfg.attn_gate:
            qg = q.reshape(T, cfg.heads, 2 * D)
            return qg[..., :D], k.reshape(T, cfg.kv_heads, D), v.reshape(T, cfg.kv_heads, D), qg[..., D:]
        if cfg.qk_norm == "full":  # OLMoE: one RMSNorm over all heads of the projection
            q = self.full_norm(q, self.q_norm, "q")
            k = self.full_norm(k, self.k_norm, "k")
        if cfg.clip_qkv is not None:
            c = float(cfg.clip_qkv)
            q, k, v = q.clamp(-c, c), k.clamp(-c, c), v.clamp(-c, c)
        return q.reshape(T, cfg.heads, D), k.reshape(T, cfg.kv_heads, D), v.reshape(T, cfg.kv_heads, D), None

    def _qkv(self, x: torch.Tensor, positions: torch.Tensor):
        cfg = self.cfg
        q, k, v, gate = self._project(x)
        if self.qk_norm_rope is not None:
            q, k = self.qk_norm_rope(q, k, self.q_norm, self.k_norm, positions, eps=cfg.rms_eps,
                                     rope_theta=cfg.rope_theta, rotary_dim=cfg.rotary_dim, offset=cfg.offset_norm)
        else:
            q, k = self.rope(q, k, positions, rope_theta=cfg.rope_theta, rotary_dim=cfg.rotary_dim)
        return q, k, v, gate

    def prefill(self, x: torch.Tensor, positions: torch.Tensor, batch: int, cache: KVCache) -> torch.Tensor:
        q, k, v, gate = self._qkv(x, positions)  # [B·P, H·, D]
        P = x.shape[0] // batch
        q, k, v = (t.reshape(batch, P, *t.shape[1:]) for t in (q, k, v))
        cache.write_prefill(self.i, k, v)
        out = prefill_attention_sdpa(q, k, v, self.scale).reshape(batch * P, -1)  # [B·P, Hq·D]
        return F.linear(self._gated(out, gate), self.o, self.o_bias)

    def _gated(self, out: torch.Tensor, gate: torch.Tensor | None) -> torch.Tensor:
        """Qwen3.5's attention output gate, out · sigmoid(gate) (moelab: one launch in the PDL chain)."""
        return out if gate is None else self.attn_gate(out, gate)

    def decode(self, x: torch.Tensor, step: DecodeStep, cache: KVCache) -> torch.Tensor:
        cfg = self.cfg
        # moelab at one row: qkv releases the attention split as it starts (the split reads only earlier steps' cache
        # rows and positions before its wait), with the split's stages keeping one program an SM (H200, session 37,
        # stage FV: Qwen3-30B-A3B batch 1 2.35 → 2.34 ms a token at context 392, 2.92 → 2.83 at 16k; Qwen3.5 2.18 →
        # 2.16; the rule and its records: `kernels.attention.early_release_stages`).
        stages = qkv_release_stages(x, cache.k[self.i]) if self.moelab else None
        q, k, v, gate = self._project(x, release_early=stages is not None)  # [B, H·, D]
        # q/k norm (Qwen3) or none, RoPE, the KV append and attention: one op (under impl="moelab" the split
        # kernel does the prologue, so it has no launch of its own: −70 µs per token at batch 1, docs/worklog.md).
        head_norm = cfg.qk_norm == "head"
        out = self.decode_attention_kv(q, k, v, self.q_norm if head_norm else None, self.k_norm if head_norm else None,
                                       step.positions, cache.k[self.i], cache.v[self.i], eps=cfg.rms_eps,
                                       rope_theta=cfg.rope_theta, rotary_dim=cfg.rotary_dim, scale=self.scale,
                                       offset=cfg.offset_norm, **({"num_stages": stages} if stages else {}))
        # The norm after o reads only its weight before its wait: o may release it as it starts (ops.linear.dense).
        return self.dense(self._gated(out.reshape(x.shape[0], -1), gate), self.o, self.o_bias, release_early=True)


class GatedDeltaNet:
    """Qwen3.5's (and Qwen3-Next's) linear-attention mixer: the input projection (q, k, v, z, b, a in one
    matrix), the causal conv over q/k/v with its window in the cache, the gated delta rule on the fp32 state in the
    cache, the gated RMSNorm, the output projection."""

    def __init__(self, cfg: EngineConfig, w: dict[str, torch.Tensor], i: int, impl: str):
        self.cfg, self.i = cfg, i
        p = f"layers.{i}."
        self.w_in, self.conv_w, self.w_out = w[p + "gdn_in"], w[p + "gdn_conv"], w[p + "gdn_out"]
        self.a_log, self.dt_bias, self.norm = w[p + "gdn_a_log"], w[p + "gdn_dt_bias"], w[p + "gdn_norm"]
        self.conv = ops.get("gdn_conv", impl)
        self.recurrence = ops.get("gdn_recurrence", impl)
        self.norm_gate = ops.get("gdn_norm_gate", impl)
        self.dense = dense_for(impl)
        self.linear_conv = ops.get("linear_conv", impl) if impl == "moelab" else None
        # The state's one writer in a step is this layer's recurrence of the previous step: the kernel may read it
        # before its PDL wait (`kernels.gdn.GDN_STATE_EARLY_MAX_T`).
        self.rec_kw = {"state_early": True} if impl == "moelab" else {}

    def _tokens(self, proj: torch.Tensor, cache: KVCache, convolved: bool = False) -> torch.Tensor:
        """proj [B, W] (one token) or [B, P, W] (a prompt, in order): the input projection -> the gated norm's output
        [B, (P,) Hv·Dv]; the conv window and the recurrent state advance in the cache. `convolved`: proj's q/k/v
        columns already went through the conv (`linear_conv`), which advanced the window."""
        cfg = self.cfg
        lead, nk, nv, dk, dv = proj.shape[:-1], cfg.linear_key_heads, cfg.linear_value_heads, cfg.linear_key_dim, \
            cfg.linear_value_dim
        qkv, z, b, a = proj.split([cfg.conv_channels, nv * dv, nv, nv], dim=-1)
        mixed = qkv if convolved else self.conv(qkv, cache.conv[self.i], self.conv_w)  # [B, (P,) C]
        q, k, v = mixed.split([nk * dk, nk * dk, nv * dv], dim=-1)
        o = self.recurrence(q.reshape(*lead, nk, dk), k.reshape(*lead, nk, dk), v.reshape(*lead, nv, dv), b, a,
                            self.a_log, self.dt_bias, cache.state[self.i], **self.rec_kw)
        return self.norm_gate(o, z.reshape(*lead, nv, dv), self.norm, cfg.rms_eps)

    def prefill(self, x: torch.Tensor, positions: torch.Tensor, batch: int, cache: KVCache) -> torch.Tensor:
        """The prompt from zero states: the same ops over [B, P, ...] (moelab: each a launch that walks the P tokens
        in order, the states in registers; transformers prefills with the chunked form of the same rule)."""
        cache.conv[self.i].zero_()
        cache.state[self.i].zero_()
        P = x.shape[0] // batch
        proj = F.linear(x, self.w_in).view(batch, P, -1)
        return F.linear(self._tokens(proj, cache).reshape(batch * P, -1), self.w_out)

    def decode(self, x: torch.Tensor, step: DecodeStep, cache: KVCache) -> torch.Tensor:
        if self.linear_conv is not None and conv_in_proj(x.shape[0]):
            # The conv in the GEMV's epilogue; the recurrence after it and the norm after the output projection read
            # before their waits only weights and the previous step's state, so both projections release them early.
            proj = self.linear_conv(x, self.w_in, cache.conv[self.i], self.conv_w, release_early=True)
            return self.dense(self._tokens(proj, cache, convolved=True), self.w_out, release_early=True)
        return self.dense(self._tokens(self.dense(x, self.w_in), cache), self.w_out)


class MoE:
    """Router -> top-k -> fused experts (+ the shared expert and its sigmoid gate, in the same op)."""

    def __init__(self, cfg: EngineConfig, w: dict[str, torch.Tensor], i: int, impl: str):
        p = f"layers.{i}."
        self.cfg = cfg
        self.router, self.w13, self.w2 = w[p + "router"], w[p + "w13"], w[p + "w2"]
        self.shared = ((w[p + "shared_w13"], w[p + "shared_w2"], w.get(p + "shared_gate"))
                       if cfg.shared_intermediate else None)
        self.route, self.fused_moe = ops.get("route", impl), ops.get("fused_moe", impl)
        if impl == "moelab":  # the ids come from moelab's routing kernels, in range by construction: no host check (a
            self.fused_moe = functools.partial(self.fused_moe, validate=False)  # sync per layer in an eager prefill)
        # Decode: the router logits and the routing in one launch (moelab); prefill: a GEMM, then `route`.
        self.fused_router = ops.get("router", impl) if impl == "moelab" else None
        self.norm_router = ops.get("add_rmsnorm_router", impl) if impl == "moelab" else None
        self.dense = dense_for(impl)
        self.moe_kw: dict = {}  # moelab: {"prefetch": the next layer's first weight}, set by Model

    def fuses_norm(self, rows: int) -> bool:
        """Whether the post-attention norm runs inside the router's launch (`with_norm`): moelab's kernels, up to
        `norm_router_max_t(E)` rows."""
        return self.norm_router is not None and rows <= norm_router_max_t(self.router.shape[0])

    def with_norm(self, h: torch.Tensor, residual: torch.Tensor, norm: torch.Tensor, eps: float):
        """The post-attention add + RMSNorm, the router and the experts: (out, new_residual)."""
        x, residual, weights, ids = self.norm_router(h, residual, norm, eps, self.router, self.cfg.top_k, "softmax",
                                                     self.cfg.norm_topk_prob, offset=self.cfg.offset_norm)
        return self.fused_moe(x, self.w13, self.w2, weights, ids, self.shared, **self.moe_kw), residual

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        k, renorm = self.cfg.top_k, self.cfg.norm_topk_prob
        # Decode and short prompts alike: up to fused_router_max_t(E) rows the one-launch router (the same routing).
        if self.fused_router is not None and x.shape[0] <= fused_router_max_t(self.router.shape[0]):
            weights, ids = self.fused_router(x, self.router, k, "softmax", renorm)  # [T, k]
        else:
            # Above the fused router's rows: the logits on `dense` (moelab's decode kernel up to DENSE_MAX_T rows, else
            # cuBLAS). cuBLAS took 5.3 µs for this 0.5 MB GEMV at batch 8 (trace-decode-…T131950); the batch-8 step
            # went 8.24 → 8.18 ms per token with moelab's (H200, session 8, ab-chain-…T213813) before the fused router
            # took batch 8 over (kernels/router.py).
            logits = self.dense(x, self.router)  # [T, E]
            weights, ids = self.route(logits, k, "softmax", renorm)  # [T, k]
        return self.fused_moe(x, self.w13, self.w2, weights, ids, self.shared, **self.moe_kw)


class DenseMLP:
    """SwiGLU MLP of the dense layers (Qwen MoE `mlp_only_layers` / `decoder_sparse_step`)."""

    def __init__(self, cfg: EngineConfig, w: dict[str, torch.Tensor], i: int, impl: str):
        self.w13, self.w2 = w[f"layers.{i}.mlp_w13"], w[f"layers.{i}.mlp_w2"]
        self.dense = dense_for(impl)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.dense(x, self.w13).chunk(2, dim=-1)
        return self.dense(F.silu(gate) * up, self.w2)


# Layer kinds by `layer_types` entry, each with prefill/decode methods (a Gated DeltaNet layer keeps its state in the
# cache beside the attention layers' K/V).
MIXERS = {ATTENTION: Attention, LINEAR: GatedDeltaNet}


class Model:
    """A decoder-only MoE model over the engine's weight dict (see `engine.weights`)."""

    def __init__(self, cfg: EngineConfig, weights: dict[str, torch.Tensor], impl: str = "moelab"):
        self.cfg, self.impl = cfg, impl
        self.embed = weights["embed"]
        self.final_norm = weights["norm"]
        self.lm_head = weights.get("lm_head", weights["embed"])  # tied when absent
        self.add_rmsnorm = ops.get("add_rmsnorm", impl)
        self.dense = dense_for(impl)
        self.layers = []
        for i, kind in enumerate(cfg.layer_types):
            mlp = MoE if cfg.is_moe(i) else DenseMLP
            self.layers.append((MIXERS[kind](cfg, weights, i, impl), mlp(cfg, weights, i, impl),
                                weights[f"layers.{i}.input_norm"], weights[f"layers.{i}.post_norm"]))
        if impl == "moelab":  # each MoE layer's kernel may ask L2 for the weight read after it (`moe_pairs`)
            for (_, mlp, _, _), nxt in zip(self.layers, [m for m, *_ in self.layers[1:]] + [None]):
                if isinstance(mlp, MoE):
                    w_next = self.lm_head if nxt is None else nxt.qkv if isinstance(nxt, Attention) else nxt.w_in
                    mlp.moe_kw = {"prefetch": w_next}

    def _run(self, tokens: torch.Tensor, mix) -> torch.Tensor:
        eps, off = self.cfg.rms_eps, self.cfg.offset_norm
        h, residual = F.embedding(tokens, self.embed), None  # [T, H]
        for mixer, mlp, in_norm, post_norm in self.layers:
            x, residual = self.add_rmsnorm(h, residual, in_norm, eps, offset=off)
            h = mix(mixer, x)
            if isinstance(mlp, MoE) and mlp.fuses_norm(h.shape[0]):
                h, residual = mlp.with_norm(h, residual, post_norm, eps)
                continue
            x, residual = self.add_rmsnorm(h, residual, post_norm, eps, offset=off)
            h = mlp(x)
        out, _ = self.add_rmsnorm(h, residual, self.final_norm, eps, offset=off)
        return out

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.dense(hidden, self.lm_head)

    def prefill(self, tokens: torch.Tensor, cache: KVCache, all_logits: bool = False) -> torch.Tensor:
        """tokens [B, P] at positions 0..P-1 -> logits [B, V] of the last position ([B, P, V] if all_logits).

        Fills the cache's positions 0..P-1.
        """
        B, P = tokens.shape
        positions = torch.arange(P, device=tokens.device).repeat(B)  # [B·P]
        h = self._run(tokens.reshape(-1), lambda m, x: m.prefill(x, positions, B, cache))
        h = h.view(B, P, -1)
        return self.logits(h if all_logits else h[:, -1])

    def decode(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """One new token per sequence: tokens [B] at positions [B] (device tensors) -> logits [B, V]."""
        step = DecodeStep(positions)
        return self.logits(self._run(tokens, lambda m, x: m.decode(x, step, cache)))
