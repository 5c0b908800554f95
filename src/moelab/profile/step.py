"""The chained decode step: the layers run one after another as the model runs them, on random weights at
the real (tensor-parallel-sharded) shapes, with the very callables the per-op units time (`LayerFns`).

Data flows for real: embedding -> per layer [add+RMSNorm, mixer (attention with its KV cache, or Gated
DeltaNet with its conv and recurrent state), add+RMSNorm, MoE or MLP] -> final norm -> lm_head -> argmax.
All-reduces are not run (one GPU): the breakdown adds their estimate beside the measured step.

When the whole model does not fit in the memory budget, `ChainedStep` builds the first `built` layers
(a whole number of the model's layer pattern, e.g. 3 Gated DeltaNet + 1 attention) and the caller
scales: step ≈ head + layers(built) × layers / built, where head is the embedding, final norm, lm_head
and sampling chain timed on its own. `scaled` says so.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from moelab.engine.model import conv_in_proj, norm_router_max_t
from moelab.kernels.router import fused_router_max_t
from moelab.models import ModelSpec
from moelab.profile.impls import Dims, LayerFns, Rand, swiglu


def layer_bytes(spec: ModelSpec, d: Dims, i: int, elt: int = 2) -> int:
    """Bytes layer i allocates here (all experts, not only those a token reads; caches and states)."""
    n = 2 * d.H
    if spec.layer_types[i] == "linear_attention":
        inp = 2 * d.nk * d.dk + 2 * d.nv * d.dv + 2 * d.nv
        n += inp * d.H + d.nv * d.dv * d.H + d.gdn_ch * d.conv + d.dv + 2 * d.nv + d.B * d.gdn_ch * (d.conv - 1)
        n += 2 * d.B * d.nv * d.dk * d.dv  # fp32 state: 2 elements' worth of bf16
    else:
        n += (d.q_out + 2 * d.nkv * d.hd) * d.H + d.nq * d.hd * d.H + 2 * d.hd + 2 * d.B * d.nkv * d.S * d.hd
    if spec.moe_layers[i]:
        n += d.E * d.H + 3 * d.E * d.I * d.H + 3 * d.si * d.H + (d.H if d.shared_gate else 0)
    else:
        n += 3 * d.dense_I * d.H
    return n * elt


def head_bytes(d: Dims, elt: int = 2) -> int:
    return (d.vocab * d.H + d.vocab_local * d.H + d.H) * elt


def pattern_period(spec: ModelSpec) -> int:
    """The shortest p such that layer kinds (mixer, MoE or dense) repeat every p layers."""
    kinds = list(zip(spec.layer_types, spec.moe_layers))
    for p in range(1, len(kinds) + 1):
        if all(kinds[i] == kinds[i % p] for i in range(len(kinds))):
            return p
    return len(kinds)


def layers_that_fit(spec: ModelSpec, d: Dims, budget_bytes: int) -> int:
    """All layers if they fit in `budget_bytes` beside the head; else the largest whole number of layer
    patterns that does (at least one pattern: the caller reports it if even that does not fit)."""
    per = [layer_bytes(spec, d, i) for i in range(spec.layers)]
    if sum(per) + head_bytes(d) <= budget_bytes:
        return spec.layers
    p = pattern_period(spec)
    one = sum(per[:p])
    return max(p, p * int((budget_bytes - head_bytes(d)) // max(one, 1)))


class ChainedStep:
    """`built` layers of `spec` (+ the head when `with_head`) chained on random weights; `bind` an
    implementation, then call it to run one decode step."""

    def __init__(self, spec: ModelSpec, d: Dims, built: int, device: torch.device, dtype: torch.dtype, *,
                 with_head: bool = True, with_layers: bool = True, seed: int = 1):
        self.spec, self.d = spec, d
        self.built, self.with_head, self.with_layers = built, with_head, with_layers
        r = Rand(device, dtype, seed)
        self.tok = torch.randint(0, d.vocab, (d.B,), device=device, generator=r.gen)
        self.positions = r.positions(d)
        self.hidden0 = r.t(d.B, d.H)
        if with_head:
            self.embed, self.lm_head, self.final_norm = r.t(d.vocab, d.H), r.w(d.vocab_local, d.H), 1.0 + 0.1 * r.t(d.H)
        self.layers = [self._weights(r, i) for i in range(built)] if with_layers else []
        # As the engine (engine.model.Model): each MoE layer hands its experts the weight read after it, the next
        # layer's first projection or lm_head, which moelab's MoE kernels may ask L2 for while the router runs.
        for w, nxt in zip(self.layers, self.layers[1:] + [None]):
            if w["moe"]:
                w["next"] = (self.lm_head if with_head else None) if nxt is None else nxt.get("qkv", nxt.get("in_proj"))
        self.f: LayerFns | None = None
        self._layer = self._run_layer
        # Gated DeltaNet states change at every call: kept to restore before a correctness comparison.
        self._states0 = [(w["conv_state"].clone(), w["state"].clone()) for w in self.layers if "state" in w]

    def bind(self, fns: LayerFns, compile_layers: bool = False) -> ChainedStep:
        """Run the chain with `fns` (one implementation's callables); `compile_layers`: torch.compile the
        layer function (compiled once per layer kind; weights are arguments, so layers share it)."""
        self.f = fns
        self._layer = torch.compile(self._run_layer) if compile_layers else self._run_layer
        return self

    def _weights(self, r: Rand, i: int) -> dict:
        s, d = self.spec, self.d
        w: dict = {"kind": s.layer_types[i], "moe": s.moe_layers[i],
                   "in_norm": 1.0 + 0.1 * r.t(d.H), "post_norm": 1.0 + 0.1 * r.t(d.H)}
        if w["kind"] == "linear_attention":
            w.update(in_proj=r.w(2 * d.nk * d.dk + 2 * d.nv * d.dv + 2 * d.nv, d.H), out_proj=r.w(d.H, d.nv * d.dv),
                     conv_w=r.w(d.gdn_ch, d.conv), conv_state=r.t(d.B, d.gdn_ch, d.conv - 1),
                     a_log=r.t(d.nv, scale=0.1), dt_bias=r.t(d.nv, scale=0.1), norm=1.0 + 0.1 * r.t(d.dv),
                     state=r.t(d.B, d.nv, d.dk, d.dv, scale=0.01, dtype=torch.float32))
        else:
            nw_q = d.hd if d.qk_norm == "head" else d.nq * d.hd
            nw_k = d.hd if d.qk_norm == "head" else d.nkv * d.hd
            w.update(qkv=r.w(d.q_out + 2 * d.nkv * d.hd, d.H), o=r.w(d.H, d.nq * d.hd),
                     q_norm=1.0 + 0.1 * r.t(nw_q), k_norm=1.0 + 0.1 * r.t(nw_k),
                     k_cache=r.t(d.B, d.nkv, d.S, d.hd), v_cache=r.t(d.B, d.nkv, d.S, d.hd))
        if w["moe"]:
            w.update(router=r.w(d.E, d.H), w13=r.w(d.E, 2 * d.I, d.H), w2=r.w(d.E, d.H, d.I), shared=None)
            if d.si:
                w["shared"] = (r.w(2 * d.si, d.H), r.w(d.H, d.si), r.w(1, d.H) if d.shared_gate else None)
        else:
            w.update(mlp_w13=r.w(2 * d.dense_I, d.H), mlp_w2=r.w(d.H, d.dense_I))
        return w

    def _attention(self, x: torch.Tensor, w: dict) -> torch.Tensor:
        d, f = self.d, self.f
        stages = f.qkv_release(x, w["k_cache"])  # as the engine: qkv releases the split early (moelab, one row)
        qkv = self.f.dense(x, w["qkv"], release_early=stages is not None)  # [B, q_out + 2·Hk·D]
        q, k, v = qkv.split([d.q_out, d.nkv * d.hd, d.nkv * d.hd], dim=-1)
        gate = None
        if d.gate:  # Qwen3-Next: per head [q | gate]
            q, gate = q.reshape(d.B, d.nq, 2 * d.hd).chunk(2, dim=-1)  # gate [B, nq, hd], a view
        q = q.reshape(d.B, d.nq, d.hd)
        k, v = k.reshape(d.B, d.nkv, d.hd), v.reshape(d.B, d.nkv, d.hd)
        out = f.attention_kv(q, k, v, w["q_norm"], w["k_norm"], self.positions, w["k_cache"], w["v_cache"],
                             num_stages=stages)
        out = out.reshape(d.B, -1)
        if gate is not None:
            out = f.attn_gate(out, gate)
        return self.f.dense(out, w["o"], release_early=True)  # as the engine: the norm after o released as it starts

    def _gdn(self, x: torch.Tensor, w: dict) -> torch.Tensor:
        d = self.d
        fused = self.f.linear_conv is not None and conv_in_proj(d.B)  # the conv in the projection's launch, as the engine
        proj = (self.f.linear_conv(x, w["in_proj"], w["conv_state"], w["conv_w"], release_early=True) if fused
                else self.f.dense(x, w["in_proj"]))
        qkv, z, b, a = proj.split(  # q, k, v adjacent: the conv reads the view, as the engine
            [2 * d.nk * d.dk + d.nv * d.dv, d.nv * d.dv, d.nv, d.nv], dim=-1)
        mixed = qkv if fused else self.f.gdn_conv(qkv, w["conv_state"], w["conv_w"])
        q, k, v = mixed.split([d.nk * d.dk, d.nk * d.dk, d.nv * d.dv], dim=-1)
        o = self.f.gdn_recurrence(q.reshape(d.B, d.nk, d.dk), k.reshape(d.B, d.nk, d.dk), v.reshape(d.B, d.nv, d.dv),
                           b, a, w["a_log"], w["dt_bias"], w["state"], **self.f.rec_kw)
        o = self.f.gdn_norm_gate(o, z.reshape(d.B, d.nv, d.dv), w["norm"], d.eps)
        return self.f.dense(o, w["out_proj"], release_early=True)

    def _mlp(self, x: torch.Tensor, w: dict) -> torch.Tensor:
        if not w["moe"]:
            return swiglu(x, w["mlp_w13"], w["mlp_w2"])
        if x.shape[0] <= fused_router_max_t(w["router"].shape[0]):  # the engine's decode path
            topk_w, ids = self.f.router(x, w["router"])
        else:
            topk_w, ids = self.f.route(self.f.dense(x, w["router"]))  # as the engine: `dense` for the logits
        return self.f.experts(x, w["w13"], w["w2"], topk_w, ids, w["shared"], w["next"])

    def _run_layer(self, h, residual, w):
        x, residual = self.f.add_rmsnorm(h, residual, w["in_norm"])
        h = self._gdn(x, w) if w["kind"] == "linear_attention" else self._attention(x, w)
        if self.f.impl == "moelab" and w["moe"] and h.shape[0] <= norm_router_max_t(w["router"].shape[0]):
            # As the engine (MoE.with_norm): the post-attention norm inside the router's launch.
            x, residual, topk_w, ids = self.f.norm_router(h, residual, w["post_norm"], w["router"])
            return self.f.experts(x, w["w13"], w["w2"], topk_w, ids, w["shared"], w["next"]), residual
        x, residual = self.f.add_rmsnorm(h, residual, w["post_norm"])
        return self._mlp(x, w), residual

    def output(self) -> torch.Tensor:
        """The final hidden state (before lm_head) from the initial recurrent states, in fp32: what two
        implementations' chains are compared on. (The KV write goes to the same position every call.)"""
        for w, (c0, s0) in zip([w for w in self.layers if "state" in w], self._states0):
            w["conv_state"].copy_(c0)
            w["state"].copy_(s0)
        h = F.embedding(self.tok, self.embed) if self.with_head else self.hidden0
        residual = torch.zeros_like(h)
        for w in self.layers:
            h, residual = self._layer(h, residual, w)
        if self.with_head:
            h, _ = self.f.add_rmsnorm(h, residual, self.final_norm)
        else:
            h = h + residual
        return h.float()

    def __call__(self) -> torch.Tensor:
        h = F.embedding(self.tok, self.embed) if self.with_head else self.hidden0
        residual = torch.zeros_like(h)
        for w in self.layers:
            h, residual = self._layer(h, residual, w)
        if not self.with_head:
            return h
        x, _ = self.f.add_rmsnorm(h, residual, self.final_norm)
        return self.f.dense(x, self.lm_head).argmax(-1)
