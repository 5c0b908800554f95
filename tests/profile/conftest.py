"""Tiny model configs (real families, toy sizes) and a fake meter, so the profiler runs on a CPU."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():  # before any triton-using module is imported (moelab's kernels)
    os.environ.setdefault("TRITON_INTERPRET", "1")

from moelab.models.spec import PRESET_DIR
from moelab.profile import runner
from moelab.profile.measure import Meter


def _tiny_qwen3_moe() -> dict:
    cfg = json.loads((PRESET_DIR / "qwen3-30b-a3b.json").read_text())
    cfg.update(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
               num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, intermediate_size=96,
               vocab_size=300, max_position_embeddings=4096)
    return cfg


def _tiny_qwen35() -> dict:
    cfg = json.loads((PRESET_DIR / "qwen3.5-35b-a3b.json").read_text())
    t = cfg["text_config"]
    t.update(hidden_size=64, num_hidden_layers=4, layer_types=["linear_attention"] * 3 + ["full_attention"],
             num_attention_heads=4, num_key_value_heads=2, head_dim=32, num_experts=8, num_experts_per_tok=2,
             moe_intermediate_size=32, shared_expert_intermediate_size=48, vocab_size=300,
             linear_num_key_heads=4, linear_num_value_heads=8, linear_key_head_dim=16, linear_value_head_dim=16,
             max_position_embeddings=4096)
    return cfg


@pytest.fixture
def tiny_models(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, cfg in (("tiny-qwen3-moe", _tiny_qwen3_moe()), ("tiny-qwen3.5", _tiny_qwen35())):
        p = tmp_path / name / "config.json"
        p.parent.mkdir()
        p.write_text(json.dumps(cfg))
        out[name] = p
    return out


class FakeTimer:
    """A `timing.measure` stand-in: runs the call once (so the code path is real) and reports a fixed
    time per mode: graph 10 µs, host 25 µs — except the chained step, which is told apart by its arity."""

    def __init__(self, graph_us: float = 10.0, host_us: float = 25.0, step_graph_us: float = 500.0,
                 step_host_us: float = 2000.0):
        self.graph_us, self.host_us = graph_us, host_us
        self.step_graph_us, self.step_host_us = step_graph_us, step_host_us
        self.calls: list[tuple[str, str]] = []

    def __call__(self, fn, arg_sets, *, mode, warmup, samples):
        from moelab.timing import summarize

        args = arg_sets[0]
        fn(*args)
        is_step = len(args) == 0
        self.calls.append((getattr(fn, "__name__", type(fn).__name__), mode))
        us = (self.step_graph_us if mode == "graph" else self.step_host_us) if is_step else \
            (self.graph_us if mode == "graph" else self.host_us)
        return summarize([us] * 3, calls_per_sample=1, mode=mode, timer="fake", rotations=len(arg_sets),
                         flush_l2=False)


@pytest.fixture
def fake_meter(monkeypatch) -> FakeTimer:
    """Profile on the CPU: the device check passes, the timer is FakeTimer, launches are 3 per op call and
    100 per chained step."""
    timer = FakeTimer()
    monkeypatch.setattr(runner, "device_check", lambda: torch.device("cpu"))
    monkeypatch.setattr(runner, "make_meter", lambda samples=25: Meter(
        measure=timer, launches=lambda fn, args: 100 if len(args) == 0 else 3, samples=samples))
    return timer
