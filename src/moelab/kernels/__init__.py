"""Triton kernels, one op per file. Launchers check their arguments; the public ops live in `moelab.ops`."""

import functools
import os

import torch


def dot_precision(dtype: torch.dtype, op: str) -> str:
    """`input_precision` for tl.dot: fp32 tasks get true fp32 products (Triton's fp32 default is tf32).

    Every launcher of a kernel with a tl.dot asks here, so a bf16 dot under the Triton interpreter is refused:
    the interpreter returns garbage for it (a 16×16 bf16 product was off by 3e10 with Triton 3.9, 2026-12-01), a
    wrong answer that no error would report."""
    if dtype == torch.bfloat16 and interpreting():
        raise ValueError(f"{op}: a bfloat16 tl.dot cannot run under the Triton interpreter (TRITON_INTERPRET=1: it "
                         "returns garbage); run bfloat16 on a GPU, or float16/float32 on the CPU")
    return "ieee" if dtype == torch.float32 else "tf32"


def cdiv(a: int, b: int) -> int:
    """⌈a / b⌉, for launchers. `triton.cdiv` is a constexpr function in Triton 3.9: called from Python it costs
    about 3 µs, and a launcher makes up to ten such calls (CPU, no-op kernels: the linear launcher took 51 µs with
    them, 15 µs with these)."""
    return -(-a // b)


def next_pow2(n: int) -> int:
    """The smallest power of two ≥ n (0 for n = 0, as `triton.next_power_of_2` gives), for launchers: see `cdiv`."""
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


def env_int(name: str, default: int) -> int:
    """An integer A/B switch read at launch time (so `benchmarks/ab_chain.py` can flip it between graph captures):
    $name, or `default` when unset; a value that is not an integer is a ValueError naming the variable."""
    v = os.environ.get(name)
    if v is None:
        return default
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"{name} must be an integer, not {v!r}") from None


def env_flag(name: str, default: bool = False) -> bool:
    """An on/off A/B switch read at launch time, like `env_int`: $name set to anything but "" or "0" is on."""
    v = os.environ.get(name)
    return default if v is None else v not in ("", "0")


def interpreting() -> bool:
    """True under the Triton interpreter (TRITON_INTERPRET=1), which runs kernels as Python on the CPU."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def check_device(t: torch.Tensor, name: str) -> None:
    """A launcher's first argument must be a CUDA tensor, or any tensor under the interpreter: Triton given a CPU
    tensor on a machine with a GPU fails deep in its launcher ("Pointer argument cannot be accessed")."""
    if t.device.type != "cuda" and not interpreting():
        raise ValueError(f"{name} is on {t.device}; moelab's Triton kernels need a CUDA tensor (or TRITON_INTERPRET=1 "
                         "to run them on the CPU)")


def pdl_supported(device: torch.device) -> bool:
    """Programmatic dependent launch on `device`: a CUDA GPU of compute capability ≥ 9 (Hopper), not the
    interpreter (griddepcontrol is inline PTX), and not switched off with MOELAB_PDL=0.

    How moelab uses it (benchmarks/check_pdl.py, H200 2026-12-01: a chain of 8 MB GEMVs went from 5.1 to 3.5 µs
    per kernel when each requested its first weight tile before waiting; launching with PDL but loading nothing
    before the wait gained 0.1 µs): kernels that stream weights are launched with PDL and load their first tile
    before `gdc_wait`; the small kernels before them call `gdc_launch_dependents` as they start, so the weight
    kernel's programs are resident and loading while the small kernel runs. Up to CHAIN_MAX_T tokens the whole
    step is such a chain (`chain_pdl`). A PDL-launched kernel reads nothing a previous kernel wrote, and writes nothing,
    before its `gdc_wait` — every program of it calls the wait. One exception: the pair kernel's phase 2 from T=2
    (`moe_pairs`), released by phase 1 only after phase 1's own wait, reads phase 1's output through acquire/release
    counters instead.
    """
    if device.type != "cuda" or interpreting() or not env_flag("MOELAB_PDL", True):
        return False
    return _hopper_or_newer(device.index if device.index is not None else torch.cuda.current_device())


# Up to this many rows the whole decode step is one PDL chain (`chain_pdl`). Measured on the H200 with
# benchmarks/ab_chain.py: batch 1 went from 2.695 to 2.458 ms per token with every link below (session 6,
# ab-chain-…T165231 / …T170042 / …T170247 / …T170336). At batch 8 the same links then cost 0.5–0.9 %, with GEMVs
# holding several chunks per program at T=8. Since the tensor-core linear took T ≥ 4, and with the census kernel
# joining the chain as the pair kernel does, batch 8 went from 7.86 to 7.75 ms per token with the chain, the
# same tokens (session 10, ab-chain-…T020725). T=3..7 are unmeasured; batch 32 is outside the chain (within 0.4 %
# in session 6). At batch 16 the chain to 16 rows: 11.19 → 10.96 ms per token (session 19, ab-chain-…T191253; the
# bf16 tokens not the same, since the tensor-core linear's whole-K split sums in another order; in fp32 the engine
# matches transformers at batch 16 either way, tests/engine/test_generate.py), the census kernel alone at T=16
# 182.7 → 181.0 µs with routing (sweep-moe-block-chain-…T1913). T=9..15 are unmeasured.
CHAIN_MAX_T = 16
# The GEMV's whole-K slices before the wait (`linear_config(whole_k=True)`) stay where session 6 measured them.
WHOLE_K_MAX_T = 2


def chain_max_t() -> int:
    """CHAIN_MAX_T, or $MOELAB_CHAIN_MAX_T (read at every launch, for benchmarks/ab_chain.py's A/Bs)."""
    return env_int("MOELAB_CHAIN_MAX_T", CHAIN_MAX_T)


def chain_pdl(device: torch.device, rows: int) -> bool:
    """Whether a decode kernel of `rows` tokens joins the step-long PDL chain: `pdl_supported` and rows ≤
    `chain_max_t()` (CHAIN_MAX_T, or $MOELAB_CHAIN_MAX_T).

    The chain, link by link (each a PDL launch whose program requests what no earlier kernel writes, then waits):
      * at T ≤ WHOLE_K_MAX_T the GEMVs request their whole weight slice before `gdc_wait` where it fits 32 KB per
        program (`linear_config(whole_k=True)`: qkv, o and lm_head of Qwen3-30B-A3B; a longer K keeps the streaming
        loop); the tensor-core linear (T ≥ 4) requests its whole slice too, one 64 × 256 chunk per split
        (`dot_config(whole_k=True)`; batch 8 7.71 → 7.63 ms, session 14);
      * the attention split kernel releases the combine (PDL-launched) once its q is in registers, and the combine
        releases the o projection as it starts, so the o weight streams during the split;
      * the norms are PDL-launched (their weight read before the wait); the pair kernel (`moe_pairs`, up to
        `pairs_max_t(I)` tokens) and the census kernel (`moe_decode`) release them as each program starts, so the
        next layer's norm and qkv projection are resident and loading in the experts' tail;
      * the one-launch router releases the experts' kernel as it starts, which waits in hardware (`gdc_wait`),
        not spinning. (Eagerly `fused_moe` checks the ids on the host between the two, so this link holds in CUDA
        graphs, where decode runs.)
      * a GEMV releases the next kernel once its products are summed, except at one row where the engine says the
        next kernel reads nothing of this step before its wait (`moelab.ops.linear.dense(release_early=True)`: o → the
        norm, the Gated DeltaNet's input projection → its recurrence, which then reads its state before the wait too,
        and its output projection → the norm): there each program releases it as it starts (session 34).
    A launcher that had to copy what its kernel reads before the wait (a strided norm weight) launches without PDL.
    """
    return rows <= chain_max_t() and pdl_supported(device)


@functools.lru_cache(maxsize=None)
def _hopper_or_newer(index: int) -> bool:  # asked at every launch: cached (host time matters when not in a graph)
    return torch.cuda.get_device_capability(index)[0] >= 9


# int32s between two arrival counters of the MoE decode kernels (`moe_pairs`, `moe_decode`): 32 gives each a 128-byte
# line of its own, so phase 2's polls of a slot's counter and phase 1's release atomics on its neighbours do not share
# a line. benchmarks/probe_links.py (H200, session 20, probe-links-…T141657): 128 programs a step polling packed
# counters cost 15.3 µs a link, 3.6 with the counters 32 apart. Route + experts, two passes
# (sweep-moe-block-cs-…T1417): Qwen3-30B-A3B T=1 25.71 → 24.98 µs, T=2 42.16 → 41.72, T=8 and 16 a tie (125.9 / 126.1,
# 212.0 / 212.6); Qwen3.5 T=1 23.86 → 22.38; its tp=4 shard T=1 13.29 → 12.28, T=2 16.83 → 15.36, T=8 65.4 → 60.4,
# T=16 94.6 → 92.3. Batch 1 end to end 2.40 → 2.37 ms per token, the same tokens (ab-chain-…T141806); batch 8 a tie
# (ab-chain-…T142157). 1 packs them, as every session before 20 ran; $MOELAB_CNT_STRIDE overrides it (read at launch:
# an A/B switch).
COUNTER_STRIDE = 32


def counter_stride() -> int:
    """COUNTER_STRIDE, or $MOELAB_CNT_STRIDE (1..64)."""
    cs = env_int("MOELAB_CNT_STRIDE", COUNTER_STRIDE)
    if not 1 <= cs <= 64:
        raise ValueError(f"MOELAB_CNT_STRIDE must be 1..64, not {cs}")
    return cs


_COUNTERS: dict[tuple[str, str], torch.Tensor] = {}
_RETIRED: list[torch.Tensor] = []  # outgrown counter buffers: a captured CUDA graph may still point at one


def counters(device: torch.device, n: int, owner: str) -> torch.Tensor:
    """At least n int32 counters for the kernels of `owner` ("moe", "router", "linear", "attention") on `device`, zero
    between calls: every kernel that counts arrivals resets what it used before it ends, so no memset launch is needed.

    One buffer per (device, owner), not per stream, so a graph captured on torch's capture stream finds the buffer
    its eager warm-up made; allocating inside a capture would give memory of the graph's pool, zeroed only when
    the graph replays, so that is refused with a clear error. Kernels that can overlap on one stream
    (programmatic dependent launch) use different owners; the same owner must not run on two streams at once.
    """
    key = (str(device), owner)
    c = _COUNTERS.get(key)
    if c is None or c.numel() < n:
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise ValueError(f"{owner}: its arrival counters would be allocated inside a CUDA graph capture; "
                             "call it once (eagerly) before capturing")
        if c is not None:
            _RETIRED.append(c)
        c = _COUNTERS[key] = torch.zeros(max(n, 4096), dtype=torch.int32, device=device)
    return c
