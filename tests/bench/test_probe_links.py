"""probe_links' chain forms compute the torch chain (CPU: the interpreter; the persistent form waits on higher
program indices, which the interpreter runs later, so it is checked on the GPU only)."""

import os
import sys
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():  # before anything imports triton
    os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from probe_links import K, reference, run_chain  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
FORMS = ["kernels", "staged"] + (["persistent"] if DEV == "cuda" else [])


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("weights", [False, True])
@pytest.mark.parametrize("stride", [1, 32])
def test_forms_compute_the_chain_and_reset_their_counters(form, weights, stride):
    torch.manual_seed(1)
    # 8 programs of 256 rows on the CPU; on the GPU the probe's 128 programs of 16 rows (256 × 2048 bf16 weight rows
    # a program spill to local memory there: a minute per call)
    L, g = 3, (128 if DEV == "cuda" else 8)
    ws = torch.randn(L, K, K, device=DEV).bfloat16() if weights else None
    xs = torch.zeros(L + 1, K, device=DEV)
    xs[0] = torch.randn(K, device=DEV)
    xs[1:] = float("nan")  # every row of every step must be written
    cnt = torch.zeros(L * stride, dtype=torch.int32, device=DEV)
    want = reference(xs, ws)
    for _ in range(2):  # a second call finds its counters zero again
        got = run_chain(form, xs, ws, cnt, g, stride=stride)
        assert ((got - want).norm() / want.norm()).item() <= 1e-5
        assert int(cnt.abs().sum()) == 0


def test_unknown_form_is_refused():
    xs = torch.zeros(2, K, device=DEV)
    with pytest.raises(ValueError, match="form must be"):
        run_chain("megakernel", xs, None, torch.zeros(4, dtype=torch.int32, device=DEV), 8)


def test_too_few_counters_for_the_stride_is_refused():
    xs = torch.zeros(4, K, device=DEV)
    with pytest.raises(ValueError, match="need 96 counters"):
        run_chain("staged", xs, None, torch.zeros(64, dtype=torch.int32, device=DEV), 8, stride=32)
