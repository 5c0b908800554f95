"""`moelab.hardware`, `moelab hw` and the streaming-read kernel behind the probe.

CPU: the known-GPU table, name lookup, the cache, the ridge point, the CLI (datasheet rows, the no-GPU
message, and the measured path with a fake probe), and the Triton kernels under TRITON_INTERPRET=1.
GPU: a real quick probe (skipped without CUDA).
"""

from __future__ import annotations

import json
import os

import pytest
import torch

if not torch.cuda.is_available():  # before anything imports triton: kernels run in the interpreter on the CPU
    os.environ.setdefault("TRITON_INTERPRET", "1")
from typer.testing import CliRunner

from moelab import hardware as hwm
from moelab.errors import UserError
from moelab.hardware import Ceilings

CUDA = torch.cuda.is_available()
NUMERIC = ["read_gbps", "copy_gbps", "bf16_tflops", "fp16_tflops", "fp8_tflops", "launch_triton_us",
           "launch_torch_us", "graph_kernel_us", "sm_count", "l2_bytes", "warp_size", "memory_gb",
           "interconnect_gbps"]


# ---------------------------------------------------------------------------------------------------
# The known table

def test_known_rows_have_sources_and_sane_units():
    rows = hwm.known_gpus()
    assert len(rows) >= 8
    for c in rows:
        assert c.source.startswith(("datasheet:", "worklog:")), c.name
        assert 100 <= c.read_gbps <= 10_000, c.name  # GB/s, not B/s or TB/s
        assert 1 <= c.bf16_tflops <= 5_000 and 1 <= c.fp16_tflops <= 5_000, c.name  # TFLOP/s, dense
        assert c.fp8_tflops is None or c.fp8_tflops >= c.bf16_tflops, c.name
        assert c.copy_gbps is None or 100 <= c.copy_gbps <= 20_000, c.name
        assert c.warp_size in (32, 64), c.name
        assert c.memory_gb is not None and 8 <= c.memory_gb <= 300, c.name
        assert c.l2_bytes is None or 2**20 <= c.l2_bytes <= 2**30, c.name
        assert c.interconnect_gbps is None or 10 <= c.interconnect_gbps <= 2_000, c.name
        for f in NUMERIC:  # every value shipped says where it comes from
            if getattr(c, f) is not None:
                assert c.notes.get(f), f"{c.name}: {f} has no source note"


def test_worklog_figures():
    bi = hwm.lookup("bi-v100")
    assert bi.warp_size == 64 and bi.read_gbps == pytest.approx(584.2) and bi.memory_gb == 32
    assert bi.ridge_bf16() == pytest.approx(32e12 / 584.2e9)  # the worklog's 54.8 FLOP/byte
    sh = hwm.lookup("gfx1151")
    assert sh.read_gbps == 256 and sh.extra["worklog_effective_read_gbps"] == 207


@pytest.mark.parametrize("name, row", [
    ("h100", "H100 SXM"), ("H200", "H200"), ("nvidia h200", "H200"), ("B200", "B200"), ("a100", "A100 80GB SXM"),
    ("MI300X", "MI300X"), ("4090", "RTX 4090"), ("RTX-4090", "RTX 4090"), ("BI-V100", "Iluvatar BI-V100"),
    ("gfx1151", "Strix Halo gfx1151"), ("Strix-Halo", "Strix Halo gfx1151"), ("H100 SXM", "H100 SXM"),
])
def test_lookup_and_aliases(name, row):
    assert hwm.ceilings(name).name == row


def test_every_advertised_name_resolves():
    for n in hwm.known_names():
        assert hwm.lookup(n) is not None, n


def test_unknown_name_lists_known():
    with pytest.raises(UserError, match="unknown GPU 'v200'.*h200.*gfx1151"):
        hwm.ceilings("v200")


def test_rows_are_copies():
    hwm.lookup("h200").extra["x"] = 1
    assert "x" not in hwm.lookup("h200").extra


def test_match_device_names():
    assert hwm.match_device("NVIDIA H200").name == "H200"
    assert hwm.match_device("NVIDIA H100 80GB HBM3").name == "H100 SXM"
    assert hwm.match_device("NVIDIA H100 PCIe") is None  # other clocks and memory than the SXM row
    assert hwm.match_device("Tesla T4") is None


def test_ridge():
    c = Ceilings(name="x", source="measured", read_gbps=1000.0, copy_gbps=None, bf16_tflops=100.0,
                 fp16_tflops=200.0)
    assert c.ridge_bf16() == pytest.approx(100.0)  # 1e14 FLOP/s / 1e12 B/s
    assert c.ridge("fp16") == pytest.approx(200.0)
    assert c.ridge("fp8") is None
    with pytest.raises(ValueError):
        c.ridge("int4")
    assert hwm.lookup("h200").ridge_bf16() == pytest.approx(989.4 / 4.8)


@pytest.mark.skipif(CUDA, reason="checks the no-GPU error; this machine has a GPU")
def test_measured_without_gpu_is_a_user_error():
    for arg in (None, "measured", "MEASURED"):
        with pytest.raises(UserError, match="no GPU here; pass --gpu NAME"):
            hwm.ceilings(arg)


# ---------------------------------------------------------------------------------------------------
# The cache

def _fake(name: str = "Fake GPU", read: float = 4321.0) -> Ceilings:
    return Ceilings(name=name, source="measured", read_gbps=read, copy_gbps=4000.0, bf16_tflops=700.0,
                    fp16_tflops=710.0, sm_count=7, warp_size=64, extra={"env": {"device": name}},
                    notes={"read_gbps": "fake"})


def _key(device: str = "Fake GPU", driver: str = "1.0") -> dict[str, str]:
    return {"device": device, "driver": driver, "torch": "2.x", "triton": "3.x"}


def test_cache_round_trip(tmp_path):
    path = hwm.save_cached(_fake(), _key(), tmp_path)
    assert path.parent == tmp_path and "fake-gpu" in path.name
    back = hwm.load_cached(_key(), tmp_path)
    assert back == _fake()
    assert hwm.load_cached(_key(driver="2.0"), tmp_path) is None  # another driver: measure again
    assert hwm.load_cached(_key(device="Other GPU"), tmp_path) is None
    hwm.save_cached(_fake("Other GPU", 1000.0), _key(device="Other GPU"), tmp_path)
    assert hwm.load_cached(_key(), tmp_path).read_gbps == 4321.0  # keyed by device: no clobbering
    assert hwm.load_cached(_key(device="Other GPU"), tmp_path).read_gbps == 1000.0


def test_cache_ignores_corrupt_and_foreign_files(tmp_path):
    path = hwm.cache_path(_key(), tmp_path)
    path.write_text("{not json")
    assert hwm.load_cached(_key(), tmp_path) is None
    path.write_text(json.dumps({"key": _key(driver="9"), "ceilings": _fake().to_dict()}))
    assert hwm.load_cached(_key(), tmp_path) is None


def test_cache_dir_env(monkeypatch, tmp_path):
    monkeypatch.delenv("MOELAB_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hwm.cache_dir() == tmp_path / "xdg" / "moelab"
    monkeypatch.setenv("MOELAB_CACHE_DIR", str(tmp_path / "own"))
    assert hwm.cache_dir() == tmp_path / "own"


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    """Pretend a GPU is present: env_record and probe return fakes; the cache lives in tmp_path."""
    import moelab.timing

    calls = []
    env = {"device": "Fake GPU", "driver": "1.0", "torch": "2.x", "triton": "3.x", "date": "2026-12-01T00:00:00+00:00"}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(moelab.timing, "env_record", lambda: dict(env))
    monkeypatch.setattr(hwm, "probe", lambda quick=False, log=None, device=None: calls.append(quick) or _fake())
    monkeypatch.setenv("MOELAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return calls


def test_ceilings_probes_once_then_reads_cache(fake_gpu):
    assert hwm.ceilings().read_gbps == 4321.0
    assert hwm.ceilings("measured").read_gbps == 4321.0
    assert fake_gpu == [False]  # the second call was served by the cache
    hwm.ceilings(refresh=True, quick=True)
    assert fake_gpu == [False, True]


# ---------------------------------------------------------------------------------------------------
# The CLI

def _run(*args: str):
    from moelab import cli

    cli._load_commands()
    return CliRunner().invoke(cli.app, ["hw", *args])


def test_cli_gpu_row_json():
    r = _run("--gpu", "h200", "--json")
    assert r.exit_code == 0, r.output
    body = json.loads(r.stdout)
    c = body["ceilings"]
    assert c["name"] == "H200" and c["read_gbps"] == 4800.0 and c["source"].startswith("datasheet:")
    assert c["ridge_bf16"] == pytest.approx(989.4 / 4.8)
    assert body["gpu_present"] is CUDA


def test_cli_gpu_row_table():
    r = _run("--gpu", "MI300X")
    assert r.exit_code == 0, r.output
    assert "MI300X" in r.output and "5,300" in r.output and "ridge point" in r.output


@pytest.mark.skipif(CUDA, reason="checks the no-GPU message; this machine has a GPU")
def test_cli_without_gpu():
    r = _run()
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].startswith("no GPU here")
    assert all(n in r.output for n in ("H200", "MI300X", "4090", "BI-V100"))
    r = _run("--gpu", "b200")
    assert r.exit_code == 0 and r.output.splitlines()[0].startswith("no GPU here") and "8,000" in r.output
    r = _run("--json")
    assert r.exit_code == 0
    body = json.loads(r.stdout)
    assert body["gpu_present"] is False and len(body["known"]) == len(hwm.known_gpus())
    r = _run("--refresh")
    assert isinstance(r.exception, UserError) and "no GPU here" in str(r.exception)


def test_cli_bad_input():
    assert isinstance(_run("--gpu", "v200").exception, UserError)
    assert isinstance(_run("--gpu", "h200", "--refresh").exception, UserError)


def test_cli_measured_path_with_fake_probe(fake_gpu, tmp_path):
    r = _run("--json")
    assert r.exit_code == 0, r.output
    body = json.loads(r.stdout)
    assert body["from_cache"] is False and body["ceilings"]["read_gbps"] == 4321.0
    r = _run("--json", "--save")
    body = json.loads(r.stdout)
    assert body["from_cache"] is True and fake_gpu == [False]
    saved = json.loads(open(body["saved"]).read())
    assert saved["kind"] == "hw" and saved["ceilings"]["read_gbps"] == 4321.0
    assert saved["env"]["device"] == "Fake GPU"
    r = _run("--refresh", "--quick")
    assert r.exit_code == 0, r.output
    assert fake_gpu == [False, True] and "4,321" in r.output


# ---------------------------------------------------------------------------------------------------
# The streaming-read kernel (Triton interpreter on CPU, or the GPU when present)

DEV = "cuda" if CUDA else "cpu"


def _stream():
    from moelab.kernels import stream

    if not CUDA and not stream._interpreting():
        pytest.skip("no GPU and TRITON_INTERPRET is not set")
    return stream


@pytest.mark.parametrize("nbytes, dtype, block, grid", [
    (0, torch.uint8, 64, 3),              # empty buffer: every partial is 0, still written
    (4, torch.uint8, 64, 3),              # one word, only the tail
    (4 * 64 * 3 * 2, torch.int32, 64, 3),  # whole blocks, every program equally loaded
    (4 * (5 * 64 + 17), torch.uint8, 64, 3),  # odd tail, uneven programs
    (2 * 1234, torch.bfloat16, 128, 5),  # another dtype, size not a multiple of the block
    (4 * 1000, torch.int32, 16, 1),      # one program walks everything
])
def test_stream_read_matches_reference(nbytes, dtype, block, grid):
    stream = _stream()
    g = torch.Generator().manual_seed(nbytes)
    raw = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=g)
    x = raw.view(dtype).to(DEV)
    out = torch.full((grid,), 12345, dtype=torch.int32, device=DEV)  # poison: must be overwritten
    got = stream.stream_read(x, block=block, num_warps=4, grid=grid, out=out)
    want = stream.stream_read_reference(x, block=block, grid=grid)
    assert got is out
    assert torch.equal(got.cpu(), want.cpu())
    total = raw.view(torch.int32).to(torch.int64).sum().item() if nbytes else 0
    assert got.to(torch.int64).sum().item() % 2**32 == total % 2**32  # independent of the reference


def test_stream_read_counts_every_word():
    stream = _stream()
    n, block, grid = 3 * 64 + 5, 64, 2
    for i in (0, 63, 64, 130, n - 5, n - 1):  # first, block edges, other program, tail
        x = torch.zeros(n, dtype=torch.int32, device=DEV)
        x[i] = 1
        got = stream.stream_read(x, block=block, num_warps=4, grid=grid)
        assert got.sum().item() == 1, i
        owner = 0 if i >= (n // block) * block else (i // block) % grid
        assert got[owner].item() == 1, i


def test_stream_read_rejects_bad_input():
    stream = _stream()
    with pytest.raises(ValueError, match="contiguous"):
        stream.stream_read(torch.zeros(8, 8, dtype=torch.int32, device=DEV).t())
    with pytest.raises(ValueError, match="multiple of 4"):
        stream.stream_read(torch.zeros(6, dtype=torch.uint8, device=DEV))
    with pytest.raises(ValueError, match="power of two"):
        stream.stream_read(torch.zeros(64, dtype=torch.int32, device=DEV), block=100, grid=1)
    with pytest.raises(ValueError, match="out must be"):
        stream.stream_read(torch.zeros(64, dtype=torch.int32, device=DEV), block=16, grid=2,
                           out=torch.empty(3, dtype=torch.int32, device=DEV))


def test_empty_kernel_launches_and_touches_nothing():
    stream = _stream()
    x = torch.full((4,), 7.0, device=DEV)
    stream.launch_empty(x)
    assert x.tolist() == [7.0] * 4  # the launch-cost probe must not write what it is handed


def test_probe_matmul_keeps_the_best_round_and_every_rounds_rate(monkeypatch):
    """The ceiling is the best round's median (a dip under the power cap must not set it), and every round is kept."""
    rates = iter([700e12, 500e12, 790e12, 600e12, 720e12, 650e12])  # bf16, fp16, bf16, fp16, bf16, fp16

    def fake(n, dtype, *, samples, device):
        return {"rate_per_s": next(rates), "dtype": dtype}

    monkeypatch.setattr(hwm, "matmul_rate", fake)
    mm = hwm._probe_matmul("cpu", 64, 2, lambda msg: None)
    assert mm["rounds"] == hwm.MATMUL_ROUNDS == 3
    assert mm["bf16"]["rate_per_s"] == 790e12 and mm["bf16"]["round_rates_tflops"] == [700, 790, 720]
    assert mm["fp16"]["rate_per_s"] == 650e12 and mm["fp16"]["round_rates_tflops"] == [500, 600, 650]


def test_matmul_rate_times_the_ceilings_kernel_and_names_a_bad_dtype():
    r = hwm.matmul_rate(32, "fp16" if CUDA else "bf16", samples=2, device=DEV)
    assert r["rate_per_s"] > 0 and r["measurement"]["samples"] >= 2
    with pytest.raises(ValueError, match="dtype must be 'bf16' or 'fp16', not 'fp8'"):
        hwm.matmul_rate(32, "fp8", samples=2, device=DEV)


# ---------------------------------------------------------------------------------------------------
# GPU: a real probe

@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_quick_probe_on_gpu():
    c = hwm.probe(quick=True)
    assert c.measured and c.name == torch.cuda.get_device_name()
    assert c.read_gbps > 0 and c.copy_gbps > 0 and c.bf16_tflops > 0 and c.fp16_tflops > 0
    assert c.extra["read"]["best"]["rate_per_s"] / 1e9 == pytest.approx(c.read_gbps)
    assert 0 < c.graph_kernel_us < c.launch_torch_us
    assert c.warp_size in (32, 64) and c.sm_count > 0
    row = hwm.match_device(c.name)
    if row is not None:  # a measured read can approach the datasheet peak, never pass it
        assert c.read_gbps < 1.02 * row.read_gbps


_AOT = """
import sys, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from moelab.kernels.stream import _stream_read_kernel
try:
    src = ASTSource(fn=_stream_read_kernel,
                    signature={"x_ptr": "*i32", "partial_ptr": "*i32", "n": "i32", "BLOCK": "constexpr"},
                    constexprs={"BLOCK": 8192}, attrs={(0,): [["tt.divisibility", 16]], (2,): [["tt.divisibility", 16]]})
    target = GPUTarget("cuda", 90, 32)
except (TypeError, KeyError, AttributeError, ValueError) as e:  # the ahead-of-time API moves between versions
    print("SKIP", triton.__version__, e)
    sys.exit(0)
print(triton.compile(src, target=target, options={"num_warps": 8}).asm["ptx"])
"""


def test_stream_read_compiles_to_16_byte_loads():
    """Compile for sm_90 ahead of time (no GPU needed): the main loop must use 16-byte vector loads.

    In a subprocess without TRITON_INTERPRET: the interpreter, once used, leaves triton.language patched.
    """
    import subprocess
    import sys

    pytest.importorskip("triton.backends.nvidia")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    r = subprocess.run([sys.executable, "-c", _AOT], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    if r.stdout.startswith("SKIP"):
        pytest.skip(f"ahead-of-time compile API differs: {r.stdout.strip()}")
    loads = [ln for ln in r.stdout.splitlines() if "ld.global" in ln]
    # 8192 words / 256 threads = 32 words per thread = 8 vector loads in the loop, 8 more (masked) in the tail.
    assert len(loads) == 16 and all(".v4.b32" in ln for ln in loads), loads
