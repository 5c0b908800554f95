"""The one timer: statistics, modes, records. CUDA-only behaviour skips without a GPU."""

import json
import re
import time

import pytest
import torch

from moelab import timing


def test_summarize_statistics():
    m = timing.summarize([5.0, 1.0, 3.0, 2.0, 4.0], calls_per_sample=1, mode="cpu", timer="host_clock",
                         rotations=1, flush_l2=False)
    assert (m.median_us, m.min_us, m.max_us, m.mean_us) == (3.0, 1.0, 5.0, 3.0)
    assert (m.q1_us, m.q3_us, m.iqr_us) == (2.0, 4.0, 2.0)
    assert m.samples == 5 and m.spread_pct == pytest.approx(200 / 3)
    d = m.to_dict()
    assert all(k in d for k in ("median_us", "min_us", "max_us", "q1_us", "q3_us", "iqr_us", "samples"))
    assert "times_us" not in d
    assert m.to_dict(with_samples=True)["times_us"] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_summarize_one_sample_and_none():
    m = timing.summarize([7.0], calls_per_sample=1, mode="cpu", timer="host_clock", rotations=1, flush_l2=False)
    assert m.q1_us == m.q3_us == m.median_us == 7.0
    with pytest.raises(ValueError, match="no samples"):
        timing.summarize([], calls_per_sample=1, mode="cpu", timer="host_clock", rotations=1, flush_l2=False)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU fallback is what is under test")
def test_measure_on_cpu_uses_host_clock_and_rotates():
    seen = []

    def fn(i):
        seen.append(i)
        time.sleep(0.0005)

    m = timing.measure(fn, [(0,), (1,), (2,)], mode="graph", warmup=1, samples=4)
    assert m.mode == "cpu" and m.timer == "host_clock" and m.rotations == 3
    assert seen.count(0) == seen.count(1) == seen.count(2) == 5  # warm-up + 4 samples, every set
    assert 400 <= m.median_us <= 50_000  # a 0.5 ms sleep per call, measured as such (not 0, not seconds)


def test_measure_rejects_bad_arguments():
    with pytest.raises(ValueError, match="mode"):
        timing.measure(lambda: None, mode="fast")
    with pytest.raises(ValueError, match="empty"):
        timing.measure(lambda: None, [])


def test_sets_for_l2():
    assert timing.sets_for_l2(10 * 2**20, l2=60 * 2**20) == 18  # 3 × 60 MB / 10 MB
    assert timing.sets_for_l2(2**30, l2=60 * 2**20) == 1
    assert timing.sets_for_l2(1, l2=60 * 2**20) == 64  # capped
    assert timing.sets_for_l2(0, l2=60 * 2**20) == 1


def test_env_record_fields(monkeypatch):
    monkeypatch.delenv("MOELAB_COMMIT", raising=False)
    rec = timing.env_record()
    for key in ("device", "driver", "cuda", "torch", "triton", "python", "commit", "date", "timer"):
        assert key in rec, key
    assert rec["torch"] == torch.__version__
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?|unknown", rec["commit"]), rec["commit"]
    assert rec["timer"] == ("cuda_events" if torch.cuda.is_available() else "host_clock")


def test_commit_from_environment(monkeypatch):
    monkeypatch.setenv("MOELAB_COMMIT", "abc1234")
    assert timing.env_record()["commit"] == "abc1234"


def test_save_result(tmp_path, monkeypatch):
    monkeypatch.setenv("MOELAB_RESULTS_DIR", str(tmp_path))
    path = timing.save_result("bench-x", {"rows": [{"T": 1, "median_us": 2.5}]})
    body = json.loads(path.read_text())
    assert path.parent == tmp_path and path.name.startswith("bench-x-")
    assert body["kind"] == "bench-x" and body["rows"][0]["median_us"] == 2.5
    assert {"device", "torch", "triton", "commit", "date"} <= set(body["env"])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="device events and graph replay need a CUDA GPU")
def test_graph_and_host_modes_and_side_streams():
    x = torch.randn(1 << 22, device="cuda")
    g = timing.measure(lambda t: t.mul_(1.0), [(x,)], mode="graph", samples=5)
    h = timing.measure(lambda t: t.mul_(1.0), [(x,)], mode="host", samples=5)
    assert g.timer == h.timer == "cuda_events" and g.median_us > 0 and h.median_us > 0
    side = torch.cuda.Stream()

    def hidden(t):  # work on another stream, not joined: the host-clock bracket must count it
        with torch.cuda.stream(side):
            for _ in range(50):
                t.mul_(1.0)

    m = timing.measure(hidden, [(x,)], mode="host", samples=5, warmup=1)
    assert m.escaped_samples > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-CUDA path is what is under test")
def test_prime_graphs_without_cuda_captures_nothing(monkeypatch):
    monkeypatch.setattr(timing, "_PRIMED", {})
    timing.prime_graphs()
    timing.prime_graphs("cpu")
    assert timing._PRIMED == {}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graph capture needs a CUDA GPU")
def test_prime_graphs_once_per_device_and_switch(monkeypatch):
    monkeypatch.setattr(timing, "_PRIMED", {})
    monkeypatch.setenv("MOELAB_PRIME_GRAPH", "0")
    timing.prime_graphs()
    assert timing._PRIMED == {}
    monkeypatch.delenv("MOELAB_PRIME_GRAPH")
    timing.prime_graphs()
    idx = torch.cuda.current_device()
    first = timing._PRIMED[idx]
    assert float(first[1][0]) == 1.0  # the graph was replayed once
    timing.prime_graphs(torch.device("cuda", idx))
    assert timing._PRIMED[idx] is first  # not captured again
    monkeypatch.setattr(timing, "_PRIMED", {})
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="inside a CUDA graph capture"):
        with torch.cuda.graph(g):
            timing.prime_graphs()
