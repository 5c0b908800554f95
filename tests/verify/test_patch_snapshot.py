"""The harness's patch detection must not blame a candidate for what torch itself does on first use.

On the H200 (2026-12-01) every candidate failed with `patch: torch.manual_seed` because torch._dynamo, imported
by the torch.compile baseline after the snapshot, wraps torch.manual_seed. The snapshot now imports it first.
Run in a fresh interpreter, so that dynamo is not already imported by another test.
"""

import subprocess
import sys

SCRIPT = r"""
import time, torch
from moelab.verify import _worker as W
snap = W._snapshot()
torch.compile(lambda t: t * 2, backend="eager")(torch.ones(3))  # what the compile baseline triggers
assert W._patched(snap) == [], W._patched(snap)
orig = time.perf_counter
time.perf_counter = lambda: 0.0  # what a cheating candidate does
found = W._patched(snap)
assert found == ["time.perf_counter"], found
assert time.perf_counter is orig  # and it is put back before timing
print("ok")
"""


def test_compile_baseline_is_not_a_patch_but_a_replaced_clock_is():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]
