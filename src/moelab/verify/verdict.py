"""What `verify` returns: PASS or FAIL with every reason, the checks that ran, and the times."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The keys of `Verdict.times`, all in microseconds or plain ratios; None where not measured.
TIME_KEYS = ("candidate_us", "eager_us", "compile_us", "speedup_vs_eager", "speedup_vs_compile",
             "floor_us", "pct_of_floor")


@dataclass(frozen=True)
class Reason:
    """Why a candidate failed: a stable `code` (see `moelab.verify`'s table) and a one-line message."""

    code: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass
class Verdict:
    """The judgement of one candidate on one problem.

    passed: True only when no check failed. reasons: every failure found (empty when passed).
    checks: check name -> True (passed), False (failed) or None (not run, and why is in `notes`).
    times: see TIME_KEYS; spread and sample counts are in `timing`.
    """

    candidate: str
    problem: str
    precision: str
    passed: bool = False
    reasons: list[Reason] = field(default_factory=list)
    checks: dict[str, bool | None] = field(default_factory=dict)
    times: dict[str, float | None] = field(default_factory=lambda: {k: None for k in TIME_KEYS})
    timing: dict[str, Any] = field(default_factory=dict)  # full Measurement dicts per implementation
    errors: dict[str, float] = field(default_factory=dict)  # worst relative error per check
    tolerance: float | None = None
    notes: list[str] = field(default_factory=list)
    isolation: dict[str, Any] = field(default_factory=dict)
    kernels: list[str] = field(default_factory=list)  # GPU kernels the profiler saw the candidate run

    def fail(self, code: str, message: str) -> None:
        """Record a failure (once per code+message)."""
        r = Reason(code, message)
        if r not in self.reasons:
            self.reasons.append(r)

    def check(self, name: str, ok: bool | None) -> None:
        """Record a check's outcome; a later False overrides an earlier True."""
        if ok is None and name in self.checks:
            return
        if self.checks.get(name) is False:
            return
        self.checks[name] = ok

    @property
    def codes(self) -> list[str]:
        return [r.code for r in self.reasons]

    def finish(self) -> Verdict:
        self.passed = not self.reasons
        return self

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: times are in fields named with their unit (`*_us`), ratios are plain numbers."""
        return {
            "candidate": self.candidate, "problem": self.problem, "precision": self.precision,
            "passed": self.passed, "verdict": "PASS" if self.passed else "FAIL",
            "reasons": [r.to_dict() for r in self.reasons], "checks": dict(self.checks),
            "times": dict(self.times), "timing": self.timing,
            "relative_errors": {k: _finite(v) for k, v in self.errors.items()},
            "tolerance": self.tolerance, "notes": list(self.notes), "isolation": dict(self.isolation),
            "kernels": list(self.kernels),
        }


def _finite(x: float) -> float | str:
    """Strict JSON has no inf/NaN: those travel as the strings "inf" and "nan"."""
    return x if x == x and abs(x) != float("inf") else str(x)
