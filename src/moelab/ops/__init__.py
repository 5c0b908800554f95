"""The registry of ops: for each op, its plain-torch reference and moelab's kernel path.

One reference per op lives here (in `ops/<op>.py`); tests, benchmarks, the engine's `--impl eager`,
and the profiler all import it from this registry, and nothing re-implements it.

    from moelab import ops
    f = ops.get("fused_moe", impl="moelab")   # or impl="eager" for the reference
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

IMPLS = ("eager", "moelab")


@dataclass(frozen=True)
class Op:
    name: str
    reference: Callable  # plain torch, fp32 accumulation, the model's casting rules
    kernel: Callable | None  # moelab's Triton path (None: no kernel yet; `get(..., "moelab")` says so)
    doc: str = ""


REGISTRY: dict[str, Op] = {}

# Modules that register ops when imported.
_MODULES = ["moe", "norm", "rope", "attention", "linear", "sample", "gdn"]


def register(name: str, reference: Callable, kernel: Callable | None = None, doc: str = "") -> Op:
    if name in REGISTRY:
        raise ValueError(f"op {name!r} is registered twice")
    REGISTRY[name] = op = Op(name, reference, kernel, doc)
    return op


def _load() -> None:
    for m in _MODULES:
        try:
            importlib.import_module(f"moelab.ops.{m}")
        except ModuleNotFoundError as e:
            if e.name != f"moelab.ops.{m}":
                raise


def get(name: str, impl: str = "moelab") -> Callable:
    """The callable for op `name`: its reference (impl="eager") or its kernel (impl="moelab")."""
    _load()
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS}, not {impl!r}")
    if name not in REGISTRY:
        raise KeyError(f"no op named {name!r}; known: {sorted(REGISTRY)}")
    op = REGISTRY[name]
    if impl == "eager":
        return op.reference
    if op.kernel is None:
        raise NotImplementedError(f"op {name!r} has no moelab kernel yet; use impl='eager'")
    return op.kernel


def names() -> list[str]:
    _load()
    return sorted(REGISTRY)
