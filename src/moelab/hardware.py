"""Hardware ceilings: measured on this GPU (cached per GPU) or a datasheet row of a known GPU.

(Skeleton: the `Ceilings` contract. The probe and the known-GPU table are being written.)
"""

from __future__ import annotations

from dataclasses import dataclass, field


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

    def ridge_bf16(self) -> float:
        """FLOP per byte above which a bf16 op is compute-bound: bf16 rate / read bandwidth."""
        return self.bf16_tflops * 1e12 / (self.read_gbps * 1e9)
