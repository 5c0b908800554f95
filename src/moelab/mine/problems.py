"""Which problems a mining run works on, and each one's reference source (what the prompt quotes).

A problem is named on the command line either by a shipped name (`moelab verify --list`) or by the
path of a KernelBench-format file. Its identity in the log is the shipped name or the file's stem, so a
resumed run finds its attempts again whatever the working directory.
"""

from __future__ import annotations

import ast
import importlib.resources
import re
from dataclasses import dataclass
from pathlib import Path

from moelab.errors import UserError


@dataclass(frozen=True)
class Problem:
    name: str  # identity in the log and on screen
    ref: str  # what `verify` is given: a shipped name or an absolute path
    source: str  # the reference file's text
    precision: str = "fp32"  # the problem's own task precision (verify's default for it)
    helpers: tuple[tuple[str, str], ...] = ()  # (module, source) of local modules the reference imports


def local_imports(source: str) -> list[tuple[str, Path]]:
    """Shipped modules that `source` imports from `moelab.verify.problems` (the MoE problems share
    `_moe.py`). The model must see their code too, or it is asked to match a Model it cannot read."""
    from moelab.verify.problem import PROBLEMS_DIR

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    prefix = "moelab.verify.problems."
    found: dict[str, Path] = {}
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
        for mod in names:
            path = PROBLEMS_DIR / f"{mod[len(prefix):]}.py"
            if mod.startswith(prefix) and path.is_file():
                found[mod] = path
    return list(found.items())


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def shipped_names() -> list[str]:
    """Names of the problems `moelab verify` ships."""
    from moelab.verify import list_problems
    return list(list_problems())


def _shipped_source(name: str) -> str:
    # The verify room ships problems as package data (verify/problems/<name>.py).
    f = importlib.resources.files("moelab.verify") / "problems" / f"{name}.py"
    try:
        return f.read_text(encoding="utf-8")
    except (FileNotFoundError, OSError) as e:
        raise UserError(f"problem {name!r} is listed by verify but its file cannot be read: {e}") from None


def resolve_problems(spec: str) -> list[Problem]:
    """`all`, or comma-separated shipped names and/or paths to problem files → Problems (in order,
    duplicates dropped). Raises UserError for an unknown name, an unreadable file, or two files with
    the same stem."""
    items = [s.strip() for s in spec.split(",") if s.strip()]
    if not items:
        raise UserError("--problems is empty (give names from `moelab verify --list`, paths, or `all`)")
    shipped: list[str] | None = None
    out: dict[str, Problem] = {}
    for item in items:
        path = Path(item).expanduser()
        if item.endswith(".py") or path.is_file():
            if not path.is_file():
                raise UserError(f"problem file {item} does not exist")
            name = _safe(path.stem)
            try:
                source = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise UserError(f"problem file {item} cannot be read: {e}") from None
            new = [Problem(name, str(path.resolve()), source)]
        else:
            if shipped is None:
                shipped = shipped_names()
            names = shipped if item == "all" else [item]
            for n in names:
                if n not in shipped:
                    raise UserError(f"unknown problem {n!r}; known: {', '.join(shipped) or '(none)'}")
            new = [Problem(n, n, _shipped_source(n)) for n in names]
        for i, p in enumerate(new):
            p = new[i] = _checked(p)
            if p.name in out and out[p.name].ref != p.ref:
                raise UserError(f"two problems are both named {p.name!r} ({out[p.name].ref} and {p.ref})")
            out[p.name] = p
    if not out:
        raise UserError("no problems to mine: `moelab verify --list` lists none; give problem files instead")
    return list(out.values())


def _checked(p: Problem) -> Problem:
    """Fail before the first request, not on every attempt, when a file is not a KernelBench problem;
    and learn the problem's precision."""
    from dataclasses import replace

    from moelab.verify import load_problem
    loaded = load_problem(p.ref)  # raises UserError naming what is wrong
    helpers = tuple((m, f.read_text(encoding="utf-8")) for m, f in local_imports(p.source))
    return replace(p, precision=loaded.precision, helpers=helpers)
