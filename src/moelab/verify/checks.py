"""Correctness arithmetic: tolerances, input distributions, relative error, the near-constant test.

Everything here runs in the parent process on tensors the parent made or received; nothing trusts the
candidate. The metric is the relative error ‖out − ref‖₂ / ‖ref‖₂ against a float64 oracle.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

PRECISIONS = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}

# Relative error allowed per task precision. Each sits between the error of the reference computed at
# that precision and the error of the reference one precision lower, so that a downgrade fails. Measured on
# the shipped problems at reduced sizes (tests/verify/test_tolerance.py, CPU, 2026-12-01): at the task's own
# precision fp32 2e-8..2e-7, fp16 2e-4..8e-4, bf16 1.6e-3..6.2e-3; one lower (fp16 in an fp32 task,
# bf16 in fp16, fp8 in bf16) ≥ 2.3e-4, ≥ 1.9e-3, ≥ 1.4e-2. fp32 keeps room for GPU reduction orders.
TOLERANCE = {"fp32": 2e-5, "fp16": 1.5e-3, "bf16": 1.5e-2}

# Above the task's tolerance but within this, the answer is right at a lower precision: reason `precision`.
LOOSE = {"fp32": 5e-2, "fp16": 5e-2, "bf16": 1.5e-2}

# Near-constant problems: when the oracle's outputs differ across inputs by less than this (relative),
# a constant kernel comes close; the candidate must then reproduce the input-dependent part itself.
NEAR_CONSTANT = 1e-3
# ... to within this fraction of that part's size.
NEAR_CONSTANT_TOL = {"fp32": 0.05, "fp16": 0.25, "bf16": 0.5}

DISTRIBUTIONS = ("normal", "uniform", "heavy", "large")


def tolerance(precision: str, problem_tol: dict | None = None) -> float:
    if problem_tol and precision in problem_tol:
        return float(problem_tol[precision])
    return TOLERANCE[precision]


def flatten(out: Any) -> list[Any]:
    """A model's output as a flat list (a tensor, or tuples/lists of them; other values kept as is)."""
    if isinstance(out, (tuple, list)):
        return [y for x in out for y in flatten(x)]
    return [out]


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """‖out − ref‖₂ / ‖ref‖₂ in float64 (inf on NaN/inf; 0/0 counts as 0, x/0 as inf)."""
    o, r = out.detach().to("cpu", torch.float64), ref.detach().to("cpu", torch.float64)
    if not torch.isfinite(o).all():
        return math.inf
    num, den = torch.linalg.vector_norm(o - r).item(), torch.linalg.vector_norm(r).item()
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / den


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN-aware, dtype-exact)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.detach().contiguous().reshape(-1).view(torch.uint8),
                       b.detach().contiguous().reshape(-1).view(torch.uint8))


def significant_strides(t: torch.Tensor) -> tuple[int, ...]:
    """Strides of the dimensions longer than 1 (a size-1 dimension's stride is arbitrary)."""
    return tuple(s for s, n in zip(t.stride(), t.shape) if n > 1)


def transform(inputs: Sequence[Any], dist: str, gen: torch.Generator, which: Sequence[int] | None,
              large: float) -> list[Any]:
    """Reshape the value distribution of floating inputs, keeping shape, dtype and sign convention.

    normal: as `get_inputs()` made them; uniform: U(−a, a) with a = √3·std (same variance);
    heavy: Student-t with 3 degrees of freedom, std-scaled; large: ×`large`. Inputs that were all
    non-negative stay non-negative (abs). `which`: indices eligible (None = every floating tensor).
    """
    out = []
    for i, x in enumerate(inputs):
        if (dist == "normal" or not isinstance(x, torch.Tensor) or not x.is_floating_point()
                or x.numel() == 0 or (which is not None and i not in which)):
            out.append(x)
            continue
        x64 = x.double()
        std = x64.std().item() if x.numel() > 1 else 1.0
        std = std if math.isfinite(std) and std > 0 else 1.0
        nonneg = bool((x64 >= 0).all())
        if dist == "uniform":
            y = (torch.rand(x.shape, generator=gen, dtype=torch.float64) * 2 - 1) * math.sqrt(3) * std
        elif dist == "heavy":
            z = torch.randn(x.shape, generator=gen, dtype=torch.float64)
            chi = sum(torch.randn(x.shape, generator=gen, dtype=torch.float64) ** 2 for _ in range(3))
            y = z / torch.sqrt(chi / 3) * std / math.sqrt(3)  # t(3) has variance 3
            y = y.clamp(-50 * std, 50 * std)
        elif dist == "large":
            y = x64 * large
        else:
            raise ValueError(f"unknown input distribution {dist!r}; known: {DISTRIBUTIONS}")
        if nonneg:
            y = y.abs()
        out.append(y.to(x.dtype))
    return out


def cast_inputs(inputs: Sequence[Any], dtype: torch.dtype) -> list[Any]:
    """Floating tensors to the task dtype (what the candidate and the baselines get)."""
    return [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]


def to_oracle(inputs: Sequence[Any]) -> list[Any]:
    """The same values in float64 (exact: every lower float widens without rounding)."""
    return [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]


def trivial_fit(oracle_outs: Sequence[torch.Tensor], inputs: Sequence[Sequence[Any]]
                ) -> tuple[str, float, list[torch.Tensor]] | None:
    """Does a trivial answer come close to the truth on every trial? (the 10278× and 170× kernels)

    Trivial answers: one constant tensor for all inputs (the mean of the oracle's outputs), or an input
    returned as is (a residual problem whose correction is tiny). For each, spread = max over trials of
    ‖o_i − t_i‖/‖o_i‖. Returns (what, spread, [t_i]) for the closest one if its spread < NEAR_CONSTANT,
    else None. `oracle_outs[i]` is trial i's first output, `inputs[i]` its inputs.
    """
    outs = [o.double().cpu() for o in oracle_outs]
    if not outs or any(o.shape != outs[0].shape for o in outs):
        return None
    options: list[tuple[str, list[torch.Tensor]]] = []
    if len(outs) >= 2:
        options.append(("a constant", [torch.stack(outs).mean(0)] * len(outs)))
    for j, x in enumerate(inputs[0]):
        if all(isinstance(xs[j], torch.Tensor) and xs[j].is_floating_point() and xs[j].shape == outs[0].shape
               for xs in inputs):
            options.append((f"input {j} unchanged", [xs[j].double().cpu() for xs in inputs]))
    best = None
    for what, ts in options:
        spread = 0.0
        for o, t in zip(outs, ts):
            num, den = torch.linalg.vector_norm(o - t).item(), torch.linalg.vector_norm(o).item()
            spread = max(spread, num / den if den > 0 else (0.0 if num == 0 else math.inf))
        if spread < NEAR_CONSTANT and (best is None or spread < best[1]):
            best = (what, spread, ts)
    return best


def varying_part_error(cand: torch.Tensor, ref: torch.Tensor, trivial: torch.Tensor) -> float:
    """‖cand − ref‖ / ‖ref − trivial‖: the error relative to the part of the answer a trivial kernel misses."""
    c, r, mean = cand.double().cpu(), ref.double().cpu(), trivial.double().cpu()
    if not torch.isfinite(c).all():
        return math.inf
    num, den = torch.linalg.vector_norm(c - r).item(), torch.linalg.vector_norm(r - mean).item()
    if den == 0.0:
        return math.inf  # the answer does not depend on the inputs: nothing distinguishes a real kernel
    return num / den
