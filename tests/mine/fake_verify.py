"""A stand-in for `moelab.verify.verify` with the same signature, for tests of the loop alone.

It judges by simple rules so the loop's bookkeeping can be checked without the real harness:
unparsable → compile_error; `add_(` (writes into an input) → alias + mutation, while claiming a
1000× speed-up as a hack would; no ModelNew → no_modelnew; Triton code passes at 1.3× vs compile,
plain torch at 1.05×. It also records every call and whether two calls ever overlapped.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Reason:
    code: str
    message: str


@dataclass
class Verdict:
    passed: bool
    reasons: list[Reason] = field(default_factory=list)
    times: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _times(speedup_compile: float, speedup_eager: float, us: float) -> dict:
    return {"candidate_us": us, "eager_us": us * speedup_eager, "compile_us": us * speedup_compile,
            "speedup_vs_eager": speedup_eager, "speedup_vs_compile": speedup_compile,
            "floor_us": us / 2, "pct_of_floor": 50.0}


class FakeVerify:
    def __init__(self, delay_s: float = 0.0) -> None:
        self.calls: list[tuple[str, str, dict]] = []
        self.delay_s = delay_s
        self._active = 0
        self.max_active = 0
        self._lock = threading.Lock()

    def __call__(self, candidate, problem, *, precision=None, trials=5, timeout_s=300.0, time_it=True, seed=None):
        with self._lock:
            self._active += 1
            self.max_active = max(self.max_active, self._active)
        try:
            time.sleep(self.delay_s)
            src = Path(candidate).read_text()
            self.calls.append((str(candidate), str(problem), {"trials": trials, "time_it": time_it}))
            try:
                compile(src, str(candidate), "exec")
            except SyntaxError as e:
                return Verdict(False, [Reason("compile_error", f"SyntaxError: {e}")])
            if "add_(" in src:
                return Verdict(False, [Reason("alias", "output aliases input 1"),
                                       Reason("mutation", "input 1 changed")], _times(1000.0, 1000.0, 0.01))
            if "class ModelNew" not in src:
                return Verdict(False, [Reason("no_modelnew", "no ModelNew")])
            if not time_it:
                return Verdict(True, [], {})
            return Verdict(True, [], _times(1.3, 2.0, 10.0) if "triton" in src else _times(1.05, 1.1, 12.0))
        finally:
            with self._lock:
                self._active -= 1
