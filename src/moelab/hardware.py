"""Hardware ceilings: measured on this GPU (cached per GPU) or a datasheet row of a known GPU.

    ceilings()          this GPU's measured ceilings (probed once, then read from the cache)
    ceilings("h200")    the datasheet row of a known GPU (case-insensitive; aliases accepted)
    known_gpus()        every shipped row
    probe()             measure now (what `moelab hw --refresh` runs)

A measured probe is always preferred to a datasheet row: datasheet bandwidths are peaks no kernel reaches
(the H200's 4.8 TB/s datasheet figure against the 4.1-4.4 TB/s real kernels read, FACTS.md). Every value
carries a note saying where it comes from (`Ceilings.notes`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from moelab.errors import UserError


@dataclass
class Ceilings:
    """What a GPU can do at best. Rates in decimal units: GB/s = 1e9 bytes/s, TFLOP/s = 1e12 FLOP/s."""

    name: str
    source: str  # "measured" or "datasheet: <where the numbers come from>"
    read_gbps: float  # best measured streaming read (the memory-bound floor uses this)
    copy_gbps: float | None  # device-to-device copy, bytes read + written
    bf16_tflops: float  # dense matmul rate
    fp16_tflops: float
    fp8_tflops: float | None = None
    launch_triton_us: float | None = None  # host cost of one Triton launch from Python
    launch_torch_us: float | None = None  # host cost of one small torch op
    graph_kernel_us: float | None = None  # per-kernel cost when replayed from a CUDA graph
    sm_count: int | None = None
    l2_bytes: int | None = None
    warp_size: int | None = None
    memory_gb: float | None = None
    interconnect_gbps: float | None = None  # per-GPU all-reduce bus bandwidth (NVLink etc.), for tp estimates
    extra: dict = field(default_factory=dict)
    notes: dict = field(default_factory=dict)  # field name -> where its value comes from / how it was measured

    def ridge_bf16(self) -> float:
        """FLOP per byte above which a bf16 op is compute-bound: bf16 rate / read bandwidth."""
        return self.bf16_tflops * 1e12 / (self.read_gbps * 1e9)

    def ridge(self, dtype: str = "bf16") -> float | None:
        """Ridge point (FLOP/byte) for `dtype` in {"bf16", "fp16", "fp8"}: matmul rate / read bandwidth."""
        rate = {"bf16": self.bf16_tflops, "fp16": self.fp16_tflops, "fp8": self.fp8_tflops}.get(dtype, "?")
        if rate == "?":
            raise ValueError(f"ridge: dtype must be bf16, fp16 or fp8, not {dtype!r}")
        return None if rate is None else rate * 1e12 / (self.read_gbps * 1e9)

    @property
    def measured(self) -> bool:
        return self.source == "measured"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ridge_bf16"] = self.ridge_bf16()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Ceilings:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


# ----------------------------------------------------------------------------------------------------
# Known GPUs. Rates are dense (no 2:4 sparsity); where a datasheet prints the sparse figure, the dense one
# is half of it and the note says so. interconnect_gbps is one direction (an all-reduce's bus bandwidth is
# bounded by what one GPU can send while it receives the same), i.e. half the bidirectional figure.

_GB = 10**9
_MiB = 2**20

_KNOWN: list[Ceilings] = [
    Ceilings(
        name="H100 SXM", source="datasheet: NVIDIA H100 Tensor Core GPU datasheet (SXM) and H100 whitepaper",
        read_gbps=3350.0, copy_gbps=None, bf16_tflops=989.4, fp16_tflops=989.4, fp8_tflops=1978.9,
        sm_count=132, l2_bytes=50 * _MiB, warp_size=32, memory_gb=80.0, interconnect_gbps=450.0,
        notes={
            "read_gbps": "datasheet HBM3 bandwidth 3.35 TB/s (a peak; measured reads are lower)",
            "bf16_tflops": "whitepaper dense BF16 989.4 (datasheet prints 1,979 with sparsity)",
            "fp16_tflops": "whitepaper dense FP16 989.4 (datasheet prints 1,979 with sparsity)",
            "fp8_tflops": "whitepaper dense FP8 1,978.9 (datasheet prints 3,958 with sparsity)",
            "sm_count": "whitepaper: 132 SMs on H100 SXM5", "l2_bytes": "whitepaper: 50 MB L2",
            "warp_size": "CUDA: 32 threads per warp on every NVIDIA GPU so far",
            "memory_gb": "datasheet: 80 GB HBM3",
            "interconnect_gbps": "datasheet NVLink 900 GB/s bidirectional -> 450 GB/s each way",
        },
    ),
    Ceilings(
        name="H200", source="datasheet: NVIDIA H200 Tensor Core GPU datasheet (SXM); FACTS.md device query",
        read_gbps=4800.0, copy_gbps=4220.0, bf16_tflops=989.4, fp16_tflops=989.4, fp8_tflops=1978.9,
        launch_triton_us=17.0, launch_torch_us=24.0, graph_kernel_us=0.87,
        sm_count=132, l2_bytes=60 * _MiB, warp_size=32, memory_gb=141.0, interconnect_gbps=450.0,
        extra={"measured_triton_read_gbps": 4130.0,
               "measured_cudnn_attention_read_gbps": 4400.0, "measured_bf16_tflops": 745.0},
        notes={
            "read_gbps": "datasheet HBM3e bandwidth 4.8 TB/s (a peak; FACTS.md measured 4.13 TB/s with a simple "
                         "Triton read, 4.4 TB/s by cuDNN attention, 2026-12-01)",
            "copy_gbps": "FACTS.md: measured copy, bytes read + written, 2026-12-01 (no datasheet figure)",
            "bf16_tflops": "datasheet 1,979 with sparsity -> 989.4 dense (FACTS.md measured 745 at 8192^3)",
            "fp16_tflops": "datasheet 1,979 with sparsity -> 989.4 dense",
            "fp8_tflops": "datasheet 3,958 with sparsity -> 1,979 dense",
            "launch_triton_us": "FACTS.md, measured on the project's H200 from Python, 2026-12-01",
            "launch_torch_us": "FACTS.md, measured on the project's H200 from Python, 2026-12-01",
            "graph_kernel_us": "FACTS.md, per kernel replayed from a CUDA graph, 2026-12-01",
            "sm_count": "FACTS.md device query: 132 SMs", "l2_bytes": "FACTS.md device query: 60 MB L2",
            "warp_size": "FACTS.md device query", "memory_gb": "datasheet: 141 GB HBM3e",
            "interconnect_gbps": "datasheet NVLink 900 GB/s bidirectional -> 450 GB/s each way",
        },
    ),
    Ceilings(
        name="B200", source="datasheet: NVIDIA HGX/DGX B200 (1,000 W configuration)",
        read_gbps=8000.0, copy_gbps=None, bf16_tflops=2250.0, fp16_tflops=2250.0, fp8_tflops=4500.0,
        sm_count=148, l2_bytes=126 * _MiB, warp_size=32, memory_gb=180.0, interconnect_gbps=900.0,
        notes={
            "read_gbps": "datasheet HBM3e bandwidth 8 TB/s",
            "bf16_tflops": "HGX B200 dense BF16 2,250 (4,500 with sparsity)",
            "fp16_tflops": "HGX B200 dense FP16 2,250 (4,500 with sparsity)",
            "fp8_tflops": "HGX B200 dense FP8 4,500 (9,000 with sparsity)",
            "sm_count": "Chips and Cheese's B200 article: 74 SMs enabled per die x 2 = 148",
            "warp_size": "CUDA: 32 threads per warp on every NVIDIA GPU so far",
            "l2_bytes": "126 MB L2, as reported for Blackwell B200 (not on the datasheet)",
            "memory_gb": "HGX B200: 1,440 GB over 8 GPUs = 180 GB per GPU (192 GB physical)",
            "interconnect_gbps": "NVLink 5: 1.8 TB/s bidirectional per GPU -> 900 GB/s each way",
        },
    ),
    Ceilings(
        name="A100 80GB SXM", source="datasheet: NVIDIA A100 Tensor Core GPU datasheet (80GB SXM) and A100 whitepaper",
        read_gbps=2039.0, copy_gbps=None, bf16_tflops=312.0, fp16_tflops=312.0, fp8_tflops=None,
        sm_count=108, l2_bytes=40 * _MiB, warp_size=32, memory_gb=80.0, interconnect_gbps=300.0,
        notes={
            "read_gbps": "datasheet HBM2e bandwidth 2,039 GB/s",
            "bf16_tflops": "datasheet dense BF16 312 (624 with sparsity)",
            "fp16_tflops": "datasheet dense FP16 312 (624 with sparsity)",
            "fp8_tflops": "Ampere has no FP8 tensor cores",
            "sm_count": "whitepaper: 108 SMs", "l2_bytes": "whitepaper: 40 MB L2",
            "warp_size": "CUDA: 32 threads per warp on every NVIDIA GPU so far",
            "memory_gb": "datasheet: 80 GB HBM2e",
            "interconnect_gbps": "datasheet NVLink 600 GB/s bidirectional -> 300 GB/s each way",
        },
    ),
    Ceilings(
        name="MI300X", source="datasheet: AMD Instinct MI300X accelerator data sheet",
        read_gbps=5300.0, copy_gbps=None, bf16_tflops=1307.4, fp16_tflops=1307.4, fp8_tflops=2614.9,
        sm_count=304, l2_bytes=32 * _MiB, warp_size=64, memory_gb=192.0, interconnect_gbps=448.0,
        extra={"infinity_cache_bytes": 256 * _MiB},
        notes={
            "read_gbps": "data sheet HBM3 peak bandwidth 5.3 TB/s",
            "bf16_tflops": "data sheet peak dense BF16 1,307.4 (2,614.9 with structured sparsity)",
            "fp16_tflops": "data sheet peak dense FP16 1,307.4 (2,614.9 with structured sparsity)",
            "fp8_tflops": "data sheet peak dense FP8 2,614.9 (5,229.8 with structured sparsity)",
            "sm_count": "data sheet: 304 compute units (CUs, not SMs)",
            "l2_bytes": "CDNA3: 4 MB L2 per XCD x 8 XCDs; the 256 MB Infinity Cache behind it is in extra",
            "warp_size": "CDNA wavefront: 64 lanes",
            "memory_gb": "data sheet: 192 GB HBM3",
            "interconnect_gbps": "Infinity Fabric: 7 links, 896 GB/s aggregate bidirectional -> 448 GB/s each way",
        },
    ),
    Ceilings(
        name="RTX 4090", source="datasheet: NVIDIA Ada Lovelace architecture whitepaper (GeForce RTX 4090)",
        read_gbps=1008.0, copy_gbps=None, bf16_tflops=165.2, fp16_tflops=165.2, fp8_tflops=330.3,
        sm_count=128, l2_bytes=72 * _MiB, warp_size=32, memory_gb=24.0, interconnect_gbps=32.0,
        notes={
            "read_gbps": "whitepaper GDDR6X bandwidth 1,008 GB/s",
            "bf16_tflops": "whitepaper dense BF16 with FP32 accumulate 165.2 (330.4 with sparsity)",
            "fp16_tflops": "whitepaper dense FP16 with FP32 accumulate 165.2 (330.3 with FP16 accumulate)",
            "fp8_tflops": "whitepaper dense FP8 with FP32 accumulate 330.3",
            "sm_count": "whitepaper: 128 SMs", "l2_bytes": "whitepaper: 72 MB L2",
            "warp_size": "CUDA: 32 threads per warp on every NVIDIA GPU so far",
            "memory_gb": "24 GB GDDR6X",
            "interconnect_gbps": "no NVLink: PCIe 4.0 x16, ~32 GB/s each way",
        },
    ),
    Ceilings(
        name="Iluvatar BI-V100", source="worklog: the first worklog's on-device measurements (seeds/000)",
        read_gbps=584.2, copy_gbps=584.2, bf16_tflops=32.0, fp16_tflops=32.0, fp8_tflops=None,
        warp_size=64, memory_gb=32.0,
        extra={"empty_kernel_launch_us": 6.2},
        notes={
            "read_gbps": "worklog: 584.2 GB/s measured with a 128 MB contiguous copy (the worklog's bandwidth "
                         "ceiling; whether it counts read+write is not stated)",
            "copy_gbps": "worklog: 584.2 GB/s, 128 MB contiguous copy",
            "fp16_tflops": "worklog: FP16 about 32 TFLOP/s",
            "bf16_tflops": "not in the worklog; set equal to its FP16 figure",
            "warp_size": "worklog: 64, read from warpSize inside a kernel",
            "memory_gb": "worklog: 32 GB HBM2",
            "extra": "worklog: empty kernel launch 6.2 us (not a Python-side launch, so not launch_triton_us)",
        },
    ),
    Ceilings(
        name="Strix Halo gfx1151", source="datasheet: AMD Ryzen AI Max+ 395 / Radeon 8060S specs; the second worklog",
        read_gbps=256.0, copy_gbps=None, bf16_tflops=59.4, fp16_tflops=59.4, fp8_tflops=None,
        sm_count=40, warp_size=32, memory_gb=128.0,
        extra={"worklog_effective_read_gbps": 207.0, "worklog_fp32_matmul_tflops": 2.86,
               "torch_multi_processor_count": 20},
        notes={
            "read_gbps": "LPDDR5X-8000 on a 256-bit bus = 256 GB/s theoretical; the second worklog saw ~207 GB/s "
                         "effective in dense-model decode",
            "bf16_tflops": "RDNA 3.5 WMMA: 512 FLOP/clock/CU x 40 CUs x 2.9 GHz = 59.4 (theoretical)",
            "fp16_tflops": "RDNA 3.5 WMMA: 512 FLOP/clock/CU x 40 CUs x 2.9 GHz = 59.4 (theoretical)",
            "fp8_tflops": "RDNA 3.5 has no FP8 matrix instructions",
            "sm_count": "Radeon 8060S: 40 CUs (torch reported 20, the WGP count, in the worklog)",
            "warp_size": "RDNA wave32, the width Triton uses on gfx11",
            "memory_gb": "up to 128 GB unified LPDDR5X shared with the CPU (the worklog's torch saw 61.9 GB)",
        },
    ),
]

# Normalised alias -> row name. Normalising drops case, spaces, dashes and vendor words.
_ALIASES: dict[str, str] = {
    "h100": "H100 SXM", "h100sxm": "H100 SXM", "h100sxm5": "H100 SXM", "h10080gbhbm3": "H100 SXM",
    "h200": "H200", "h200sxm": "H200", "h200141gb": "H200", "h200141gbhbm3e": "H200",
    "b200": "B200",
    "a100": "A100 80GB SXM", "a10080gb": "A100 80GB SXM", "a10080gbsxm": "A100 80GB SXM",
    "a100sxm480gb": "A100 80GB SXM", "a100sxm80gb": "A100 80GB SXM",
    "mi300x": "MI300X",
    "4090": "RTX 4090", "rtx4090": "RTX 4090",
    "biv100": "Iluvatar BI-V100", "iluvatarbiv100": "Iluvatar BI-V100",
    "gfx1151": "Strix Halo gfx1151", "strixhalo": "Strix Halo gfx1151", "strixhalogfx1151": "Strix Halo gfx1151",
    "8060s": "Strix Halo gfx1151", "ryzenaimax395": "Strix Halo gfx1151",
}
_VENDOR_WORDS = ("nvidia", "amd", "geforce", "radeon", "instinct", "tesla", "iluvatar")


def _normalise(name: str) -> str:
    s = re.sub(r"[^a-z0-9]", "", name.lower())
    for w in _VENDOR_WORDS:
        if s.startswith(w) and len(s) > len(w):
            s = s[len(w):]
    return s


def known_gpus() -> list[Ceilings]:
    """Every shipped datasheet/worklog row (copies: callers may modify them)."""
    return [Ceilings.from_dict(asdict(c)) for c in _KNOWN]


def known_names() -> list[str]:
    """Short names accepted by `ceilings(NAME)` and `moelab hw --gpu NAME`."""
    return ["h100", "h200", "b200", "a100", "mi300x", "4090", "bi-v100", "gfx1151"]


def lookup(name: str) -> Ceilings | None:
    """The known row whose name or alias matches `name` (case and punctuation ignored), or None."""
    key = _normalise(name)
    by_norm = {_normalise(c.name): c.name for c in _KNOWN}
    row = _ALIASES.get(key) or by_norm.get(key)
    return next((Ceilings.from_dict(asdict(c)) for c in _KNOWN if c.name == row), None)


def match_device(device_name: str) -> Ceilings | None:
    """The known row for a device name as the driver reports it (e.g. "NVIDIA H200" -> H200), or None."""
    norm = _normalise(device_name)
    if "pcie" in norm:  # the shipped rows are SXM/OAM parts; a PCIe card has other clocks and bandwidth
        return None
    for alias, row in sorted(_ALIASES.items(), key=lambda kv: -len(kv[0])):
        if len(alias) >= 4 and alias in norm:
            return lookup(row)
    return None


# ----------------------------------------------------------------------------------------------------
# Cache: one JSON file per (device, driver, torch, triton).

def cache_dir() -> Path:
    """$MOELAB_CACHE_DIR, else $XDG_CACHE_HOME/moelab, else ~/.cache/moelab."""
    if os.environ.get("MOELAB_CACHE_DIR"):
        return Path(os.environ["MOELAB_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "moelab"


def cache_key(env: dict[str, Any]) -> dict[str, str]:
    """What a cached probe is valid for: the device and the software that measured it."""
    return {k: str(env.get(k, "unknown")) for k in ("device", "driver", "torch", "triton")}


def cache_path(key: dict[str, str], directory: str | os.PathLike | None = None) -> Path:
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", key["device"]).strip("-").lower()
    return Path(directory or cache_dir()) / f"ceilings-{slug}-{digest}.json"


def save_cached(c: Ceilings, key: dict[str, str], directory: str | os.PathLike | None = None) -> Path:
    path = cache_path(key, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"key": key, "ceilings": c.to_dict()}, indent=1, default=float) + "\n")
    tmp.replace(path)  # atomic: a half-written cache is never read
    return path


def load_cached(key: dict[str, str], directory: str | os.PathLike | None = None) -> Ceilings | None:
    """The cached probe for `key`, or None when absent, unreadable or made for another key."""
    path = cache_path(key, directory)
    try:
        body = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict) or body.get("key") != key or not isinstance(body.get("ceilings"), dict):
        return None
    try:
        return Ceilings.from_dict(body["ceilings"])
    except TypeError:  # written by an older layout missing a required field: measure again
        return None


def _no_gpu_message() -> str:
    return f"no GPU here; pass --gpu NAME (known: {', '.join(known_names())})"


def ceilings(gpu: str | None = None, *, refresh: bool = False, quick: bool = False,
             directory: str | os.PathLike | None = None,
             log: Callable[[str], None] | None = None) -> Ceilings:
    """Ceilings of this GPU (gpu None or "measured") or of a known GPU by name.

    Measured: read from the per-GPU cache, probing (and caching) when absent or when `refresh`.
    Raises UserError when no GPU is present and none is named, or when the name is unknown.
    """
    if gpu is not None and gpu.strip().lower() != "measured":
        row = lookup(gpu)
        if row is None:
            raise UserError(f"unknown GPU {gpu!r}; known: {', '.join(known_names())}")
        return row
    import torch

    if not torch.cuda.is_available():
        raise UserError(_no_gpu_message())
    from moelab.timing import env_record

    key = cache_key(env_record())
    if not refresh:
        cached = load_cached(key, directory)
        if cached is not None:
            return cached
    if log is None:  # a first call stalls for about a minute: say why, once, on stderr
        import sys

        print(f"moelab: measuring this GPU's ceilings ({key['device']}); cached afterwards, "
              f"`moelab hw` shows them", file=sys.stderr)
    c = probe(quick=quick, log=log)
    save_cached(c, key, directory)
    return c


# ----------------------------------------------------------------------------------------------------
# The probe. Every time comes from moelab.timing.measure (CUDA-graph replay unless the launch cost itself
# is the quantity); every rate is amount / median time.

# (block int32 words, num_warps, programs per SM) tried for the Triton read. The first six are the best of
# the probe's first run on the H200 (2026-12-01, Triton 3.6, 4 GiB buffer; benchmarks/results/
# hw-nvidia-h200-20261201T051455.json): 8192×8 warps×8/SM 4,525 GB/s, 8192×8×4 4,497, 4096×4×8 4,497,
# 16384×8×2 4,496, 4096×8×4 4,492, 16384×8×4 4,490 (spreads ~1 %); 8192×4×8 (4,243) and 16384×16×2
# (4,124) were dropped. The last two are untried neighbours. benchmarks/sweep_stream.py sweeps the space.
READ_CONFIGS = [(8192, 8, 8), (8192, 8, 4), (4096, 4, 8), (16384, 8, 2), (4096, 8, 4), (16384, 8, 4),
                (8192, 8, 2), (2048, 4, 8)]
READ_CONFIGS_QUICK = [(8192, 8, 8), (4096, 4, 8)]
_GiB = 2**30


def _timed(fn: Callable, arg_sets: list[tuple], amount: float, *, mode: str = "graph", samples: int) -> dict:
    """Time fn with the one timer; rate = amount / median (amount in bytes or FLOPs, rate per second)."""
    from moelab.timing import measure

    m = measure(fn, arg_sets, mode=mode, samples=samples)
    return {"rate_per_s": amount / (m.median_us * 1e-6), "median_us": m.median_us,
            "spread_pct": m.spread_pct, "measurement": m.to_dict()}


def _probe_read(dev: Any, props: Any, quick: bool, samples: int, say: Callable[[str], None]) -> dict:
    import torch

    from moelab.kernels.stream import stream_read, stream_read_reference

    free, _ = torch.cuda.mem_get_info(dev)
    nbytes = min((1 if quick else 4) * _GiB, free // 4) // (64 * _MiB) * (64 * _MiB)
    buf = torch.randn(nbytes // 2, dtype=torch.bfloat16, device=dev)  # random, never zeros
    sms, l2 = props.multi_processor_count, getattr(props, "L2_cache_size", 0)
    cands: list[dict] = []
    for block, warps, per_sm in (READ_CONFIGS_QUICK if quick else READ_CONFIGS):
        grid = per_sm * sms
        out = torch.empty(grid, dtype=torch.int32, device=dev)
        r = _timed(lambda x, o, b=block, w=warps, g=grid: stream_read(x, block=b, num_warps=w, grid=g, out=o),
                   [(buf, out)], nbytes, samples=samples)
        cands.append({"impl": "triton", "how": f"Triton stream_read, block {block} int32, {warps} warps, "
                      f"{grid} programs ({per_sm}/SM)", "block": block, "num_warps": warps, "grid": grid, **r})
        say(f"read  {cands[-1]['how']}: {r['rate_per_s'] / _GB:,.0f} GB/s")

    # The kernel must really read every byte: check its sums on a 64 MiB slice with the best configuration.
    best_t = max(cands, key=lambda c: c["rate_per_s"])
    piece = buf[: 32 * _MiB]
    got = stream_read(piece, block=best_t["block"], num_warps=best_t["num_warps"], grid=best_t["grid"])
    want = stream_read_reference(piece, block=best_t["block"], grid=best_t["grid"])
    if not torch.equal(got.cpu(), want.cpu()):
        raise RuntimeError("stream_read returned wrong sums on this GPU: its bandwidth cannot be trusted")

    k = 8192  # GEMV: [1, k] x [k, n]^T reads the whole matrix once, the way cuBLAS reads a decode weight
    mat = buf.view(-1, k)
    vec = torch.randn(1, k, dtype=torch.bfloat16, device=dev)
    torch_variants = [
        ("torch.sum(bf16, dtype=float32)", lambda x: torch.sum(x, dtype=torch.float32), (buf,)),
        ("torch int32-view .sum()", lambda x: x.view(torch.int32).sum(), (buf,)),
        (f"cuBLAS GEMV, torch.matmul([1,{k}] x [{k},{mat.shape[0]}]) bf16", lambda v, w: torch.matmul(v, w.t()),
         (vec, mat)),
    ]
    for name, fn, args in torch_variants:
        r = _timed(fn, [args], nbytes, samples=samples)
        cands.append({"impl": "torch", "how": name, **r})
        say(f"read  {name}: {r['rate_per_s'] / _GB:,.0f} GB/s")
    del buf, mat, vec
    torch.cuda.empty_cache()
    best = max(cands, key=lambda c: c["rate_per_s"])
    best_torch = max((c for c in cands if c["impl"] == "torch"), key=lambda c: c["rate_per_s"])
    return {"buffer_bytes": nbytes, "buffer_over_l2": nbytes / l2 if l2 else None, "best": best,
            "best_triton": best_t, "best_torch": best_torch, "candidates": cands}


def _probe_copy(dev: Any, nbytes: int, samples: int, say: Callable[[str], None]) -> dict:
    import torch

    free, _ = torch.cuda.mem_get_info(dev)
    n = min(nbytes, free // 8) // 16 * 16
    src = torch.randn(n // 4, dtype=torch.float32, device=dev)
    dst = torch.empty_like(src)
    # A same-dtype contiguous copy_ is a cudaMemcpyAsync; on the H200 (2026-12-01) its graph-replayed form
    # moved only 2.7 TB/s against 4.22 TB/s in FACTS.md, so the launched form and an SM-driven elementwise
    # copy are timed too, and the best counts.
    cands = [
        ("dst.copy_(src), CUDA-graph replay", lambda d, s: d.copy_(s), "graph"),
        ("dst.copy_(src), launched from Python", lambda d, s: d.copy_(s), "host"),
        ("torch.mul(src, 1, out=dst) fp32 (an elementwise kernel), CUDA-graph replay",
         lambda d, s: torch.mul(s, 1.0, out=d), "graph"),
    ]
    res = []
    for how, fn, mode in cands:
        r = _timed(fn, [(dst, src)], 2 * n, mode=mode, samples=samples)
        res.append({"how": how, **r})
        say(f"copy  {how}, {n / _MiB:,.0f} MiB: {r['rate_per_s'] / _GB:,.0f} GB/s (read + write)")
    del src, dst
    torch.cuda.empty_cache()
    return {"buffer_bytes": n, "best": max(res, key=lambda c: c["rate_per_s"]), "candidates": res}


# The matmul rate moves with the card's power state: on the H200 back-to-back 8192³ bf16 matmuls run at ~794 TFLOP/s
# most of the time and dip to 700-750 for stretches of a few hundred ms when the clock drops under the power cap
# (probe-clocks-nvidia-h200-20261205T075445: 30 windows, median 794, min 714; a ceiling probe minutes earlier said
# 702). So the rate is measured in MATMUL_ROUNDS rounds, bf16 and fp16 alternating, and the ceiling is the best round's
# median: a ceiling is what the card does at best, and a floor divided by a dip would flatter every kernel.
MATMUL_ROUNDS = 3


def matmul_rate(n: int = 8192, dtype: str = "bf16", *, samples: int = 25, device: Any = None) -> dict:
    """torch.matmul of two random n×n matrices (the ceiling's kernel), graph-replayed: rate_per_s (FLOP/s) and how.

    2·n³ FLOPs a call; at n = 8192 each operand is 128 MiB, so the L2 holds none of it. Benchmarks that divide by
    the matmul rate measure it again beside their own samples with this (see `moelab.bench.moe`).
    """
    import torch

    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype)
    if dt is None:
        raise ValueError(f"matmul_rate: dtype must be 'bf16' or 'fp16', not {dtype!r}")
    dev = device if device is not None else torch.device("cuda", torch.cuda.current_device())
    a, b = (torch.randn(n, n, dtype=dt, device=dev) for _ in range(2))
    c = torch.empty(n, n, dtype=dt, device=dev)
    return _timed(lambda a, b, c: torch.matmul(a, b, out=c), [(a, b, c)], 2 * n**3, samples=samples)


def _probe_matmul(dev: Any, n: int, samples: int, say: Callable[[str], None]) -> dict:
    import torch

    res: dict[str, Any] = {"n": n, "rounds": MATMUL_ROUNDS}
    rounds: dict[str, list[dict]] = {"bf16": [], "fp16": []}
    for _ in range(MATMUL_ROUNDS):  # bf16 and fp16 rounds alternate, so each dtype's rounds lie apart in time
        for name in rounds:
            rounds[name].append(matmul_rate(n, name, samples=samples, device=dev))
    for name, rs in rounds.items():
        best = max(rs, key=lambda r: r["rate_per_s"])
        res[name] = {**best, "round_rates_tflops": [r["rate_per_s"] / 1e12 for r in rs]}
        say(f"matmul {name} {n}^3: {best['rate_per_s'] / 1e12:,.0f} TFLOP/s (best of {MATMUL_ROUNDS} rounds: "
            + ", ".join(f"{r['rate_per_s'] / 1e12:,.0f}" for r in rs) + ")")
    try:
        a8 = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)
        b8 = torch.randn(n, n, device=dev).to(torch.float8_e4m3fn)  # [N, K]; .t() is the column-major B
        one = torch.ones((), dtype=torch.float32, device=dev)

        def mm8(a: Any, b: Any) -> Any:
            return torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                    use_fast_accum=True)
        mm8(a8, b8)
    except (AttributeError, RuntimeError, TypeError, NotImplementedError) as e:
        res["fp8"] = {"skipped": f"torch._scaled_mm unavailable here: {type(e).__name__}: {str(e)[:160]}"}
        say(f"matmul fp8: skipped ({res['fp8']['skipped']})")
    else:
        res["fp8"] = _timed(mm8, [(a8, b8)], 2 * n**3, samples=samples)
        say(f"matmul fp8 {n}^3: {res['fp8']['rate_per_s'] / 1e12:,.0f} TFLOP/s")
    return res


def _probe_launch(dev: Any, samples: int, say: Callable[[str], None]) -> dict:
    import torch

    from moelab.kernels.stream import launch_empty

    tiny = torch.zeros(1, device=dev)
    res = {
        # measure() reports per-call times, so each median is the cost of one launch (amount 1 per call).
        "triton_host": _timed(launch_empty, [(tiny,)] * 64, 1, mode="host", samples=samples),
        "torch_host": _timed(lambda t: t.add_(1), [(tiny,)] * 64, 1, mode="host", samples=samples),
        "torch_graph": _timed(lambda t: t.add_(1), [(tiny,)] * 256, 1, samples=samples),
        "triton_graph": _timed(launch_empty, [(tiny,)] * 256, 1, samples=samples),
    }
    say("launch  Triton {:.2f} us, torch op {:.2f} us, graph-replayed kernel {:.2f} us".format(
        res["triton_host"]["median_us"], res["torch_host"]["median_us"], res["torch_graph"]["median_us"]))
    return res


def _warp_size(props: Any) -> tuple[int | None, str]:
    ws = getattr(props, "warp_size", None)
    if ws:
        return int(ws), "torch.cuda.get_device_properties().warp_size"
    try:
        from triton.runtime import driver

        return int(driver.active.get_current_target().warp_size), "Triton's target description (warp_size)"
    except (AttributeError, RuntimeError, ImportError, TypeError) as e:
        return None, f"unknown: neither torch nor Triton reports it ({type(e).__name__})"


def probe(device: int | None = None, quick: bool = False, log: Callable[[str], None] | None = None) -> Ceilings:
    """Measure this GPU's ceilings now: read and copy bandwidth, bf16/fp16/fp8 matmul, launch costs.

    Read: a sweep of the Triton streaming read (`moelab.kernels.stream`) and torch's own reductions and
    GEMV over a buffer many times the L2, graph-replayed; the best is `read_gbps`, and all candidates with
    how they ran are in `extra["read"]`. Copy: dst.copy_(src) (graph-replayed and launched) and an
    elementwise copy kernel, the best of them, bytes read + written. Matmul: n³ torch.matmul
    on random data (n = 8192, 4096 with quick). Launch: an empty Triton kernel and a 1-element torch add_
    launched from Python; the add_ replayed 256 times from one CUDA graph. quick: smaller buffers, fewer
    read configurations and samples (~4× faster). Raises UserError without a GPU.
    """
    import torch

    from moelab.timing import env_record

    if not torch.cuda.is_available():
        raise UserError(_no_gpu_message())
    say = log or (lambda msg: None)
    idx = torch.cuda.current_device() if device is None else int(device)
    dev = torch.device("cuda", idx)
    samples = 10 if quick else 25
    with torch.cuda.device(idx):
        env = env_record()
        props = torch.cuda.get_device_properties(idx)
        read = _probe_read(dev, props, quick, samples, say)

        copy = _probe_copy(dev, 256 * _MiB if quick else _GiB, samples, say)
        mm = _probe_matmul(dev, 4096 if quick else 8192, samples, say)
        launch = _probe_launch(dev, samples, say)
        warp, warp_how = _warp_size(props)

    best = read["best"]
    l2 = int(getattr(props, "L2_cache_size", 0)) or None
    per = "median of {} graph replays".format(samples)
    mm_n = mm["n"]
    row = match_device(props.name)
    notes = {
        "read_gbps": f"{best['how']}: best of {len(read['candidates'])} (Triton configs, torch reductions, cuBLAS "
                     f"GEMV) over a {read['buffer_bytes'] / _GiB:.2f} GiB random buffer, {per}",
        "copy_gbps": f"{copy['best']['how']}: best of {len(copy['candidates'])} over {copy['buffer_bytes'] / _MiB:,.0f} "
                     f"MiB, bytes read + written, median of {samples}",
        "bf16_tflops": f"torch.matmul {mm_n}^3 bf16, random inputs, {per}, the best of {mm['rounds']} rounds",
        "fp16_tflops": f"torch.matmul {mm_n}^3 fp16, random inputs, {per}, the best of {mm['rounds']} rounds",
        "fp8_tflops": (mm["fp8"]["skipped"] if "skipped" in mm["fp8"] else
                       f"torch._scaled_mm {mm_n}^3 e4m3 -> bf16, use_fast_accum, {per}"),
        "launch_triton_us": f"empty Triton kernel launched 64x from Python, median of {samples} (host-bound)",
        "launch_torch_us": f"1-element x.add_(1) launched 64x from Python, median of {samples} (host-bound)",
        "graph_kernel_us": f"1-element x.add_(1) x256 in one CUDA graph, per kernel, {per}",
        "sm_count": "torch.cuda.get_device_properties().multi_processor_count",
        "l2_bytes": "torch.cuda.get_device_properties().L2_cache_size",
        "warp_size": warp_how,
        "memory_gb": "torch.cuda.get_device_properties().total_memory",
        "interconnect_gbps": (f"not measured (the probe uses one GPU): the {row.name} datasheet row's value"
                              if row else "not measured (the probe uses one GPU) and no datasheet row matches"),
    }
    extra: dict[str, Any] = {
        "quick": quick, "env": env, "read": read, "copy": copy, "matmul": mm, "launch": launch,
        "datasheet_row": row.name if row else None,
        "datasheet_read_gbps": row.read_gbps if row else None,
    }
    return Ceilings(
        name=props.name, source="measured",
        read_gbps=best["rate_per_s"] / _GB, copy_gbps=copy["best"]["rate_per_s"] / _GB,
        bf16_tflops=mm["bf16"]["rate_per_s"] / 1e12, fp16_tflops=mm["fp16"]["rate_per_s"] / 1e12,
        fp8_tflops=None if "skipped" in mm["fp8"] else mm["fp8"]["rate_per_s"] / 1e12,
        launch_triton_us=launch["triton_host"]["median_us"],
        launch_torch_us=launch["torch_host"]["median_us"],
        graph_kernel_us=launch["torch_graph"]["median_us"],
        sm_count=props.multi_processor_count, l2_bytes=l2, warp_size=warp,
        memory_gb=props.total_memory / _GB,
        interconnect_gbps=row.interconnect_gbps if row else None,
        extra=extra, notes=notes,
    )
