"""Output for people and for programs: rich tables, JSON, and (lazily imported) matplotlib plots."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

console = Console()


def fmt(v: Any, digits: int = 3) -> str:
    """A cell: floats to `digits` significant figures (thousands separated), None as '—'."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if v != v:
            return "nan"
        if abs(v) >= 10 ** digits:
            return f"{v:,.0f}"
        return f"{v:.{digits}g}"
    return str(v)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, *, title: str | None = None,
          headers: dict[str, str] | None = None, caption: str | None = None) -> None:
    """Print `rows` (dicts) as a rich table; `columns` picks and orders keys, `headers` renames them."""
    columns = list(columns or (rows[0].keys() if rows else []))
    headers = headers or {}
    t = Table(title=title, caption=caption, show_lines=False)
    for c in columns:
        t.add_column(headers.get(c, c), justify="left" if rows and isinstance(rows[0].get(c), str) else "right")
    for r in rows:
        t.add_row(*(fmt(r.get(c)) for c in columns))
    console.print(t)


def emit_json(obj: Any) -> None:
    """Machine-readable output on stdout (the `--json` flag of every table-printing command)."""
    sys.stdout.write(json.dumps(obj, indent=1, default=_default) + "\n")


def _default(o: Any) -> Any:
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if hasattr(o, "__dataclass_fields__"):
        from dataclasses import asdict
        return asdict(o)
    return str(o)


def plot_series(rows: Sequence[dict[str, Any]], *, x: str, series: Sequence[str], path: str, title: str = "",
                ylabel: str = "", logx: bool = False, logy: bool = False) -> None:
    """Line plot of several columns of `rows` against column `x`, written as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for s in series:
        pts = [(r[x], r[s]) for r in rows if r.get(s) is not None]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=s)
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
