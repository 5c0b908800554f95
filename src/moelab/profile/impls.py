"""What `moelab profile` runs for each op of the decode-step graph, per implementation, at real shapes.

Three implementations, side by side (DESIGN.md):
  * "eager":   plain PyTorch as a Hugging Face model computes it (the registered references of
               `moelab.ops` for norms and RoPE, HF's expert loop for the experts, SDPA with repeated
               KV heads for attention, softmax + topk for routing);
  * "compile": `torch.compile` of the eager callable (made in `measure.py`, not here);
  * "moelab":  what moelab's engine runs: its kernels (norms, RoPE, KV append, attention, the one-launch
               router, the experts, and the decode kernel for dense projections, lm_head and the router's
               logits beyond the fused router's rows: the GEMV below 4 rows, tensor cores from 4 to 16, cuBLAS
               beyond). The embedding, greedy sampling and small elementwise ops run torch in this column too,
               and say so. Where the engine runs the post-attention norm inside the router's launch (batch 1:
               `engine.model.norm_router_max_t(E)`), the chained step does too; the per-op table times the norm
               and the router as the two units they are otherwise.
Gated DeltaNet ops (hybrid models): eager and compile run the plain-torch references of `moelab.ops.gdn`, moelab
its kernels (`kernels/gdn.py`, one launch each), as the decode engine does.

`Dims` turns a ModelSpec into one tensor-parallel rank's sizes; `LayerFns(impl, dims)` holds the
callables one layer runs (shared by the per-op units and the chained step in `step.py`, so both time
the very same code); `build_units` pairs each graph op (or a group of graph ops one call covers) with
those callables and an input builder.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from moelab import ops
from moelab.bench.baselines import hf_expert_loop
from moelab.engine.config import OFFSET_NORM_TYPES
from moelab.errors import UserError
from moelab.kernels.router import fused_router_max_t
from moelab.models import ModelSpec
from moelab.models.graph import Op
from moelab.ops.attention import qkv_release_stages
from moelab.ops.linear import dense_for

IMPLS = ("eager", "compile", "moelab")
TORCH_NOTE = "torch (cuBLAS / ATen) in every column: no moelab kernel is needed or written for it"
GDN_NOTE = ("Gated DeltaNet: eager = the plain-torch reference (moelab.ops.gdn); moelab = one launch "
            "(kernels/gdn.py)")


def check_supported(spec: ModelSpec) -> None:
    """UserError naming the first feature of `spec` the profiler cannot run yet."""
    why = None
    if spec.attention == "mla":
        why = "MLA attention (DeepSeek)"
    elif spec.activation != "swiglu":
        why = f"the {spec.activation} expert activation"
    elif spec.is_moe and spec.scoring != "softmax":
        why = f"{spec.scoring} routing"
    elif spec.attn_sinks or spec.expert_bias or spec.router_bias:
        why = "attention sinks / expert or router biases (gpt-oss)"
    if why:
        raise UserError(f"moelab profile does not run {why} of {spec.name} yet; "
                        f"`moelab roofline {spec.name}` gives its analytic breakdown")


@dataclass(frozen=True)
class Dims:
    """One rank's sizes (tensor-parallel shards as `models.graph` cuts them)."""

    B: int
    S: int
    H: int
    nq: int
    nkv: int
    hd: int
    rot: int
    gate: bool  # q_proj also emits the output gate (Qwen3-Next/3.5)
    qk_norm: str
    offset: bool
    eps: float
    theta: float
    vocab: int
    vocab_local: int
    E: int = 0
    k: int = 0
    I: int = 0
    si: int = 0
    shared_gate: bool = False
    renorm: bool = True
    dense_I: int = 0
    nk: int = 0  # Gated DeltaNet key heads, value heads, head dims, conv kernel
    nv: int = 0
    dk: int = 0
    dv: int = 0
    conv: int = 0
    window: int | None = None

    @property
    def q_out(self) -> int:
        return self.nq * self.hd * (2 if self.gate else 1)

    @property
    def gdn_ch(self) -> int:
        return 2 * self.nk * self.dk + self.nv * self.dv


def dims(spec: ModelSpec, batch: int, ctx: int, tp: int) -> Dims:
    def sh(n: int) -> int:
        return n // tp if n else 0

    return Dims(
        B=batch, S=ctx, H=spec.hidden, nq=sh(spec.heads),
        nkv=sh(spec.kv_heads) if spec.kv_heads >= tp else 1, hd=spec.head_dim, rot=spec.rotary_dim,
        gate=spec.attn_output_gate, qk_norm=spec.qk_norm, offset=spec.model_type in OFFSET_NORM_TYPES,
        eps=spec.rms_eps, theta=spec.rope_theta, vocab=spec.vocab, vocab_local=math.ceil(spec.vocab / tp),
        E=spec.num_experts, k=spec.top_k, I=sh(spec.expert_intermediate), si=sh(spec.shared_intermediate),
        shared_gate=spec.shared_gate, renorm=spec.norm_topk_prob, dense_I=sh(spec.dense_intermediate),
        nk=sh(spec.linear_key_heads), nv=sh(spec.linear_value_heads), dk=spec.linear_key_head_dim,
        dv=spec.linear_value_head_dim, conv=spec.linear_conv_kernel,
        window=min(ctx, spec.sliding_window) if spec.sliding_window else None,
    )


# ----------------------------------------------------------------------------------------------------
# Plain-torch pieces: HF-style eager code (the Gated DeltaNet references are moelab.ops.gdn's).

def hf_route(logits: torch.Tensor, k: int, renorm: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Qwen/Mixtral routing as transformers writes it: softmax in fp32, top-k, renormalise."""
    p = torch.softmax(logits, dim=-1, dtype=torch.float32)
    w, ids = torch.topk(p, k, dim=-1)
    if renorm:
        w = w / w.sum(-1, keepdim=True)
    return w, ids


def sdpa_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, seq_lens: torch.Tensor,
                scale: float, window: int | None = None) -> torch.Tensor:
    """HF's SDPA decode path: KV heads repeated to the query heads, one query over the whole cache.
    q [B, Hq, D], caches [B, Hk, S, D] (every position valid) -> [B, Hq, D]. `seq_lens` is unused: the
    cache is exactly the context long, as a static cache sized to it is."""
    g = q.shape[1] // k_cache.shape[1]
    k, v = k_cache, v_cache
    if window is not None:
        k, v = k[:, :, -window:], v[:, :, -window:]
    if g > 1:
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    return F.scaled_dot_product_attention(q[:, :, None], k, v, scale=scale)[:, :, 0]


def swiglu(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    gate, up = F.linear(x, w13).chunk(2, dim=-1)
    return F.linear(F.silu(gate) * up, w2)


# ----------------------------------------------------------------------------------------------------
# The callables one layer runs, for one implementation.

class LayerFns:
    """Per-op callables of `impl` ("eager" or "moelab"; compile wraps eager's) at `d`'s shapes."""

    def __init__(self, impl: str, d: Dims):
        if impl not in ("eager", "moelab"):
            raise ValueError(f"LayerFns impl must be eager or moelab, not {impl!r}")
        self.impl, self.d = impl, d
        self._add_rmsnorm = ops.get("add_rmsnorm", impl)
        self._rmsnorm = ops.get("rmsnorm", impl)
        self._norm_rope_kv = ops.get("qk_norm_rope_kv", impl)  # the engine's q/k prologue + KV append
        self.dense = dense_for(impl)  # the dense projections, as the engine runs them
        self.gdn_conv = ops.get("gdn_conv", impl)  # Gated DeltaNet: the references, or one launch each
        self.gdn_recurrence = ops.get("gdn_recurrence", impl)
        self.rec_kw = {"state_early": True} if impl == "moelab" else {}  # as the engine (`GatedDeltaNet.rec_kw`)
        self.gdn_norm_gate = ops.get("gdn_norm_gate", impl)
        # moelab's input projection with the conv in its epilogue: the chained step uses it when the engine does
        # (`engine.model.conv_in_proj`); the per-op table times the two apart.
        self.linear_conv = ops.get("linear_conv", impl) if impl == "moelab" else None
        self.attn_gate = ops.get("attn_gate", impl)
        if impl == "moelab":
            self._attn = ops.get("decode_attention", "moelab")
            self._attn_kv = ops.get("decode_attention_kv", "moelab")
            self._route = ops.get("route", "moelab")
            self._router = ops.get("router", "moelab")
            self._experts = ops.get("fused_moe", "moelab")

    def add_rmsnorm(self, x, residual, w):
        return self._add_rmsnorm(x, residual, w, self.d.eps, offset=self.d.offset)

    def _full_norm(self, q, k, qw, kw):
        """The families that norm over all heads (qk_norm "full") do it here, before the per-head kernel; the
        per-head weights go on to the kernel only for qk_norm "head"."""
        d = self.d
        if d.qk_norm == "full":
            q = self._rmsnorm(q.flatten(1), qw, d.eps).view_as(q)
            k = self._rmsnorm(k.flatten(1), kw, d.eps).view_as(k)
        if d.qk_norm != "head":
            qw = kw = None
        return q, k, qw, kw

    def qk_prologue(self, q, k, v, qw, kw, positions, k_cache, v_cache):
        """q [B, Hq, D], k/v [B, Hk, D] -> q normed (when the family norms per head or over all heads) and rotated;
        k likewise and, with v, appended to the cache at `positions` — as the engine's decode does it (moelab: one
        launch, `qk_norm_rope_kv`; eager: the norms, RoPE and torch index_put)."""
        d = self.d
        q, k, qw, kw = self._full_norm(q, k, qw, kw)
        return self._norm_rope_kv(q, k, v, qw, kw, positions, k_cache, v_cache, eps=d.eps, rope_theta=d.theta,
                                  rotary_dim=d.rot, offset=d.offset)

    def attention(self, q, k_cache, v_cache, seq_lens):
        scale = self.d.hd ** -0.5
        if self.impl == "eager":
            return sdpa_decode(q, k_cache, v_cache, seq_lens, scale, self.d.window)
        return self._attn(q, k_cache, v_cache, seq_lens, scale=scale, window=self.d.window)

    def qkv_release(self, x, k_cache):
        """The split's stages where moelab's qkv projection releases it as qkv starts, as the engine (None: no early
        release; always None for eager)."""
        return qkv_release_stages(x, k_cache) if self.impl == "moelab" else None

    def attention_kv(self, q, k, v, qw, kw, positions, k_cache, v_cache, num_stages=None):
        """The engine's decode attention from the raw projection: the q/k prologue, the KV append at `positions`
        and attention over positions 0 .. positions[b] (moelab: all in the split kernel, `decode_attention_kv`, at
        `num_stages` or its default; eager: `qk_prologue`, then SDPA over the cache)."""
        d = self.d
        if self.impl == "eager":
            q = self.qk_prologue(q, k, v, qw, kw, positions, k_cache, v_cache)
            return self.attention(q, k_cache, v_cache, positions + 1)
        q, k, qw, kw = self._full_norm(q, k, qw, kw)
        return self._attn_kv(q, k, v, qw, kw, positions, k_cache, v_cache, eps=d.eps, rope_theta=d.theta,
                             rotary_dim=d.rot, offset=d.offset, scale=d.hd ** -0.5, window=d.window,
                             num_stages=num_stages)

    def norm_router(self, h, residual, norm_weight, weight):
        """moelab only: the post-attention norm and the router in one launch, as the engine runs them up to
        `engine.model.norm_router_max_t(E)` rows (the per-op table times the norm and the router as two units)."""
        return ops.get("add_rmsnorm_router", "moelab")(h, residual, norm_weight, self.d.eps, weight, self.d.k,
                                                      "softmax", self.d.renorm, offset=self.d.offset)

    def router(self, x, weight):
        """Router logits and routing: eager = the GEMV then HF's routing; moelab = the one-launch router."""
        if self.impl == "eager":
            return hf_route(F.linear(x, weight), self.d.k, self.d.renorm)
        return self._router(x, weight, self.d.k, "softmax", self.d.renorm)

    def route(self, logits):
        if self.impl == "eager":
            return hf_route(logits, self.d.k, self.d.renorm)
        return self._route(logits, self.d.k, "softmax", self.d.renorm)

    def experts(self, x, w13, w2, topk_w, topk_ids, shared, prefetch=None):
        """prefetch: the next layer's first weight, which moelab's kernels may ask L2 for (as in the engine)."""
        if self.impl == "moelab":
            return self._experts(x, w13, w2, topk_w, topk_ids, shared, prefetch=prefetch)
        y = hf_expert_loop(x, w13, w2, topk_w, topk_ids)
        if shared is not None:
            sw13, sw2, sg = shared
            s = swiglu(x, sw13, sw2)
            y = y + (torch.sigmoid(F.linear(x, sg)) * s if sg is not None else s)
        return y


# ----------------------------------------------------------------------------------------------------
# Random tensors at real shapes.

class Rand:
    """Seeded random tensors on one device; weights scaled by fan-in so activations stay O(1)."""

    def __init__(self, device: torch.device, dtype: torch.dtype, seed: int = 0):
        self.device, self.dtype = device, dtype
        self.gen = torch.Generator(device=device).manual_seed(seed)

    def t(self, *shape: int, scale: float = 1.0, dtype: torch.dtype | None = None) -> torch.Tensor:
        x = torch.randn(*shape, device=self.device, generator=self.gen, dtype=torch.float32)
        return (x * scale).to(dtype or self.dtype)

    def w(self, *shape: int) -> torch.Tensor:
        return self.t(*shape, scale=shape[-1] ** -0.5)

    def ids(self, rows: int, n: int, k: int) -> torch.Tensor:
        """k distinct ids in [0, n) per row (uniform routing), int64."""
        return torch.rand(rows, n, device=self.device, generator=self.gen).topk(k, dim=-1).indices

    def positions(self, d: Dims) -> torch.Tensor:
        return torch.full((d.B,), d.S - 1, dtype=torch.long, device=self.device)


# ----------------------------------------------------------------------------------------------------
# Units: one measured call covering one graph op or a few that one call does.

@dataclass
class Unit:
    """A measured call. `covers` names its graph ops (all of the same count); `fns[impl]` is the callable
    (absent: the unit is an estimate); `make_args(i)` builds the i-th rotation set; `note` says what runs."""

    name: str
    group: str
    count: int
    covers: tuple[str, ...]
    fns: dict[str, Callable] = field(default_factory=dict)
    make_args: Callable[[int], tuple] | None = None
    bytes_per_set: int = 0
    note: str = ""
    estimated: bool = False  # comm ops on one GPU: the graph's analytic estimate, not a measurement
    torch_only: bool = False  # every column runs the same torch code

    @property
    def measured(self) -> bool:
        return not self.estimated


def build_units(spec: ModelSpec, graph: list[Op], d: Dims, device: torch.device, dtype: torch.dtype,
                impls: tuple[str, ...] = ("eager", "moelab"), seed: int = 0) -> list[Unit]:
    """One Unit per distinct call of a decode step, in the graph's order. Inputs are built lazily
    (`make_args`), so listing units allocates nothing."""
    check_supported(spec)
    by_name = {o.name: o for o in graph}
    fns = {i: LayerFns(i, d) for i in impls if i in ("eager", "moelab")}
    r = Rand(device, dtype, seed)
    units: list[Unit] = []
    done: set[str] = set()

    def add(name, group, covers, per_impl, make_args, note="", torch_only=False):
        ops_ = [by_name[c] for c in covers if c in by_name]
        units.append(Unit(name, group, ops_[0].count, tuple(o.name for o in ops_), per_impl, make_args,
                          sum(o.bytes for o in ops_), note, torch_only=torch_only))
        done.update(o.name for o in ops_)

    def same(fn):  # the one torch callable, in every column asked for
        return {i: fn for i in fns}

    for op in graph:
        n = op.name
        if n in done:
            continue
        if op.kind == "comm":
            units.append(Unit(n, op.group, op.count, (n,), {}, None, op.bytes,
                              "estimated: bytes on the wire / interconnect + per-call latency (one GPU here)",
                              estimated=True))
            done.add(n)
        elif n == "embedding":
            table: list[torch.Tensor] = []  # one table for all sets: a lookup touches only B rows of it

            def emb_args(i, table=table):
                if not table:
                    table.append(r.t(d.vocab, d.H))
                return (torch.randint(0, d.vocab, (d.B,), device=device, generator=r.gen), table[0])
            add(n, op.group, (n,), same(F.embedding), emb_args, TORCH_NOTE, True)
        elif n in ("add_rmsnorm", "final_norm"):
            add(n, op.group, (n,), {i: f.add_rmsnorm for i, f in fns.items()},
                lambda i: (r.t(d.B, d.H), r.t(d.B, d.H), 1.0 + 0.1 * r.t(d.H)))
        elif n == "router" and "router.topk" in by_name and d.B <= fused_router_max_t(d.E):
            # The engine's decode path: logits and routing in one call (moelab: one launch).
            add("router+topk", op.group, ("router", "router.topk"), {i: f.router for i, f in fns.items()},
                lambda i: (r.t(d.B, d.H), r.w(d.E, d.H)), "eager = cuBLAS GEMV + HF routing; moelab = one launch")
        elif op.kind == "compute" and n in ("qkv_proj", "o_proj", "lm_head", "router", "gdn.in_proj", "gdn.out_proj"):
            # the engine's `dense` projections (the router's logits too, beyond fused_router_max_t(E) rows; the Gated
            # DeltaNet mixer's at decode)
            K, N = op.shapes["K"], op.shapes["N"]
            add(n, op.group, (n,), {i: f.dense for i, f in fns.items()}, lambda i, K=K, N=N: (r.t(d.B, K), r.w(N, K)),
                "eager = F.linear (cuBLAS); moelab = its decode kernel (the GEMV below 4 rows, tensor cores from 4 "
                "to 16; cuBLAS beyond)")
        elif op.kind == "compute" and n == "shared_expert.gate":
            # cuBLAS in the engine too
            K, N = op.shapes["K"], op.shapes["N"]
            add(n, op.group, (n,), same(F.linear), lambda i, K=K, N=N: (r.t(d.B, K), r.w(N, K)), TORCH_NOTE, True)
        elif n in ("qk_norm", "rope") and d.qk_norm != "full" and "attention" in by_name \
                and "attention.sliding" not in by_name:
            # The engine's decode form: the prologue, the append and attention in one call (moelab: the split
            # kernel's launch). Counts match here (every attention layer is a full one).
            S = by_name["attention"].shapes["S"]
            nw = d.hd if d.qk_norm == "head" else None

            def attn_kv_args(i, S=S):
                qw = kw = None
                if nw:
                    qw, kw = 1.0 + 0.1 * r.t(nw), 1.0 + 0.1 * r.t(nw)
                return (r.t(d.B, d.nq, d.hd), r.t(d.B, d.nkv, d.hd), r.t(d.B, d.nkv, d.hd), qw, kw,
                        torch.full((d.B,), S - 1, dtype=torch.long, device=device), r.t(d.B, d.nkv, S, d.hd),
                        r.t(d.B, d.nkv, S, d.hd))
            head = d.qk_norm == "head"
            add("qk_norm_rope+attention" if head else "rope+attention", "attention",
                ("qk_norm", "rope", "attention") if head else ("rope", "attention"),
                {i: f.attention_kv for i, f in fns.items()}, attn_kv_args,
                ("q/k RMSNorm + RoPE + the KV append + attention" if head else "RoPE + the KV append + attention")
                + ": moelab = the split kernel's launch (+ the combine's); eager = the norms, RoPE, index_put, SDPA")
        elif n in ("qk_norm", "rope"):
            covers = ("qk_norm", "rope") if d.qk_norm == "head" else (n,)
            name = "qk_norm_rope" if d.qk_norm == "head" else "qk_norm+rope" if d.qk_norm == "full" else "rope"
            nw = d.hd if d.qk_norm == "head" else None

            def qk_args(i, nw=nw):
                qw = 1.0 + 0.1 * r.t(nw or d.nq * d.hd)
                kw = 1.0 + 0.1 * r.t(nw or d.nkv * d.hd)
                # The append writes one row whatever the context, and RoPE costs the same at any position: a
                # 2-row cache and position 1 (a context-sized cache per rotated set would not fit at 128k).
                return (r.t(d.B, d.nq, d.hd), r.t(d.B, d.nkv, d.hd), r.t(d.B, d.nkv, d.hd), qw, kw,
                        torch.ones(d.B, dtype=torch.long, device=device), r.t(d.B, d.nkv, 2, d.hd),
                        r.t(d.B, d.nkv, 2, d.hd))
            add(name, "attention" if d.qk_norm == "head" else op.group, ("qk_norm", "rope"),
                {i: f.qk_prologue for i, f in fns.items()}, qk_args,
                ("q/k RMSNorm + RoPE + the KV append in one moelab launch" if d.qk_norm == "head"
                 else "RoPE + the KV append in one moelab launch"))
        elif n in ("attention", "attention.sliding"):
            S = op.shapes["S"] if n == "attention" else d.S

            def attn_args(i, S=S):
                kc, vc = r.t(d.B, d.nkv, S, d.hd), r.t(d.B, d.nkv, S, d.hd)
                return (r.t(d.B, d.nq, d.hd), kc, vc, torch.full((d.B,), S, dtype=torch.int32, device=device))
            add(n, op.group, (n,), {i: f.attention for i, f in fns.items()}, attn_args,
                "the KV append is in the q/k prologue's unit; eager = SDPA over repeated KV heads")
        elif n == "attn_output_gate":
            add(n, op.group, (n,), {i: f.attn_gate for i, f in fns.items()},
                lambda i: (r.t(d.B, d.nq * d.hd), r.t(d.B, d.nq, 2 * d.hd)[..., d.hd:]),
                "out · sigmoid(gate), the gate the second half of each head's q_proj rows; moelab = one launch")
        elif n == "router.topk":
            add(n, op.group, (n,), {i: f.route for i, f in fns.items()}, lambda i: (r.t(d.B, d.E),))  # logits: x's dtype
        elif n == "experts.gate_up":
            covers = ("experts.gate_up", "experts.down", "shared_expert.gate_up", "shared_expert.down")
            covers += ("shared_expert.gate",) if d.shared_gate else ()

            def moe_args(i):
                w = torch.softmax(r.t(d.B, d.k, dtype=torch.float32), -1)
                shared = None
                if d.si:
                    shared = (r.w(2 * d.si, d.H), r.w(d.H, d.si), r.w(1, d.H) if d.shared_gate else None)
                return (r.t(d.B, d.H), r.w(d.E, 2 * d.I, d.H), r.w(d.E, d.H, d.I), w, r.ids(d.B, d.E, d.k), shared)
            add("experts", op.group, covers, {i: f.experts for i, f in fns.items()}, moe_args,
                "routed experts (+ shared expert) in one call; eager = HF expert loop" if d.si
                else "routed experts in one call; eager = HF expert loop")
        elif n == "mlp.gate_up":
            add("mlp", op.group, ("mlp.gate_up", "mlp.down"), same(swiglu),
                lambda i: (r.t(d.B, d.H), r.w(2 * d.dense_I, d.H), r.w(d.H, d.dense_I)), TORCH_NOTE, True)
        elif n == "gdn.conv":
            add(n, op.group, (n,), {i: f.gdn_conv for i, f in fns.items()},
                lambda i: (r.t(d.B, d.gdn_ch), r.t(d.B, d.gdn_ch, d.conv - 1), r.w(d.gdn_ch, d.conv)), GDN_NOTE)
        elif n == "gdn.recurrence":
            add(n, op.group, (n,), {i: f.gdn_recurrence for i, f in fns.items()},
                lambda i: (r.t(d.B, d.nk, d.dk), r.t(d.B, d.nk, d.dk), r.t(d.B, d.nv, d.dv), r.t(d.B, d.nv),
                           r.t(d.B, d.nv), r.t(d.nv, scale=0.1), r.t(d.nv, scale=0.1),
                           r.t(d.B, d.nv, d.dk, d.dv, scale=0.01, dtype=torch.float32)), GDN_NOTE)
        elif n == "gdn.norm_gate":
            add(n, op.group, (n,), {i: f.gdn_norm_gate for i, f in fns.items()},
                lambda i: (r.t(d.B, d.nv, d.dv), r.t(d.B, d.nv, d.dv), 1.0 + 0.1 * r.t(d.dv), d.eps), GDN_NOTE)
        elif n == "sample.argmax":
            add(n, op.group, (n,), same(lambda logits: logits.argmax(-1)), lambda i: (r.t(d.B, d.vocab),),
                TORCH_NOTE, True)
        else:
            raise UserError(f"moelab profile has no implementation for op {n!r} of {spec.name} yet")
    return units
