"""The decode-step op graph: every op one decode step runs, with shapes, count, bytes and FLOPs.

`decode_step_ops(spec, batch, ctx, tp, dtype)` walks the layers of a `ModelSpec` and returns the ops
in execution order, identical ops merged (one entry per distinct op, `count` = how many times a step
runs it). Everything is per GPU: with tp > 1 the shapes are one rank's shard and the step time is the
slowest rank's, which under even sharding is any rank's.

Conventions (the numbers the roofline divides):
- bytes per call = weights read once + activations read and written + KV cache/state read and written;
  weights in `dtype` (bf16: 2 B, fp8: 1 B) for the linear layers of attention, experts and MLPs;
  the embedding, lm_head, router, norms, activations and KV cache stay bf16 (2 B), as published fp8
  checkpoints keep them; linear-attention recurrent state is fp32 (4 B).
- FLOPs per call = 2 · multiply-accumulates.
- kind: "compute" = a matmul that runs on the tensor cores (its floor may be FLOP-bound);
  "memory" = elementwise / norm / scan work whose floor is its bytes; "comm" = a collective, whose
  `bytes` are the bytes each rank puts on the wire (ring all-reduce 2(tp−1)/tp · message,
  all-gather (tp−1)/tp · message) — what NCCL's "bus bandwidth" is defined against.
- Tensor parallel: attention by heads (KV heads replicated when fewer than tp), Gated DeltaNet by
  heads, routed and shared experts and dense MLPs along their intermediate dimension, lm_head by
  vocabulary (ceil(V/tp) rows, then an all-gather of the logits); the router, the embedding and
  MLA's down-projections (q_a, kv_a) are replicated. One all-reduce after attention and one after the
  MLP/MoE block per layer.
- MLA (DeepSeek) decode is modelled in its weight-absorbed form (as FlashMLA-style kernels run it): the
  cache holds the kv_lora_rank + rope latent per token, kv_b_proj is applied as W_UK to q and W_UV to
  the attention output.
- Routed experts read `distinct_experts` experts' weights per layer. Unless measured, it is the
  expected number of distinct experts hit by B tokens each picking k of E uniformly:
  E · (1 − (1 − k/E)^B)  (k at B = 1; E as B grows). Real routing is skewed, so a measured count
  (pass `distinct_experts`) is better; DeepSeek's group-limited routing is not modelled.
- The activation (SiLU·mul) is counted fused into `experts.gate_up`, the weighted top-k sum into
  `experts.down`; the KV append into `attention`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from moelab.errors import UserError
from moelab.models.spec import ModelSpec

GROUPS = ("moe", "attention", "norm", "lm_head", "linear_attention", "embedding", "communication", "other")
KINDS = ("memory", "compute", "comm")
WEIGHT_BYTES = {"bf16": 2, "fp8": 1}
A = 2  # bytes per activation / KV-cache element (bf16)
STATE = 4  # bytes per Gated DeltaNet recurrent-state element (fp32)


@dataclass(frozen=True)
class Op:
    """One op of a decode step. `bytes` and `flops` are per call; a step runs it `count` times."""

    name: str
    group: str  # one of GROUPS
    kind: str  # one of KINDS
    count: int
    bytes: int
    flops: int
    shapes: dict[str, Any] = field(default_factory=dict)
    weight_bytes: int = 0  # the part of `bytes` that is weights
    cache_bytes: int = 0  # the part of `bytes` that is KV cache / recurrent state
    dtype: str = "bf16"  # the matmul's weight dtype (decides which matmul rate bounds it)
    note: str = ""

    @property
    def step_bytes(self) -> int:
        return self.bytes * self.count

    @property
    def step_flops(self) -> int:
        return self.flops * self.count

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def expected_distinct_experts(num_experts: int, top_k: int, tokens: int) -> float:
    """E · (1 − (1 − k/E)^T): the expected number of distinct experts T tokens hit, each choosing k of E
    uniformly at random (T = 1 gives k; large T gives E)."""
    if tokens <= 0:
        return 0.0
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


class _Step:
    """Collects ops in first-seen order, merging repeats of the same op into its count."""

    def __init__(self) -> None:
        self.ops: dict[str, Op] = {}

    def add(self, name: str, group: str, kind: str, *, bytes: float, flops: float = 0, shapes: dict,
            weight_bytes: float = 0, cache_bytes: float = 0, dtype: str = "bf16", note: str = "") -> None:
        op = Op(name, group, kind, 1, round(bytes), round(flops), shapes, round(weight_bytes),
                round(cache_bytes), dtype, note)
        old = self.ops.get(name)
        if old is None:
            self.ops[name] = op
            return
        if (old.bytes, old.flops, old.shapes) != (op.bytes, op.flops, op.shapes):
            raise AssertionError(f"op {name!r} emitted twice with different shapes: {old.shapes} vs {op.shapes}")
        self.ops[name] = Op(**{**asdict(old), "count": old.count + 1})

    def linear(self, name: str, group: str, b: int, k: int, n: int, wdtype: str, *, bias: bool = False,
               matrices: int = 1, rows: int | None = None, note: str = "") -> None:
        """y[rows, n] = x[rows, k] · W[k, n]; `matrices` weights of [k, n] read once each (per-head
        matrices, MLA's absorbed kv_b_proj); rows defaults to b."""
        rows = b if rows is None else rows
        w = matrices * (k * n * WEIGHT_BYTES[wdtype] + (n * A if bias else 0))
        self.add(name, group, "compute", bytes=w + rows * (k + n) * A, flops=2 * rows * k * n,
                 shapes={"M": rows, "K": k, "N": n, **({"matrices": matrices} if matrices != 1 else {})},
                 weight_bytes=w, dtype=wdtype, note=note)

    def rmsnorm(self, name: str, b: int, width: int, *, add: bool, group: str = "norm", note: str = "") -> None:
        # add=True: residual += x, then y = rmsnorm(residual) — reads two vectors, writes two
        vecs_in, vecs_out = (2, 2) if add else (1, 1)
        self.add(name, group, "memory", bytes=b * width * A * (vecs_in + vecs_out) + width * A,
                 flops=b * width * (5 if add else 4), shapes={"M": b, "N": width, "residual_add": add},
                 weight_bytes=width * A, note=note)

    def elementwise(self, name: str, group: str, *, read: float, write: float, flops: float, shapes: dict,
                    weight_bytes: float = 0, cache_bytes: float = 0, note: str = "") -> None:
        self.add(name, group, "memory", bytes=read + write, flops=flops, shapes=shapes,
                 weight_bytes=weight_bytes, cache_bytes=cache_bytes, note=note)

    def allreduce(self, name: str, b: int, hidden: int, tp: int) -> None:
        msg = b * hidden * A
        self.add(name, "communication", "comm", bytes=2 * (tp - 1) / tp * msg, shapes={"M": b, "N": hidden,
                 "message_bytes": msg, "tp": tp}, note="ring all-reduce: 2(tp-1)/tp x message on the wire")


def _shard(what: str, n: int, tp: int) -> int:
    if n % tp:
        raise UserError(f"--tp {tp} does not divide {what} ({n})")
    return n // tp


def decode_step_ops(spec: ModelSpec, batch: int = 1, ctx: int = 1024, tp: int = 1, dtype: str = "bf16",
                    distinct_experts: float | None = None) -> list[Op]:
    """The ops of one decode step of `spec`: `batch` sequences, each attending to `ctx` cached tokens,
    on one of `tp` tensor-parallel ranks, weights in `dtype` ("bf16" or "fp8").

    `distinct_experts`: experts whose weights one MoE layer reads (measured); default: the expected
    number E · (1 − (1 − k/E)^B). Returns ops in execution order (see the module docstring for what
    bytes/FLOPs count). Bad arguments raise `UserError`.
    """
    if not isinstance(batch, int) or batch < 1:
        raise UserError(f"--batch must be a positive integer, got {batch!r}")
    if not isinstance(ctx, int) or ctx < 1:
        raise UserError(f"--ctx must be a positive integer, got {ctx!r}")
    if not isinstance(tp, int) or tp < 1:
        raise UserError(f"--tp must be a positive integer, got {tp!r}")
    if dtype not in WEIGHT_BYTES:
        raise UserError(f"--dtype must be one of {', '.join(WEIGHT_BYTES)}, got {dtype!r}")
    if spec.is_moe:
        hi = min(spec.num_experts, batch * spec.top_k)
        if distinct_experts is None:
            distinct_experts = expected_distinct_experts(spec.num_experts, spec.top_k, batch)
        elif not spec.top_k <= distinct_experts <= hi:
            raise UserError(f"distinct experts must be between k={spec.top_k} and {hi} for batch {batch}, "
                            f"got {distinct_experts}")
    s, b, h = spec, batch, spec.hidden
    st = _Step()
    st.elementwise("embedding", "embedding", read=b * h * A + b * 8, write=b * h * A, flops=0,
                   shapes={"M": b, "N": h, "vocab": s.vocab}, note="row gather; table replicated on every rank")
    for i in range(s.layers):
        st.rmsnorm("add_rmsnorm", b, h, add=True, note="input and post-attention norms of every layer")
        kind = s.layer_types[i]
        if kind == "linear_attention":
            _gdn(st, s, b, tp, dtype)
        elif s.attention == "mla":
            _mla(st, s, b, ctx, tp, dtype)
        else:
            _gqa(st, s, b, ctx, tp, dtype, sliding=kind == "sliding_attention")
        if tp > 1:
            st.allreduce("allreduce.attention", b, h, tp)
        st.rmsnorm("add_rmsnorm", b, h, add=True)
        if s.moe_layers[i]:
            _moe(st, s, b, tp, dtype, distinct_experts)
            if tp > 1:
                st.allreduce("allreduce.moe", b, h, tp)
        else:
            inter = _shard("intermediate_size", s.dense_intermediate, tp)
            st.linear("mlp.gate_up", "other", b, h, 2 * inter, dtype, note="dense MLP; SiLU-mul fused")
            st.linear("mlp.down", "other", b, inter, h, dtype)
            if tp > 1:
                st.allreduce("allreduce.mlp", b, h, tp)
    st.rmsnorm("final_norm", b, h, add=True)
    v_local = math.ceil(s.vocab / tp)
    st.linear("lm_head", "lm_head", b, h, v_local, "bf16",
              note="vocabulary-parallel" if tp > 1 else "")
    if tp > 1:
        msg = b * v_local * tp * A
        st.add("allgather.logits", "communication", "comm", bytes=(tp - 1) / tp * msg,
               shapes={"M": b, "N": v_local * tp, "message_bytes": msg, "tp": tp},
               note="all-gather of the vocabulary shards: (tp-1)/tp x message on the wire")
    st.elementwise("sample.argmax", "other", read=b * s.vocab * A, write=b * 8, flops=b * s.vocab,
                   shapes={"M": b, "N": s.vocab}, note="greedy sampling")
    return list(st.ops.values())


def _gqa(st: _Step, s: ModelSpec, b: int, ctx: int, tp: int, dtype: str, *, sliding: bool) -> None:
    hd, h = s.head_dim, s.hidden
    nq = _shard("num_attention_heads", s.heads, tp)
    nkv = _shard("num_key_value_heads", s.kv_heads, tp) if s.kv_heads >= tp else 1
    q_out = nq * hd * (2 if s.attn_output_gate else 1)
    st.linear("qkv_proj", "attention", b, h, q_out + 2 * nkv * hd, dtype, bias=s.attn_bias,
              note="q also carries the output gate" if s.attn_output_gate else "")
    if s.qk_norm != "none":
        vec = b * (nq + nkv) * hd * A
        w = 2 * hd * A if s.qk_norm == "head" else (nq + nkv) * hd * A
        st.elementwise("qk_norm", "norm", read=vec + w, write=vec, flops=4 * b * (nq + nkv) * hd,
                       shapes={"M": b, "heads": nq + nkv, "D": hd, "over": s.qk_norm}, weight_bytes=w,
                       note="RMSNorm over all heads needs the full q/k: a gather under tp"
                       if s.qk_norm == "full" and tp > 1 else "")
    rot = s.rotary_dim
    st.elementwise("rope", "attention", read=b * (nq + nkv) * rot * A + b * rot * A,
                   write=b * (nq + nkv) * rot * A, flops=3 * b * (nq + nkv) * rot,
                   shapes={"M": b, "heads": nq + nkv, "rotary_dim": rot})
    seen = min(ctx, s.sliding_window) if sliding else ctx
    kv = b * seen * nkv * hd * 2 * A
    sinks = nq * A if s.attn_sinks else 0  # one learned logit per head (gpt-oss)
    st.add("attention.sliding" if sliding else "attention", "attention", "compute",
           bytes=kv + 2 * b * nq * hd * A + b * nkv * hd * 2 * A + sinks, flops=4 * b * nq * seen * hd,
           shapes={"B": b, "S": seen, "q_heads": nq, "kv_heads": nkv, "D": hd, **({"sinks": True} if sinks else {})},
           weight_bytes=sinks, cache_bytes=kv, note=f"window {s.sliding_window}" if sliding else "")
    if s.attn_output_gate:
        v = b * nq * hd * A
        st.elementwise("attn_output_gate", "attention", read=2 * v, write=v, flops=5 * b * nq * hd,
                       shapes={"M": b, "N": nq * hd}, note="out * sigmoid(gate)")
    st.linear("o_proj", "attention", b, nq * hd, h, dtype, bias=s.attn_bias and s.model_type != "qwen2_moe")


def _mla(st: _Step, s: ModelSpec, b: int, ctx: int, tp: int, dtype: str) -> None:
    h, nope, rope, lora, vd = s.hidden, s.qk_nope_head_dim, s.qk_rope_head_dim, s.kv_lora_rank, s.v_head_dim
    nh = _shard("num_attention_heads", s.heads, tp)
    if s.q_lora_rank:
        st.linear("mla.q_a_proj", "attention", b, h, s.q_lora_rank, dtype, note="replicated across tp")
        st.rmsnorm("mla.q_a_norm", b, s.q_lora_rank, add=False)
        st.linear("mla.q_b_proj", "attention", b, s.q_lora_rank, nh * (nope + rope), dtype)
    else:
        st.linear("mla.q_proj", "attention", b, h, nh * (nope + rope), dtype)
    st.linear("mla.kv_a_proj", "attention", b, h, lora + rope, dtype, note="replicated across tp")
    st.rmsnorm("mla.kv_a_norm", b, lora, add=False)
    st.elementwise("rope", "attention", read=b * (nh + 1) * rope * A + b * rope * A,
                   write=b * (nh + 1) * rope * A, flops=3 * b * (nh + 1) * rope,
                   shapes={"M": b, "heads": nh + 1, "rotary_dim": rope})
    st.linear("mla.q_absorb", "attention", b, nope, lora, dtype, matrices=nh, rows=b * nh,
              note="W_UK of kv_b_proj applied per head to q_nope")
    latent = b * ctx * (lora + rope) * A
    st.add("attention.mla", "attention", "compute",
           bytes=latent + b * nh * (lora + rope) * A + b * nh * lora * A + b * (lora + rope) * A,
           flops=2 * b * nh * ctx * (2 * lora + rope),
           shapes={"B": b, "S": ctx, "q_heads": nh, "latent": lora + rope}, cache_bytes=latent,
           note="latent cache, shared by all heads (replicated across tp)")
    st.linear("mla.v_absorb", "attention", b, lora, vd, dtype, matrices=nh, rows=b * nh,
              note="W_UV of kv_b_proj applied per head to the attention output")
    st.linear("o_proj", "attention", b, nh * vd, h, dtype)


def _gdn(st: _Step, s: ModelSpec, b: int, tp: int, dtype: str) -> None:
    h = s.hidden
    nk = _shard("linear_num_key_heads", s.linear_key_heads, tp)
    nv = _shard("linear_num_value_heads", s.linear_value_heads, tp)
    dk, dv, kk = s.linear_key_head_dim, s.linear_value_head_dim, s.linear_conv_kernel
    g = "linear_attention"
    st.linear("gdn.in_proj", g, b, h, 2 * nk * dk + 2 * nv * dv + 2 * nv, dtype, note="q, k, v, z and the b, a gates")
    ch = 2 * nk * dk + nv * dv
    conv_state = b * ch * (kk - 1) * A
    st.elementwise("gdn.conv", g, read=conv_state + ch * kk * A + b * ch * A, write=conv_state + b * ch * A,
                   flops=2 * b * ch * kk, shapes={"M": b, "channels": ch, "kernel": kk},
                   weight_bytes=ch * kk * A, cache_bytes=2 * conv_state, note="causal depthwise conv, state update + SiLU")
    state = b * nv * dk * dv * STATE
    decay = 2 * nv * A  # A_log and dt_bias, one per value head
    st.elementwise("gdn.recurrence", g, read=state + b * (2 * nk * dk + nv * dv + 2 * nv) * A + decay,
                   write=state + b * nv * dv * A, flops=7 * b * nv * dk * dv,
                   shapes={"B": b, "v_heads": nv, "k_heads": nk, "Dk": dk, "Dv": dv, "state_dtype": "fp32"},
                   weight_bytes=decay, cache_bytes=2 * state, note="gated delta rule: decay, k.S, rank-1 update, q.S")
    v = b * nv * dv * A
    st.elementwise("gdn.norm_gate", g, read=2 * v + dv * A, write=v, flops=6 * b * nv * dv,
                   shapes={"M": b, "heads": nv, "D": dv}, weight_bytes=dv * A, note="RMSNorm(o) * SiLU(z)")
    st.linear("gdn.out_proj", g, b, nv * dv, h, dtype)


def _moe(st: _Step, s: ModelSpec, b: int, tp: int, dtype: str, distinct: float) -> None:
    h, e, k = s.hidden, s.num_experts, s.top_k
    st.linear("router", "moe", b, h, e, "bf16", bias=s.router_bias, note="replicated across tp; kept bf16")
    st.elementwise("router.topk", "moe", read=b * e * A, write=b * k * 8, flops=4 * b * e,
                   shapes={"M": b, "E": e, "k": k, "scoring": s.scoring},
                   note=f"{s.n_group} groups, top {s.topk_group}" if s.n_group > 1 else "")
    inter = _shard("moe_intermediate_size", s.expert_intermediate, tp)
    wb = WEIGHT_BYTES[dtype]
    gu_w = distinct * (2 * inter * h * wb + (2 * inter * A if s.expert_bias else 0))
    st.add("experts.gate_up", "moe", "compute", bytes=gu_w + b * k * (h + inter) * A,
           flops=2 * b * k * h * 2 * inter,
           shapes={"T": b, "k": k, "E": e, "experts_read": round(distinct, 3), "K": h, "N": 2 * inter},
           weight_bytes=gu_w, dtype=dtype, note="activation fused")
    dn_w = distinct * (inter * h * wb + (h * A if s.expert_bias else 0))
    st.add("experts.down", "moe", "compute", bytes=dn_w + b * k * inter * A + b * h * A,
           flops=2 * b * k * inter * h,
           shapes={"T": b, "k": k, "E": e, "experts_read": round(distinct, 3), "K": inter, "N": h},
           weight_bytes=dn_w, dtype=dtype, note="weighted top-k sum fused")
    if s.shared_intermediate:
        si = _shard("shared expert width", s.shared_intermediate, tp)
        st.linear("shared_expert.gate_up", "moe", b, h, 2 * si, dtype, note="activation fused")
        st.linear("shared_expert.down", "moe", b, si, h, dtype)
        if s.shared_gate:
            st.linear("shared_expert.gate", "moe", b, h, 1, "bf16", note="sigmoid scale fused")
