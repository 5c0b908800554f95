"""Problems in KernelBench's format, and their optional moelab metadata.

A problem file defines `Model(nn.Module)`, `get_inputs()` and `get_init_inputs()`; a KernelBench file works
unchanged. Optional module-level metadata moelab reads when present:

    PRECISION = "fp32"                      # the task's default precision
    TOLERANCE = {"fp32": 1e-5, ...}         # relative error ‖out−ref‖/‖ref‖ allowed, per precision
    BYTES = callable(inputs, init_inputs, dtype) | number   # for the roofline floor (default: inputs +
    FLOPS = callable(inputs, init_inputs, dtype) | number   #   parameters + outputs; FLOPs 0)
    get_inputs_alt()                        # inputs at a shape the timing does not use
    TRANSFORM_INPUTS = (0,)                 # which inputs the input distributions may reshape (default: all
                                            #   floating inputs); e.g. MoE router logits keep their spacing
    LARGE_SCALE = 100.0                     # the "large magnitude" distribution's factor
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from moelab.errors import UserError

PROBLEMS_DIR = Path(__file__).parent / "problems"


@dataclass
class Problem:
    name: str
    path: Path
    module: ModuleType

    @property
    def doc(self) -> str:
        return (self.module.__doc__ or "").strip().splitlines()[0] if self.module.__doc__ else ""

    @property
    def precision(self) -> str:
        return str(getattr(self.module, "PRECISION", "fp32"))

    def meta(self, name: str, default: Any = None) -> Any:
        return getattr(self.module, name, default)


def list_problems() -> list[str]:
    """Names of the shipped problems (files in `moelab/verify/problems/`)."""
    return sorted(p.stem for p in PROBLEMS_DIR.glob("*.py") if not p.name.startswith("_"))


def resolve(problem: str | Path) -> Path:
    """A shipped problem's name or a path to a problem file -> the file's path (UserError if neither)."""
    p = Path(problem)
    if p.suffix == ".py" or p.exists():
        if not p.is_file():
            raise UserError(f"problem file not found: {p}")
        return p.resolve()
    shipped = PROBLEMS_DIR / f"{problem}.py"
    if shipped.is_file():
        return shipped
    raise UserError(f"no problem named {str(problem)!r}; shipped problems: {', '.join(list_problems())}")


def import_file(path: Path, prefix: str) -> ModuleType:
    """Import a .py file under a unique module name (two files of the same stem never collide)."""
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    name = f"{prefix}_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_problem(problem: str | Path) -> Problem:
    """Load a problem by shipped name or path; UserError when the file is not a valid problem."""
    path = resolve(problem)
    try:
        module = import_file(path, "moelab_problem")
    except UserError:
        raise
    except Exception as e:  # a broken problem file is the user's file: say so in one line
        raise UserError(f"problem file {path} failed to import: {type(e).__name__}: {e}") from None
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, n)]
    if missing:
        raise UserError(f"problem file {path} lacks {', '.join(missing)} (KernelBench format)")
    name = path.stem if path.parent == PROBLEMS_DIR else str(path)
    return Problem(name=name, path=path, module=module)
