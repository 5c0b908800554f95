"""The verdict's physical and profiler checks, and the command line, without a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from moelab.hardware import Ceilings
from moelab.verify import Verdict, verify
from moelab.verify.harness import _judge_profile

HERE = Path(__file__).parent
C, P = HERE / "candidates", HERE / "problems"


def test_time_below_the_floor_is_too_fast():
    # A device that would need ~1 s for this problem's bytes: the CPU time is then "impossibly" fast.
    slow = Ceilings(name="test-gpu", source="test", read_gbps=1e-6, copy_gbps=None, bf16_tflops=1.0,
                    fp16_tflops=1.0)
    v = verify(C / "swish_torch.py", P / "small_swish.py", trials=1, samples=3, compile=False, ceilings=slow)
    assert "too_fast" in v.codes
    assert v.times["floor_us"] > v.times["candidate_us"] and v.times["pct_of_floor"] > 100
    fast = Ceilings(name="test-gpu", source="test", read_gbps=1e6, copy_gbps=None, bf16_tflops=1e6,
                    fp16_tflops=1e6)
    v = verify(C / "swish_torch.py", P / "small_swish.py", trials=1, samples=3, compile=False, ceilings=fast)
    assert v.passed and v.checks["above_floor"] and 0 < v.times["pct_of_floor"] < 100
    d = json.loads(json.dumps(v.to_dict()))
    assert d["verdict"] == "PASS" and d["times"]["candidate_us"] > 0 and "median_us" in d["timing"]["candidate"]


def _verdict() -> Verdict:
    return Verdict(candidate="c.py", problem="p", precision="fp32")


def test_profiler_requires_the_claimed_kernel_to_run():
    v = _verdict()
    _judge_profile(v, {"kernels": ["ampere_sgemm_128x64", "vectorized_elementwise"], "streams": [7],
                       "eager_streams": [7]}, {"jit_functions": ["_swish_kernel"]})
    assert v.codes == ["profiler"]
    v = _verdict()
    _judge_profile(v, {"kernels": ["_swish_kernel"], "streams": [7], "eager_streams": [7]},
                   {"jit_functions": ["_swish_kernel"]})
    assert v.finish().passed
    v = _verdict()
    _judge_profile(v, {"kernels": ["_swish_kernel"], "streams": [7, 13], "eager_streams": [7]},
                   {"jit_functions": ["_swish_kernel"]})
    assert v.codes == ["side_stream"]
    v = _verdict()
    _judge_profile(v, {"kernels": [], "streams": [], "eager_streams": [7]}, {"jit_functions": []})
    assert v.codes == ["profiler"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "moelab", "verify", *args], capture_output=True, text=True,
                          timeout=300)


def test_cli_exit_codes_and_json():
    ok = _cli(str(C / "swish_torch.py"), "--problem-file", str(P / "small_swish.py"), "--trials", "1",
              "--no-time", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["passed"] is True
    bad = _cli(str(C / "units_x1000.py"), "--problem-file", str(P / "small_rmsnorm.py"), "--trials", "1",
               "--no-time")
    assert bad.returncode == 1 and "FAIL" in bad.stdout and "incorrect" in bad.stdout
    usage = _cli(str(C / "swish_torch.py"), "--problem", "no_such_problem")
    assert usage.returncode == 2 and usage.stderr.startswith("moelab: error:") and "Traceback" not in usage.stderr
    listing = _cli("--list", "--json")
    assert listing.returncode == 0 and {"moe3", "moe_decode_t1", "cumsum"} <= {r["problem"] for r in
                                                                              json.loads(listing.stdout)}
