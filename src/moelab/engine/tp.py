"""Tensor-parallel decode: each of tp ranks holds a shard of every layer; two all-reduces per layer.

Sharding (the same rules as `moelab.models.graph`, which counts their bytes):
  * attention by heads: rank r has q heads r·Hq/tp.., their o_proj columns, and the KV heads those q heads
    read — Hk/tp of them, or one KV head replicated over tp/Hk ranks when Hk < tp;
  * routed experts along their intermediate dimension (w13 rows, w2 columns of every expert), shared
    experts and dense MLPs likewise (column-parallel in, row-parallel out): each rank's output is a
    partial sum of the block's output. With `ep` (expert parallel) rank r holds whole experts
    r·E/tp..(r+1)·E/tp-1 instead, and the slots of a token's top-k that name another rank's expert get
    weight 0 (pointing at local expert 0, so the block stays one all-reduce; the cost: a rank that no
    token routes to still reads its expert 0 — a kernel that skipped zero-weight slots would not);
  * lm_head by vocabulary: ceil(V/tp) rows per rank (the last padded with zeros), logits all-gathered;
  * embedding, router, norms replicated. A bias on a row-parallel output (o_proj) is added by rank 0 only.
Per layer: one all-reduce after attention, one after the MoE/MLP block (OLMoE's q/k norm over all heads
adds a tiny all-reduce of the sums of squares).

Overlap (`overlap=True`, decode steps of batch ≥ 2): the batch is split into two halves that run the layer
stack in alternation, each block's all-reduce issued asynchronously, so one half's all-reduce is in flight
while the other half computes. Within one dependency chain nothing can hide an all-reduce (every block's
input is RMSNorm of the reduced sum, and RMSNorm does not commute with the sum), so independent work has
to come from independent tokens. The cost: each half reads the layer's weights again (the second read
may partly hit L2). At batch 1 there is nothing to split: the flag has no effect.

Processes: one per GPU, `torch.distributed` (NCCL on CUDA, gloo on the CPU), started by torchrun or by
`launch` (torch.multiprocessing spawn with a local rendezvous).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from moelab.engine.cache import KVCache
from moelab.engine.comm import Comm, DEFAULT_ONESHOT_MAX_BYTES, Pending, distributed_rmsnorm
from moelab.engine.config import EngineConfig
from moelab.engine.model import DecodeStep, Model, MoE
from moelab.engine.weights import Checkpoint, Part, check_memory, plan, tensor_shapes, validate
from moelab.errors import UserError

# key -> (dim, [(start, stop), ...] of the full tensor along dim, concatenated in order); None: replicated.
Spec = tuple[int, list[tuple[int, int]]] | None


def _div(what: str, n: int, tp: int) -> int:
    if n % tp:
        raise UserError(f"--tp {tp} does not divide {what} ({n})")
    return n // tp


def kv_heads_local(cfg: EngineConfig, tp: int, rank: int) -> tuple[int, int, int]:
    """(first KV head, KV heads on this rank, ranks holding each KV head) for `rank` of `tp`."""
    if cfg.kv_heads >= tp:
        n = _div("num_key_value_heads", cfg.kv_heads, tp)
        return rank * n, n, 1
    if tp % cfg.kv_heads:
        raise UserError(f"--tp {tp}: with {cfg.kv_heads} KV heads (fewer than tp), tp must be a multiple of them "
                        "so each rank's query heads read one KV head")
    rep = tp // cfg.kv_heads
    return rank // rep, 1, rep


def local_config(cfg: EngineConfig, tp: int, ep: bool = False) -> EngineConfig:
    """The config one rank's forward sees: its heads and intermediate widths (vocab stays whole: the logits
    are gathered; so does the expert count, the router being replicated). Raises UserError when tp does
    not divide what it must."""
    heads = _div("num_attention_heads", cfg.heads, tp)
    linear = {}
    if cfg.linear_conv:  # Gated DeltaNet: whole key heads per rank, with the value heads each serves
        linear = dict(linear_key_heads=_div("linear_num_key_heads", cfg.linear_key_heads, tp),
                      linear_value_heads=_div("linear_num_value_heads", cfg.linear_value_heads, tp))
    _, nk, _ = kv_heads_local(cfg, tp, 0)
    if ep:
        _div("num_experts (--ep)", cfg.experts, tp)
    return dataclasses.replace(
        cfg, heads=heads, kv_heads=nk,
        moe_intermediate=cfg.moe_intermediate if ep else _div("moe_intermediate_size", cfg.moe_intermediate, tp),
        shared_intermediate=_div("shared expert width", cfg.shared_intermediate, tp) if cfg.shared_intermediate else 0,
        dense_intermediate=_div("intermediate_size", cfg.dense_intermediate, tp) if cfg.dense_layers else cfg.dense_intermediate,
        **linear,
    )


def vocab_local(cfg: EngineConfig, tp: int) -> int:
    return math.ceil(cfg.vocab / tp)


def shard_specs(cfg: EngineConfig, tp: int, rank: int, ep: bool = False) -> dict[str, Spec]:
    """For every engine tensor (weights.tensor_shapes) the part rank `rank` holds (see `Spec`).

    "lm_head" is always listed (tied models slice it from the embedding); "o_bias" of ranks > 0 is
    dropped by `shard_tensor` (the bias is added once, before the all-reduce, by rank 0).
    """
    D = cfg.head_dim
    nq = _div("num_attention_heads", cfg.heads, tp)
    kv0, nk, _ = kv_heads_local(cfg, tp, rank)
    g = 2 if cfg.attn_gate else 1  # Qwen3.5: q_proj's rows are [q | gate] per head, so a head's rows stay together
    q = (rank * nq * g * D, (rank + 1) * nq * g * D)
    k = (cfg.heads * g * D + kv0 * D, cfg.heads * g * D + (kv0 + nk) * D)
    v = (k[0] + cfg.kv_heads * D, k[1] + cfg.kv_heads * D)
    o = (rank * nq * D, (rank + 1) * nq * D)
    vl = vocab_local(cfg, tp)
    specs: dict[str, Spec] = {"embed": None, "norm": None, "lm_head": (0, [(rank * vl, (rank + 1) * vl)])}

    def halves(width: int) -> list[tuple[int, int]]:  # this rank's gate rows, then its up rows
        w = _div("an MLP width", width, tp)
        return [(rank * w, (rank + 1) * w), (width + rank * w, width + (rank + 1) * w)]

    def cols(width: int) -> list[tuple[int, int]]:
        w = width // tp
        return [(rank * w, (rank + 1) * w)]

    for i in range(cfg.layers):
        p = f"layers.{i}."
        specs.update({p + "input_norm": None, p + "post_norm": None, p + "qkv": (0, [q, k, v]),
                      p + "qkv_bias": (0, [q, k, v]), p + "o": (1, [o]), p + "o_bias": None})
        if cfg.linear_conv:
            specs.update(_gdn_specs(cfg, tp, rank, p))
        if cfg.qk_norm == "head":
            specs[p + "q_norm"] = specs[p + "k_norm"] = None
        elif cfg.qk_norm == "full":
            specs[p + "q_norm"], specs[p + "k_norm"] = (0, [o]), (0, [(kv0 * D, (kv0 + nk) * D)])
        if cfg.is_moe(i):
            I = cfg.moe_intermediate
            if ep:
                el = cfg.experts // tp
                mine = [(rank * el, (rank + 1) * el)]
                specs.update({p + "router": None, p + "w13": (0, mine), p + "w2": (0, mine)})
            else:
                specs.update({p + "router": None, p + "w13": (1, halves(I)), p + "w2": (2, cols(I))})
            if cfg.shared_intermediate:
                S = cfg.shared_intermediate
                specs.update({p + "shared_w13": (0, halves(S)), p + "shared_w2": (1, cols(S)),
                              p + "shared_gate": None})
        else:
            Id = cfg.dense_intermediate
            specs.update({p + "mlp_w13": (0, halves(Id)), p + "mlp_w2": (1, cols(Id))})
    return specs


def _gdn_specs(cfg: EngineConfig, tp: int, rank: int, p: str) -> dict[str, Spec]:
    """A Gated DeltaNet layer's shard: rank r holds key heads r·Hk/tp.. and the value heads they serve (value head
    h uses key head h // (Hv/Hk), so contiguous ranges of both stay paired): its rows of q, k, v, z, b and a in the
    input projection, its conv channels, A_log and dt_bias, and its columns of the output projection. The gated
    norm's weight is per head dim: whole on every rank."""
    nk, nv, dk, dv = cfg.linear_key_heads, cfg.linear_value_heads, cfg.linear_key_dim, cfg.linear_value_dim
    kl, vl, C = nk // tp, nv // tp, cfg.conv_channels
    q = (rank * kl * dk, (rank + 1) * kl * dk)
    k = (nk * dk + q[0], nk * dk + q[1])
    v = (2 * nk * dk + rank * vl * dv, 2 * nk * dk + (rank + 1) * vl * dv)
    z = (C + rank * vl * dv, C + (rank + 1) * vl * dv)
    b = (C + nv * dv + rank * vl, C + nv * dv + (rank + 1) * vl)
    a = (b[0] + nv, b[1] + nv)
    heads = [(rank * vl, (rank + 1) * vl)]
    return {p + "gdn_in": (0, [q, k, v, z, b, a]), p + "gdn_conv": (0, [q, k, v]), p + "gdn_a_log": (0, heads),
            p + "gdn_dt_bias": (0, heads), p + "gdn_norm": None, p + "gdn_out": (1, [(v[0] - 2 * nk * dk,
                                                                                       v[1] - 2 * nk * dk)])}


def local_shape(full: tuple[int, ...], spec: Spec) -> tuple[int, ...]:
    if spec is None:
        return full
    dim, ranges = spec
    return (*full[:dim], sum(b - a for a, b in ranges), *full[dim + 1:])


def shard_tensor(key: str, full: torch.Tensor, spec: Spec, rank: int) -> torch.Tensor | None:
    """This rank's part of `full` (rows past the end of the tensor, lm_head's padding, are zeros)."""
    if key.endswith(".o_bias") and rank > 0:
        return None
    if spec is None:
        return full
    dim, ranges = spec
    out = full.new_zeros(local_shape(tuple(full.shape), spec))
    off, n = 0, full.shape[dim]
    for a, b in ranges:
        a2, b2 = min(a, n), min(b, n)
        if b2 > a2:
            out.narrow(dim, off, b2 - a2).copy_(full.narrow(dim, a2, b2 - a2))
        off += b - a
    return out


def _shard_parts(part: Part, full: tuple[int, ...], spec: Spec):
    """(source index into the checkpoint tensor, destination index into the local tensor) for each piece
    of `part` that lies in this rank's shard: the slices to read with safetensors' get_slice."""
    region = []  # per full dim: (lo, hi, kept in the part's own shape)
    for j, n in enumerate(full):
        d = part.dst[j] if j < len(part.dst) else slice(None)
        if isinstance(d, int):
            region.append((d, d + 1, False))
        else:
            lo, hi, _ = d.indices(n)
            region.append((lo, hi, True))
    if spec is None:
        yield tuple(slice(None) for _, _, kept in region if kept), part.dst
        return
    dim, ranges = spec
    plo, phi, kept_d = region[dim]
    off = 0
    for a, b in ranges:
        lo, hi = max(a, plo), min(b, phi)
        if lo < hi:
            src = tuple((slice(lo - plo, hi - plo) if j == dim else slice(None))
                        for j, (_, _, kept) in enumerate(region) if kept)
            dst = []
            for j in range(len(full)):
                if j == dim:
                    dst.append(slice(off + lo - a, off + hi - a) if kept_d else off + lo - a)
                else:
                    dst.append(part.dst[j] if j < len(part.dst) else slice(None))
            yield src, tuple(dst)
        off += b - a


def local_bytes(cfg: EngineConfig, tp: int, rank: int, dtype: torch.dtype, ep: bool = False) -> int:
    """Bytes of the weights rank `rank` holds."""
    elem = torch.empty((), dtype=dtype).element_size()
    specs, shapes = shard_specs(cfg, tp, rank, ep), tensor_shapes(cfg)
    shapes.setdefault("lm_head", (cfg.vocab, cfg.hidden))
    return elem * sum(math.prod(local_shape(s, specs[k])) for k, s in shapes.items()
                      if not (k.endswith(".o_bias") and rank > 0))


def load_shard(cfg: EngineConfig, folder: str | Path, dtype: torch.dtype, device: torch.device, tp: int,
               rank: int, reserve_bytes: int = 0, ep: bool = False) -> dict[str, torch.Tensor]:
    """Rank `rank`'s shard of a checkpoint, read slice by slice (safetensors get_slice: only its bytes).

    Same checks as `weights.load_checkpoint`, before anything is allocated: every tensor present and of
    its shape, and room on the device for this rank's shard plus `reserve_bytes`.
    """
    ckpt = Checkpoint(folder)
    pl = plan(cfg, ckpt)
    validate(pl, ckpt)
    check_memory(local_bytes(cfg, tp, rank, dtype, ep) + reserve_bytes, device,
                 f"rank {rank}'s weight shard and KV cache")
    specs, shapes = shard_specs(cfg, tp, rank, ep), tensor_shapes(cfg)
    if cfg.tie_embeddings:  # lm_head is the embedding: read its rows of embed_tokens
        pl["lm_head"], shapes["lm_head"] = pl["embed"], shapes["embed"]
    out: dict[str, torch.Tensor] = {}
    for key, parts in pl.items():
        if key.endswith(".o_bias") and rank > 0:
            continue
        spec = specs[key]
        t = torch.zeros(local_shape(shapes[key], spec), dtype=dtype, device=device)
        for part in parts:
            for src, dst in _shard_parts(part, shapes[key], spec):
                if part.src:  # the part is rows part.src of its checkpoint tensor: shift the slice into them
                    if spec is None or spec[0] != 0 or len(part.src) != 1 or isinstance(part.dst[0], int):
                        raise ValueError(f"{part.name}: a part with its own rows is sharded only along dim 0")
                    first = part.src[0].start
                    src = (slice(first + src[0].start, first + src[0].stop), *src[1:])
                piece = ckpt.read_slice(part.name, src)
                t[dst].copy_(piece.to(dtype).reshape(t[dst].shape))  # (the conv's [C, 1, K] into [C, K])
        out[key] = t
    return out


def random_shard(cfg: EngineConfig, dtype: torch.dtype, device: torch.device, tp: int, rank: int, seed: int = 0,
                 reserve_bytes: int = 0, ep: bool = False) -> dict[str, torch.Tensor]:
    """Rank `rank`'s slice of the seeded random model `weights.random_weights(cfg, seed=seed)` draws."""
    from moelab.engine.weights import random_weights

    specs = shard_specs(cfg, tp, rank, ep)
    w = random_weights(cfg, dtype, device, seed=seed, reserve_bytes=reserve_bytes,
                       shard=lambda k, t: (t if k == "embed" else shard_tensor(k, t, specs[k], rank)),
                       need_bytes=local_bytes(cfg, tp, rank, dtype, ep))
    if cfg.tie_embeddings:
        w["lm_head"] = shard_tensor("lm_head", w["embed"], specs["lm_head"], rank)
    return w


class TPModel(Model):
    """`Model` over one rank's shard, with the all-reduces and the logits all-gather (module docstring)."""

    def __init__(self, cfg: EngineConfig, weights: dict[str, torch.Tensor], impl: str, comm: Comm,
                 overlap: bool = False, ep: bool = False):
        self.full_cfg, self.comm, self.overlap, self.ep = cfg, comm, overlap, ep
        super().__init__(local_config(cfg, comm.size, ep), weights, impl)
        self._views: dict[tuple[int, int, int], _CacheRows] = {}
        if ep:
            el = cfg.experts // comm.size
            self.layers = [(mixer, _ExpertParallel(mlp, comm.rank * el, el) if isinstance(mlp, MoE) else mlp, a, b)
                           for mixer, mlp, a, b in self.layers]
        if cfg.qk_norm == "full":
            _, _, rep = kv_heads_local(cfg, comm.size, comm.rank)
            widths = {"q": (cfg.heads * cfg.head_dim, 1), "k": (cfg.kv_heads * cfg.head_dim, rep)}
            for mixer, *_ in self.layers:
                mixer.full_norm = partial(self._full_norm, eps=cfg.rms_eps, widths=widths)

    def _full_norm(self, t, weight, which, *, eps, widths):
        width, replicas = widths[which]
        return distributed_rmsnorm(t, weight, eps, self.comm, width, replicas)

    def _run(self, tokens: torch.Tensor, mix) -> torch.Tensor:
        eps, reduce = self.cfg.rms_eps, self.comm.all_reduce
        h, residual = F.embedding(tokens, self.embed), None  # [T, H]
        norm = partial(self.add_rmsnorm, offset=self.cfg.offset_norm)
        for mixer, mlp, in_norm, post_norm in self.layers:
            x, residual = norm(h, residual, in_norm, eps)
            h = reduce(mix(mixer, x))  # attention partial sums -> the block's output
            x, residual = norm(h, residual, post_norm, eps)
            h = reduce(mlp(x))
        out, _ = norm(h, residual, self.final_norm, eps)
        return out

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., H] -> [..., V]: this rank's vocabulary rows, then an all-gather (padding rows cut off)."""
        return self.comm.all_gather_last(self.dense(hidden, self.lm_head))[..., : self.full_cfg.vocab]

    def decode(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache) -> torch.Tensor:
        if not self.overlap or tokens.shape[0] < 2 or self.comm.size == 1:
            return super().decode(tokens, positions, cache)
        return self._decode_overlapped(tokens, positions, cache)

    def _decode_overlapped(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """Two half-batches through the layers in alternation: half j's all-reduce is in flight while half
        1-j computes its block (every all-reduce but the last is overlapped)."""
        B, eps = tokens.shape[0], self.cfg.rms_eps
        halves = ((0, B // 2), (B // 2, B))
        steps = [DecodeStep(positions[a:b]) for a, b in halves]
        views = [self._rows(cache, a, b) for a, b in halves]
        h: list[torch.Tensor | Pending] = [F.embedding(tokens[a:b], self.embed) for a, b in halves]
        res: list[torch.Tensor | None] = [None, None]
        for mixer, mlp, in_norm, post_norm in self.layers:
            for norm, block in ((in_norm, lambda j, x: mixer.decode(x, steps[j], views[j])),
                                (post_norm, lambda j, x: mlp(x))):
                for j in (0, 1):
                    hj = h[j].wait() if isinstance(h[j], Pending) else h[j]
                    x, res[j] = self.add_rmsnorm(hj, res[j], norm, eps, offset=self.cfg.offset_norm)
                    h[j] = self.comm.all_reduce(block(j, x), async_op=True)
        out = [self.add_rmsnorm(h[j].wait(), res[j], self.final_norm, eps, offset=self.cfg.offset_norm)[0]
               for j in (0, 1)]
        return self.logits(torch.cat(out))

    def _rows(self, cache: KVCache, a: int, b: int) -> _CacheRows:
        key = (id(cache), a, b)
        if key not in self._views:
            self._views[key] = _CacheRows(cache, a, b)
        return self._views[key]


class _ExpertParallel:
    """A MoE block over experts first..first+n-1 only: other ranks' slots get weight 0 (module docstring)."""

    def __init__(self, moe: MoE, first: int, n: int):
        self.moe, self.first, self.n = moe, first, n

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        m = self.moe
        logits = F.linear(x, m.router)  # [T, E], replicated: every rank routes alike
        weights, ids = m.route(logits, m.cfg.top_k, "softmax", m.cfg.norm_topk_prob)  # [T, k], global ids
        local = ids - self.first
        mine = (local >= 0) & (local < self.n)
        ids = torch.where(mine, local, torch.zeros_like(local))
        return m.fused_moe(x, m.w13, m.w2, weights * mine.to(weights.dtype), ids, m.shared)


class _CacheRows:
    """Sequences a..b-1 of a KVCache, with its interface: views, so writes land in the cache itself."""

    def __init__(self, cache: KVCache, a: int, b: int):
        self.batch, self.max_len = b - a, cache.max_len
        self.k, self.v, self.conv, self.state = ([None if t is None else t[a:b] for t in ts]
                                                 for ts in (cache.k, cache.v, cache.conv, cache.state))


# ---------------------------------------------------------------- processes and the engine

def init_distributed(rank: int, world: int, local_rank: int, device: str | None = None) -> torch.device:
    """Join the process group (env:// rendezvous: MASTER_ADDR/MASTER_PORT, as torchrun sets them).
    NCCL with one GPU per rank when CUDA is here (and `device` is not "cpu"), else gloo."""
    use_cuda = torch.cuda.is_available() and (device is None or str(device).startswith("cuda"))
    if use_cuda:
        if local_rank >= torch.cuda.device_count():
            raise UserError(f"--tp {world}: rank {rank} needs GPU {local_rank}, but this machine has "
                            f"{torch.cuda.device_count()}")
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
    else:
        dev = torch.device("cpu")
        # The ranks share this machine's cores: without this each would start one thread per core.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    if not dist.is_initialized():
        dist.init_process_group("nccl" if use_cuda else "gloo", rank=rank, world_size=world,
                                **({"device_id": dev} if use_cuda else {}))
    return dev


def build_tp(model: str | Path, *, comm: Comm, weights: str | Path | None = None, random: bool = False,
             dtype: str | None = None, batch: int = 1, max_len: int = 2048, impl: str = "moelab",
             sampling=None, use_graphs: bool = True, seed: int = 0, keep_logits: bool = False,
             overlap: bool = False, ep: bool = False):
    """`engine.build` for one rank of a tensor-parallel group: this rank's shard, its KV heads' cache, and
    a `TPModel` forward. Every rank must call it with the same arguments."""
    from moelab.engine import Engine, Sampling, engine_config, parse_dtype, resolve

    spec, raw = resolve(model)
    cfg = engine_config(spec, raw)
    tp, rank, dev = comm.size, comm.rank, comm.device
    lcfg = local_config(cfg, tp, ep)  # the divisibility errors, before anything is read
    if random and weights is not None:
        raise UserError("pass either --weights DIR or --random, not both")
    if not random and weights is None:
        folder = Path(model).expanduser()
        folder = folder.parent if folder.is_file() else folder
        if folder.is_dir() and (any(folder.glob("*.safetensors")) or (folder / "model.safetensors.index.json").is_file()):
            weights = folder
        else:
            raise UserError(f"{model}: no weights here; pass --weights DIR (a safetensors checkpoint) or --random")
    dt = parse_dtype(dtype) if dtype else (torch.bfloat16 if random else parse_dtype(cfg.dtype))
    if impl not in ("moelab", "eager"):
        raise UserError(f"impl must be moelab or eager, not {impl!r}")
    if impl == "moelab" and dev.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise UserError("--impl moelab runs Triton kernels: it needs CUDA GPUs (or TRITON_INTERPRET=1); "
                        "use --impl eager here")
    if cfg.max_positions and max_len > cfg.max_positions:
        raise UserError(f"context {max_len} exceeds the model's max_position_embeddings {cfg.max_positions}")
    cache_bytes = KVCache.nbytes(lcfg, batch, max_len, dt)
    if random:
        w = random_shard(cfg, dt, dev, tp, rank, seed=seed, reserve_bytes=cache_bytes, ep=ep)
    else:
        w = load_shard(cfg, weights, dt, dev, tp, rank, reserve_bytes=cache_bytes, ep=ep)
    # Engine builds a plain Model of the local config (cheap: it only keeps references); the TP forward
    # replaces it. (An Engine(model=...) parameter in generate.py would make this direct.)
    eng = Engine(lcfg, w, batch=batch, max_len=max_len, impl=impl, sampling=sampling or Sampling(),
                 use_graphs=use_graphs, keep_logits=keep_logits)
    eng.model = TPModel(cfg, w, impl, comm, overlap=overlap, ep=ep)
    eng.spec, eng.tp, eng.comm = spec, tp, comm
    return eng


@contextlib.contextmanager
def group_scope():
    """Leave the process group on the way out: a rank whose work succeeded first meets the others at a barrier, so
    that every rank is done with every collective before any tears its group down (a rank whose peer closed its gloo
    pairs first could abort in teardown: seen once in CI as "terminate called without an active exception"). A rank
    that failed does not wait: its exit makes spawn (or torchrun) stop the others."""
    try:
        yield
        if dist.is_initialized():
            dist.barrier()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _spawned(local_rank: int, world: int, port: int, fn, args: tuple, errors) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(local_rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(local_rank))
    try:
        with group_scope():
            fn(*args)
    except UserError as e:
        errors.put((local_rank, str(e)))
        raise SystemExit(2) from None


def launch(world: int, fn, *args) -> None:
    """Run `fn(*args)` in `world` fresh processes (torch.multiprocessing spawn), ranks 0..world-1, with
    torchrun's environment variables set for a rendezvous on 127.0.0.1. A UserError in any rank is
    raised here, in the caller, as one line."""
    import torch.multiprocessing as mp

    from moelab.engine.comm import free_port

    # When one rank fails, spawn stops the others and logs each SIGTERM: noise beside the error we raise.
    logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)
    ctx = mp.get_context("spawn")
    errors = ctx.SimpleQueue()
    try:
        mp.start_processes(_spawned, args=(world, free_port(), fn, args, errors), nprocs=world, join=True,
                           start_method="spawn")
    except (mp.ProcessExitedException, mp.ProcessRaisedException):
        # A rank that refused the input exits (code 2) after queueing its message; the rank still joining the
        # process group then fails in gloo's rendezvous, and spawn may report that one first: the user error wins.
        if not errors.empty():
            rank, msg = errors.get()
            raise UserError(msg) from None
        raise


__all__ = ["Comm", "DEFAULT_ONESHOT_MAX_BYTES", "TPModel", "build_tp", "group_scope", "init_distributed",
           "kv_heads_local", "launch", "load_shard", "local_bytes", "local_config", "random_shard", "shard_specs",
           "shard_tensor"]
