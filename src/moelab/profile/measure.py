"""Per-call measurement with the one timer (`moelab.timing.measure`) and launch counting with torch.profiler.

`Meter` holds the two injectable functions — `measure(fn, arg_sets, mode) -> Measurement` and
`launches(fn, args) -> int | None` — so the profiler's bookkeeping can be tested on a CPU with a fake
timer, and times one (callable, argument sets) in one mode. Failures of the baselines are reported
(an eager expert loop cannot be captured in a CUDA graph: it asks the host which experts were hit);
a failure of a moelab kernel is raised, never hidden.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from moelab import timing


@dataclass
class Meter:
    """The measuring functions (injectable) and the sample count."""

    measure: Callable[..., Any] = timing.measure
    launches: Callable[[Callable, Sequence[Any]], int | None] = timing.count_launches
    samples: int = 25
    warmup: int = 3
    _compiled: dict[Any, Callable] = field(default_factory=dict)

    def compiled(self, key: Any, fn: Callable) -> Callable:
        """torch.compile(fn), once per key (a unit's compiled callable is reused across contexts)."""
        if key not in self._compiled:
            self._compiled[key] = torch.compile(fn)
        return self._compiled[key]

    def time(self, fn: Callable, sets: list[tuple], mode: str, *, must_work: bool) -> dict[str, Any]:
        """{"us": median per call, "iqr_us", "samples", "timer", "mode"} or {"us": None, "error": ...}."""
        try:
            m = self.measure(fn, sets, mode=mode, warmup=self.warmup, samples=self.samples)
        except Exception as e:
            if must_work:
                raise
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            return {"us": None, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"}
        return {"us": m.median_us, "iqr_us": m.iqr_us, "samples": m.samples, "timer": m.timer, "mode": m.mode}

    def count(self, fn: Callable, args: Sequence[Any]) -> int | None:
        return self.launches(fn, args)
