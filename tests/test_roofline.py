"""roofline.analyze on hand-made ops and ceilings, and on a real model's step."""

from __future__ import annotations

import pytest

from moelab.hardware import Ceilings
from moelab.models import Op, decode_step_ops, load_spec
from moelab.roofline import analyze, plot

# Round numbers so every floor below can be checked by hand: 1000 GB/s, 100 TFLOP/s bf16, 200 fp8.
C = Ceilings(name="toy", source="test", read_gbps=1000.0, copy_gbps=None, bf16_tflops=100.0, fp16_tflops=100.0,
             fp8_tflops=200.0, interconnect_gbps=100.0)


def _op(name, kind, bytes, flops, count=1, group="other", dtype="bf16"):
    return Op(name, group, kind, count, bytes, flops, dtype=dtype)


def test_floors_by_hand():
    ops = [
        _op("gemv", "compute", bytes=2_000_000, flops=2_000_000, count=10),  # 2 MB / 1000 GB/s = 2 us
        _op("gemm", "compute", bytes=1_000_000, flops=1_000_000_000),  # 1e9 / 1e14 = 10 us > 1 us
        _op("gemm8", "compute", bytes=1_000_000, flops=1_000_000_000, dtype="fp8"),  # fp8 rate: 5 us
        _op("norm", "memory", bytes=500_000, flops=10_000_000_000),  # flops ignored: 0.5 us
        _op("ar", "comm", bytes=1_000_000, flops=0, count=2, group="communication"),  # 10 us + 8 us
    ]
    r = analyze(ops, C, batch=4)
    f = {o.name: o for o in r.ops}
    assert f["gemv"].floor_us == pytest.approx(2.0) and f["gemv"].bound == "memory"
    assert f["gemv"].step_us == pytest.approx(20.0) and f["gemv"].intensity == pytest.approx(1.0)
    assert f["gemm"].floor_us == pytest.approx(10.0) and f["gemm"].bound == "compute"
    assert f["gemm8"].floor_us == pytest.approx(5.0) and f["gemm8"].bound == "compute"
    assert f["norm"].floor_us == pytest.approx(0.5) and f["norm"].bound == "memory"
    assert f["ar"].floor_us == pytest.approx(18.0) and f["ar"].bound == "comm" and f["ar"].estimated
    step = 20 + 10 + 5 + 0.5 + 36
    assert r.step_floor_us == pytest.approx(step) and r.step_floor_ms == pytest.approx(step / 1e3)
    assert r.tokens_per_s == pytest.approx(4 / (step * 1e-6))
    assert sum(o.share for o in r.ops) == pytest.approx(1.0)
    assert f["ar"].share == pytest.approx(36 / step)
    assert r.group_shares()["communication"] == pytest.approx(36 / step)


def test_comm_without_interconnect_counts_latency_only():
    c = Ceilings(name="x", source="t", read_gbps=1000.0, copy_gbps=None, bf16_tflops=100.0, fp16_tflops=100.0)
    r = analyze([_op("ar", "comm", bytes=10**9, flops=0)], c, comm_latency_us=3.0)
    assert r.ops[0].floor_us == pytest.approx(3.0)


def test_fp8_without_fp8_rate_uses_bf16():
    c = Ceilings(name="x", source="t", read_gbps=1000.0, copy_gbps=None, bf16_tflops=100.0, fp16_tflops=100.0)
    r = analyze([_op("g", "compute", bytes=1, flops=10**9, dtype="fp8")], c)
    assert r.ops[0].floor_us == pytest.approx(10.0)


def test_bad_ceilings():
    c = Ceilings(name="x", source="t", read_gbps=0.0, copy_gbps=None, bf16_tflops=100.0, fp16_tflops=100.0)
    with pytest.raises(ValueError):
        analyze([], c)


def test_qwen3_30b_floor_matches_facts():
    # FACTS.md: ~6.1 GB read per token at B=1, floor ~1.39 ms at 4.4 TB/s (~720 tokens/s).
    h200 = Ceilings(name="H200", source="FACTS.md", read_gbps=4400.0, copy_gbps=4220.0, bf16_tflops=745.0,
                    fp16_tflops=745.0)
    r = analyze(decode_step_ops(load_spec("qwen3-30b-a3b"), batch=1, ctx=1024), h200, batch=1)
    assert r.bytes_per_step == pytest.approx(6.19e9, rel=0.01)
    assert r.step_floor_ms == pytest.approx(1.41, rel=0.02)
    assert all(o.bound == "memory" for o in r.ops)
    g = r.group_shares()
    assert g["moe"] > 0.5 and g["attention"] > 0.25 and g["lm_head"] == pytest.approx(0.10, abs=0.01)


def test_attention_share_grows_with_context_and_large_batch_turns_compute_bound():
    spec = load_spec("qwen3-30b-a3b")
    shares = [analyze(decode_step_ops(spec, ctx=s), C).group_shares()["attention"] for s in (1024, 16384, 131072)]
    assert shares[0] < shares[1] < shares[2]
    r = analyze(decode_step_ops(spec, batch=4096, ctx=16), C, batch=4096)
    assert {o.name: o.bound for o in r.ops}["experts.gate_up"] == "compute"


def test_plot_writes_png(tmp_path):
    spec = load_spec("qwen3-next-80b-a3b")
    reps = [analyze(decode_step_ops(spec, ctx=s, tp=2), C) for s in (512, 8192)]
    out = tmp_path / "roof.png"
    plot(reps, C, str(out), labels=["S=512", "S=8192"])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
