"""Collectives of the tensor-parallel engine, over `torch.distributed` only (NCCL on GPUs, gloo on the CPU).

Two all-reduce paths, one interface (`Comm.all_reduce`):

  * "dist": `dist.all_reduce` on the process group — NCCL on CUDA, gloo on the CPU. Handles any size and
    can run asynchronously (`async_op=True`: the collective runs on the backend's own stream while the
    caller's stream proceeds; `Pending.wait()` joins them).
  * "oneshot": a one-shot all-reduce over peer-to-peer symmetric memory
    (`torch.distributed._symmetric_memory`, op `symm_mem.one_shot_all_reduce`): every rank copies its
    partial sum into a buffer that all peers can read, then reads all peers' buffers and sums them — one
    kernel, no ring, no protocol handshake: the latency of one P2P read of tp × message. For decode
    messages (hidden × batch × 2 bytes: 4 KiB at Qwen3-30B-A3B batch 1) latency is everything. CUDA only,
    synchronous (it runs on the caller's stream). NVLink multicast is never used: the one-shot kernel
    reads peers over P2P loads, and nothing here creates a multicast object or touches
    NCCL_NVLS_ENABLE / TORCH_SYMM_MEM_DISABLE_MULTICAST.

Which path a message takes: "oneshot" for messages of at most `oneshot_max_bytes`, "dist" above. The
threshold is to be measured on 2 and 4 H200s (`benchmarks/allreduce_tp.py`); until then it defaults to 0
(always "dist", i.e. NCCL), so nothing unmeasured is switched on by default.
"""

from __future__ import annotations

import os
import warnings

import torch
import torch.distributed as dist

from moelab.errors import UserError

# Bytes at or below which the one-shot path is taken. 0 = never, until measured (see module docstring).
DEFAULT_ONESHOT_MAX_BYTES = 0
# The symmetric buffers are sized once, for the largest message the one-shot path may carry.
_SYMM_BUFFER_BYTES = 1 << 20


class Pending:
    """An all-reduce in flight: `wait()` returns the reduced tensor (in place of the input)."""

    def __init__(self, tensor: torch.Tensor, work=None):
        self.tensor, self.work = tensor, work

    def wait(self) -> torch.Tensor:
        if self.work is not None:
            self.work.wait()  # on CUDA: the current stream waits for the NCCL stream (no host sync)
            self.work = None
        return self.tensor


def oneshot_unsupported_reason(device: torch.device) -> str | None:
    """Why the one-shot path cannot run here (None when it can)."""
    if device.type != "cuda":
        return "the one-shot all-reduce runs over CUDA symmetric memory: it needs CUDA GPUs (this is the CPU)"
    if not hasattr(torch.ops, "symm_mem") or not hasattr(torch.ops.symm_mem, "one_shot_all_reduce"):
        return f"this torch ({torch.__version__}) has no symm_mem.one_shot_all_reduce"
    return None


class Comm:
    """The engine's view of its tensor-parallel group: rank, size, all-reduce and all-gather.

    `oneshot_max_bytes` > 0 enables the one-shot path for messages up to that size (CUDA only; a clear
    error otherwise).
    """

    def __init__(self, group=None, *, oneshot_max_bytes: int = DEFAULT_ONESHOT_MAX_BYTES,
                 device: torch.device | None = None):
        if not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialised: call engine.tp.init_distributed first")
        self.group = group if group is not None else dist.group.WORLD
        self.rank, self.size = dist.get_rank(self.group), dist.get_world_size(self.group)
        self.device = device or torch.device("cpu")
        self.oneshot_max_bytes = min(oneshot_max_bytes, _SYMM_BUFFER_BYTES)
        self._symm: list[torch.Tensor] | None = None
        self._turn = 0
        # Calls made from Python, per path (a CUDA graph's replays are not counted: its capture is).
        self.calls = {"dist": 0, "oneshot": 0, "all_gather": 0}
        if oneshot_max_bytes > 0:
            why = oneshot_unsupported_reason(self.device)
            if why:
                raise UserError(f"--oneshot-max-bytes {oneshot_max_bytes}: {why}")
            self._setup_symm()

    def _setup_symm(self) -> None:
        import torch.distributed._symmetric_memory as symm_mem

        # Buffers mapped into every peer's address space by the rendezvous (P2P, no multicast). Two, used
        # in turn: a rank that has finished call n may write call n+1's input while a slower peer still
        # reads call n's from it; with two, it next writes the buffer of call n-1, which every peer has
        # finished reading once all have entered call n (the kernel's opening barrier). Under CUDA graphs
        # the turns are fixed at capture: a step must make an even number of one-shot calls (it does: two
        # per layer, all of one size).
        self._group_name = self.group.group_name
        if hasattr(symm_mem, "enable_symm_mem_for_group"):
            # Required by older torch, deprecated (unneeded, warns) in newer: call it, silence the warning.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                symm_mem.enable_symm_mem_for_group(self._group_name)
        self._symm = []
        for _ in range(2):
            buf = symm_mem.empty(_SYMM_BUFFER_BYTES, dtype=torch.uint8, device=self.device)
            symm_mem.rendezvous(buf, self.group)
            self._symm.append(buf)

    def path(self, t: torch.Tensor) -> str:
        nbytes = t.numel() * t.element_size()
        return "oneshot" if self._symm is not None and 0 < nbytes <= self.oneshot_max_bytes else "dist"

    def all_reduce(self, t: torch.Tensor, *, async_op: bool = False) -> torch.Tensor | Pending:
        """Sum of `t` over the ranks (every rank gets it). Returns the tensor, or a `Pending` when `async_op`.

        The "dist" path (NCCL, or gloo on the CPU) reduces `t` in place; the one-shot path returns a new
        tensor and is always synchronous with the caller's stream (a `Pending` already done, under `async_op`).
        """
        if self.size == 1:
            return Pending(t) if async_op else t
        if self.path(t) == "oneshot":
            self.calls["oneshot"] += 1
            out = self._oneshot(t)
            return Pending(out) if async_op else out
        self.calls["dist"] += 1
        if async_op:
            return Pending(t, dist.all_reduce(t, group=self.group, async_op=True))
        dist.all_reduce(t, group=self.group)
        return t

    def _oneshot(self, t: torch.Tensor) -> torch.Tensor:
        ops = torch.ops.symm_mem
        flat = t.contiguous().view(-1)
        buf = self._symm[self._turn].view(t.dtype)[: flat.numel()]
        self._turn ^= 1
        if hasattr(ops, "one_shot_all_reduce_copy"):  # the copy into the symmetric buffer fused in
            out = ops.one_shot_all_reduce_copy(buf, flat, "sum", self._group_name)
        else:
            buf.copy_(flat)
            out = ops.one_shot_all_reduce(buf, "sum", self._group_name)
        return out.view(t.shape)

    def all_gather_last(self, t: torch.Tensor) -> torch.Tensor:
        """[..., n] on each rank -> [..., size·n], rank r's block at columns r·n..(r+1)·n-1."""
        if self.size == 1:
            return t
        self.calls["all_gather"] += 1
        parts = [torch.empty_like(t) for _ in range(self.size)]
        dist.all_gather(parts, t.contiguous(), group=self.group)
        return torch.cat(parts, dim=-1)


def distributed_rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float, comm: Comm, full_width: int,
                        replicas: int = 1) -> torch.Tensor:
    """RMSNorm over a last dim split across ranks: x [T, n_local] is this rank's columns of a [T, full_width]
    row, weight [n_local] its slice of the norm weight.

    out = weight · x / sqrt(Σ_all ranks x² / full_width + eps), in `rmsnorm_reference`'s casting (fp32 math,
    rounded to x's dtype before the weight). `replicas` = how many ranks hold each column (KV heads
    replicated when fewer than tp), so replicated columns are counted once. One all-reduce of [T, 1] fp32.
    """
    h = x.float()
    ss = h.pow(2).sum(-1, keepdim=True)  # [T, 1]
    ss = comm.all_reduce(ss)
    if replicas != 1:
        ss = ss / replicas
    h = h * torch.rsqrt(ss / full_width + eps)
    return weight * h.to(x.dtype)


def free_port() -> int:
    """A free TCP port on 127.0.0.1, for a local rendezvous."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_world() -> tuple[int, int, int] | None:
    """(rank, world size, local rank) when started by torchrun (its env vars are set), else None."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        ws = int(os.environ["WORLD_SIZE"])
        return int(os.environ["RANK"]), ws, int(os.environ.get("LOCAL_RANK", os.environ["RANK"]))
    return None
