"""`moelab mine --report DIR`: what a mining run found, read back from its log.

Per problem: the best verified kernel (its file), its time, speed-ups against eager and torch.compile,
and percent of the roofline floor. Then every failure counted by reason code and by where it arose
(`endpoint`: the request; `answer`: nothing usable in it; `verify`: the judge) — the last group is the
"reward hacks caught" table. And a PNG: best verified speed-up against torch.compile (and eager) after
each attempt, one line per problem.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from moelab.errors import UserError
from moelab.mine.log import LOG_NAME, read_log, write_file_durably
from moelab.mine.prompt import best_record

ANSWER_CODES = {"empty_answer", "no_code"}


def failure_source(record: dict[str, Any]) -> str:
    """Where an attempt failed: `endpoint`, `answer` or `verify`."""
    if record.get("error"):
        return "endpoint"
    if any(r.get("code") in ANSWER_CODES for r in record.get("reasons") or []) and not record.get("code_path"):
        return "answer"
    return "verify"


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The report as a dict: `problems` (one row each), `failures` (one row per source and code), totals."""
    problems = list(dict.fromkeys(r["problem"] for r in records))
    rows = []
    for name in problems:
        mine = [r for r in records if r["problem"] == name]
        best = best_record(mine)
        t = (best or {}).get("times") or {}
        rows.append({
            "problem": name, "attempts": len(mine), "passed": sum(1 for r in mine if r.get("passed")),
            "best_round": best["round"] if best else None, "best_kernel": best.get("code_path") if best else None,
            "candidate_us": t.get("candidate_us"), "eager_us": t.get("eager_us"), "compile_us": t.get("compile_us"),
            "speedup_vs_eager": t.get("speedup_vs_eager"), "speedup_vs_compile": t.get("speedup_vs_compile"),
            "floor_us": t.get("floor_us"), "pct_of_floor": t.get("pct_of_floor"),
        })
    counts: Counter[tuple[str, str]] = Counter()
    by_problem: dict[tuple[str, str], Counter[str]] = {}
    for r in records:
        if r.get("passed"):
            continue
        src = failure_source(r)
        codes = dict.fromkeys(x.get("code", "?") for x in r.get("reasons") or []) or {"unknown": None}
        for code in codes:  # an attempt counts once per distinct code
            counts[(src, code)] += 1
            by_problem.setdefault((src, code), Counter())[r["problem"]] += 1
    order = {"verify": 0, "answer": 1, "endpoint": 2}
    failures = [{"source": s, "code": c, "attempts": n, "problems": dict(by_problem[(s, c)])}
                for (s, c), n in sorted(counts.items(), key=lambda kv: (order.get(kv[0][0], 3), -kv[1], kv[0][1]))]
    return {
        "attempts": len(records), "passed": sum(1 for r in records if r.get("passed")),
        "failed": sum(1 for r in records if not r.get("passed")),
        "models": sorted({str(r.get("model")) for r in records}),
        "tokens": sum(((r.get("tokens") or {}).get("total_tokens") or 0) for r in records),
        "problems": rows, "failures": failures,
    }


def progress_series(records: list[dict[str, Any]], problem: str, key: str) -> tuple[list[int], list[float | None]]:
    """Rounds and the best verified `times[key]` up to each (None before the first timed pass)."""
    mine = sorted((r for r in records if r["problem"] == problem), key=lambda r: r["round"])
    xs, ys, best = [], [], None
    for r in mine:
        v = (r.get("times") or {}).get(key) if r.get("passed") else None
        if v is not None and (best is None or v > best):
            best = v
        xs.append(r["round"])
        ys.append(best)
    return xs, ys


def plot(records: list[dict[str, Any]], path: Path) -> Path:
    """Write the best-speed-up-over-attempts PNG to `path`."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    any_line = False
    for i, name in enumerate(dict.fromkeys(r["problem"] for r in records)):
        color = f"C{i % 10}"
        for key, style, label in (("speedup_vs_compile", "-", "vs torch.compile"), ("speedup_vs_eager", ":", "vs eager")):
            xs, ys = progress_series(records, name, key)
            pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
            if pts:
                ax.step([p[0] for p in pts], [p[1] for p in pts], style, where="post", color=color,
                        label=f"{name} best {label}")
                any_line = True
        # Each verified attempt's own speed-up, so a plateau shows whether attempts still pass.
        own = [(r["round"], (r.get("times") or {}).get("speedup_vs_compile")) for r in records
               if r["problem"] == name and r.get("passed")]
        own = [(x, y) for x, y in own if y is not None]
        if own:
            ax.plot([p[0] for p in own], [p[1] for p in own], "o", mfc="none", color=color,
                    label=f"{name} each verified attempt vs torch.compile")
    ax.axhline(1.0, color="0.5", lw=0.8)  # parity with the baseline
    lo, hi = ax.get_ylim()
    ax.set_ylim(min(lo, 0.9), max(hi, 1.1))
    ax.set_xlabel("attempt (round)")
    ax.set_ylabel("verified speed-up (×)")
    ax.set_title(f"moelab mine: {len(records)} attempts, {sum(1 for r in records if r.get('passed'))} passed")
    if any_line:
        ax.legend(fontsize=7, loc="best")
    else:
        ax.text(0.5, 0.5, "no timed, verified kernel yet", ha="center", va="center", transform=ax.transAxes)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def write_report(out_dir: str | Path) -> dict[str, Any]:
    """Summarize `out_dir`'s log into `report.json` and `report.png` there; return the summary
    (with the two paths). Raises UserError when the directory holds no mining log."""
    out = Path(out_dir)
    log = out / LOG_NAME
    if not log.is_file():
        raise UserError(f"{out} holds no mining log ({LOG_NAME}); give the --out of a `moelab mine` run")
    records = read_log(log)
    summary = summarize(records)
    summary["png"] = str(plot(records, out / "report.png"))
    summary["json"] = str(out / "report.json")
    write_file_durably(out / "report.json", json.dumps(summary, indent=1) + "\n")
    return summary
