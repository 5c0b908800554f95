"""Tolerances are tight enough that the reference run one precision lower fails them, and loose enough
that the reference at the task's precision passes — on every shipped problem, at reduced sizes."""

from __future__ import annotations

import copy

import pytest
import torch

from moelab.verify import checks as C
from moelab.verify import list_problems, load_problem

# Each problem's size knobs, shrunk so that fp16/bf16 on CPU stays quick; reduction lengths stay long
# enough (≥ 512) for accumulation error to show.
SMALL = {
    "moe": dict(T=16, H=256, I=128), "moe2": dict(T=16, H=256, I=128, E=16),
    "moe3": dict(T=16, H=256, I=128, E=16), "moe_decode_t1": dict(H=256, I=128, E=16),
    "moe_decode_t8": dict(H=256, I=128, E=16), "rmsnorm": dict(T=8), "softmax": dict(B=4),
    "swish": dict(B=4, D=1024), "l1norm": dict(B=4), "cumsum": dict(B=4),
    "gemm_mul_leakyrelu": dict(B=8, IN=1024, OUT=64),
}
LOWER = {"fp32": "fp16", "fp16": "bf16", "bf16": "fp8"}
DT = {**C.PRECISIONS, "fp8": torch.float8_e4m3fn}


def _run_at(model: torch.nn.Module, inputs: list, prec: str) -> torch.Tensor:
    """The reference with parameters and floating inputs rounded to `prec` (fp8: rounded, computed in bf16)."""
    dt = DT[prec]
    compute = torch.bfloat16 if prec == "fp8" else dt
    m = copy.deepcopy(model)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p.to(dt).to(p.dtype))
        m = m.to(compute)
        xs = [x.to(dt).to(compute) if x.is_floating_point() else x for x in inputs]
        return C.flatten(m(*xs))[0]


def _errors(name: str, task: str) -> tuple[float, float, float]:
    prob = load_problem(name)
    for k, val in SMALL[name].items():
        setattr(prob.module, k, val)
    torch.manual_seed(0)
    model = prob.module.Model(*prob.module.get_init_inputs()).to(C.PRECISIONS[task]).eval()
    inputs = C.cast_inputs(prob.module.get_inputs(), C.PRECISIONS[task])
    oracle = copy.deepcopy(model).double()
    with torch.no_grad():
        ref = C.flatten(oracle(*C.to_oracle(inputs)))[0]
    same = C.rel_error(_run_at(model, inputs, task), ref)
    lower = C.rel_error(_run_at(model, inputs, LOWER[task]), ref)
    return same, lower, C.tolerance(task, prob.meta("TOLERANCE"))


@pytest.mark.parametrize("name", list_problems())
def test_tolerance_separates_precisions(name):
    assert set(SMALL) == set(list_problems()), "every shipped problem needs its small sizes here"
    for task in ("fp32", "fp16", "bf16"):
        same, lower, tol = _errors(name, task)
        # margin 1.5: a kernel may round in another order than the reference
        assert same <= tol / 1.5, f"{name} {task}: the reference itself errs {same:.2e} vs tolerance {tol:.0e}"
        assert lower > tol, f"{name} {task}: the reference at {LOWER[task]} errs only {lower:.2e} ≤ {tol:.0e}"
