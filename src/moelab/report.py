"""Output for people and for programs: rich tables, JSON, and (lazily imported) matplotlib plots."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

# In a terminal, rich fits its width; piped into a file or a log, a table keeps its natural width
# (up to 200 columns) instead of being folded to 80.
console = Console() if sys.stdout.isatty() or os.environ.get("COLUMNS") else Console(width=200)


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
        if 0 < abs(v) < 1e-3:
            return f"{v:.1e}"
        return f"{v:.{digits}g}"
    return str(v)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, *, title: str | None = None,
          headers: dict[str, str] | None = None, caption: str | None = None) -> None:
    """Print `rows` (dicts) as a rich table; `columns` picks and orders keys, `headers` renames them."""
    columns = list(columns or (rows[0].keys() if rows else []))
    headers = headers or {}
    t = Table(title=title, caption=caption, show_lines=False)
    for c in columns:
        # fold, never truncate: a cell cut to "0.00…" on an 80-column terminal would show a wrong number
        t.add_column(headers.get(c, c), justify="left" if rows and isinstance(rows[0].get(c), str) else "right",
                     overflow="fold")
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


# ----------------------------------------------------------------------------------------------------
# README tables, generated from the JSON records under benchmarks/results/ (never typed by hand).

README_BEGIN, README_END = "<!-- results:begin -->", "<!-- results:end -->"


def _md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def _env_line(env: dict[str, Any]) -> str:
    sha, dash, rest = str(env.get("commit")).partition("-")  # a full sha shortened; "-dirty" kept whole
    return (f"{env.get('device')}, driver {env.get('driver')}, torch {env.get('torch')}, triton {env.get('triton')}, "
            f"commit {sha[:12]}{dash}{rest}, {env.get('date')}")


def shipped(r: dict) -> bool:
    """Whether a record measured the shipped code: not one marked `superseded` (an experiment since reverted,
    kept as history), nor one run under a MOELAB_* experiment switch (`env.moelab_env`)."""
    return not r.get("superseded") and not (r.get("env") or {}).get("moelab_env")


def _newest(recs: list[tuple[str, dict]], kind: str, key=lambda r: None) -> list[tuple[str, dict]]:
    """The newest record of `kind` for each value of key(record), in date order (older runs stay in the
    results folder as history; the README shows what is current)."""
    best: dict[Any, tuple[str, dict]] = {}
    for name, r in recs:
        if r.get("kind") == kind and shipped(r):
            k = key(r)
            if k not in best or r["env"]["date"] >= best[k][1]["env"]["date"]:
                best[k] = (name, r)
    return sorted(best.values(), key=lambda nr: nr[1]["env"]["date"])


def _newest_cells(recs: list[tuple[str, dict]], kind: str, cells) -> tuple[dict, list[tuple[str, dict]]]:
    """For each cell, the rows of the newest shipped record of `kind` that measured it. cells(record) → {cell:
    [rows]}: a cell groups what one process measured side by side (a shape's implementations), so a table never puts
    rows of two processes into one comparison unless its cells are single rows. Returns ({cell: (rows, run index)},
    [(name, record)] of the runs used, in date order, indexed from 1)."""
    best: dict[Any, tuple[list, str, dict]] = {}
    for name, r in sorted(((n, r) for n, r in recs if r.get("kind") == kind and shipped(r)),
                          key=lambda nr: nr[1]["env"]["date"]):
        for cell, rows in cells(r).items():
            best[cell] = (rows, name, r)
    runs = sorted({name: r for _, name, r in best.values()}.items(), key=lambda nr: nr[1]["env"]["date"])
    index = {name: i + 1 for i, (name, _) in enumerate(runs)}
    return {c: (rows, index[name]) for c, (rows, name, _) in best.items()}, runs


def _runs_list(runs: list[tuple[str, dict]], extra=lambda r: "") -> str:
    """The footnote naming each run of a merged table: [i] record — GPU, driver, torch, Triton, commit, date."""
    return "\n".join(f"[{i}] `{name}` — {_env_line(r['env'])}{extra(r)}  " for i, (name, r) in enumerate(runs, 1))


def _group(rows: list[dict], key) -> dict:
    out: dict[Any, list[dict]] = {}
    for x in rows:
        out.setdefault(key(x), []).append(x)
    return out


def _merged_tables(recs: list[tuple[str, dict]], kind: str, cells, *, heading: str, preamble, header: list[str],
                   row, order=lambda cell, first: cell, extra=lambda r: "") -> list[str]:
    """Markdown: for each table identity (the first element of every cell), one table whose rows are each cell's rows
    from the newest run that measured it (`_newest_cells`), a `run` column, and the runs it used listed under it.
    preamble(ident) says what the table holds; row(x) gives a row's cells; order(cell, first) sorts the cells, where
    first[cell] counts where the cell first appears in the runs, oldest first."""
    got, runs = _newest_cells(recs, kind, cells)
    first: dict = {}
    for _, r in runs:
        for c in cells(r):
            first.setdefault(c, len(first))
    out = []
    for ident in sorted({c[0] for c in got}):
        mine = sorted((c for c in got if c[0] == ident), key=lambda c: order(c, first))
        used = sorted({got[c][1] for c in mine})  # this table's runs, numbered from 1 under it
        local = {i: n for n, i in enumerate(used, 1)}
        out += [f"### {heading}\n\n{preamble(ident)}\n",
                _md_table(header + ["run"], [(*row(x), f"[{local[got[c][1]]}]") for c in mine for x in got[c][0]]), "",
                _runs_list([runs[i - 1] for i in used], extra), ""]
    return out


def results_markdown(results_dir: str = "benchmarks/results") -> str:
    """Markdown for the README: the newest record of each kind (per model and tp for bench-moe)."""
    import json
    from pathlib import Path

    def load(folder: Path) -> list[tuple[str, dict]]:
        recs = []
        for p in sorted(folder.glob("*.json")):
            try:
                recs.append((p.name, json.loads(p.read_text())))
            except (OSError, ValueError):
                continue
        return recs

    recs = load(Path(results_dir))
    out = []
    hws = [(n, r) for n, r in recs if r.get("kind") == "hw" and shipped(r)]
    if hws:
        name, r = max(hws, key=lambda nr: nr[1]["env"]["date"])
        c = r["ceilings"]
        rows = [("read bandwidth", c["read_gbps"], "GB/s", c.get("notes", {}).get("read_gbps", "")),
                ("copy bandwidth (read + write)", c["copy_gbps"], "GB/s", c.get("notes", {}).get("copy_gbps", "")),
                ("bf16 dense matmul", c["bf16_tflops"], "TFLOP/s", c.get("notes", {}).get("bf16_tflops", "")),
                ("Triton launch from Python", c["launch_triton_us"], "µs", ""),
                ("small torch op from Python", c["launch_torch_us"], "µs", ""),
                ("kernel replayed in a CUDA graph", c["graph_kernel_us"], "µs", "")]
        out += [f"### Measured ceilings (`moelab hw`)\n\n{_env_line(r['env'])} — `{name}`\n",
                _md_table(["ceiling", "value", "unit", "how"], rows), ""]
    def moe_tables(recs: list[tuple[str, dict]], heading: str) -> list[str]:
        # One table per model and shape; each T's row from the newest run that measured it, every implementation of
        # the row side by side in that run (a run of a few sizes updates those rows and leaves the others).
        def ident(r):
            s = r["shape"]
            return (r["model"], r["tp"], s["E"], s["H"], s["I"], s["k"], s["shared_I"])

        return _merged_tables(
            recs, "bench-moe", lambda r: {(ident(r), x["T"]): [x] for x in r["rows"]}, heading=heading,
            preamble=lambda i: (f"**{i[0]}**, tp={i[1]} (E={i[2]}, H={i[3]}, I={i[4]}, k={i[5]}, shared I={i[6]}). "
                                "µs per call, median; graph = CUDA-graph replay, host = launched from Python. Floor = "
                                "distinct experts hit × bytes per expert ÷ measured read bandwidth (or FLOPs ÷ bf16 "
                                "matmul rate: in records from 2026-12-05 on, the fastest of `moelab hw`'s rate and the "
                                "rate measured just before and after moelab's samples). `× best` = best baseline (any "
                                "mode) ÷ moelab graph."),
            header=["T", "experts", "floor", "HF loop (host)", "HF loop+compile (host)", "gather+bmm (graph)",
                    "gather+bmm+compile (graph)", "moelab (host)", "moelab (graph)", "% of floor", "× best"],
            row=lambda x: (x["T"], x["distinct_experts"], x["floor_us"], x.get("hf_loop_host_us"),
                           x.get("hf_loop+compile_host_us"), x.get("gather_bmm_graph_us"),
                           x.get("gather_bmm+compile_graph_us"), x.get("moelab_host_us"), x.get("moelab_graph_us"),
                           x.get("pct_of_floor"), x.get("speedup_vs_best_baseline")),
            order=lambda c, first: c[1], extra=lambda r: f"; read {r['ceilings']['read_gbps']:.0f} GB/s")

    out += moe_tables(recs, "One MoE layer, routing included (`moelab bench moe`)")
    for name, r in _newest(recs, "bench-norm"):
        out.append(f"### Fused add + RMSNorm and q/k RMSNorm + RoPE (`benchmarks/bench_norm.py`)\n\n"
                   f"hidden {r['hidden']}, heads {r['heads']}, {r['dtype']}; floor = bytes ÷ {r['read_gbps']:.0f} GB/s — "
                   f"{_env_line(r['env'])} — `{name}`\n")
        out += [_md_table(["op", "T", "impl", "mode", "median µs", "IQR µs", "floor µs", "% of floor", "launches"],
                          [(x["op"], x["T"], x["impl"], x["mode"], x["median_us"], x["iqr_us"], x["floor_us"],
                            x["pct_floor"], x.get("launches")) for x in r["rows"]]), ""]
    # Attention and the GEMVs: one table each, a shape's rows (every implementation, one process) from the newest run
    # that measured that shape; the runs are listed under the table.
    def read(r):
        return f"; read {r['read_gbps']:.0f} GB/s"

    out += _merged_tables(
        recs, "bench-attention",
        lambda r: {((tuple(r["heads"]), r["head_dim"], r["dtype"]), b_, c_): rows
                   for (b_, c_), rows in _group(r["rows"], lambda x: (x["B"], x["ctx"])).items()},
        heading="Decode attention (`benchmarks/bench_attention.py`)",
        preamble=lambda i: (f"GQA {i[0][0]}/{i[0][1]} × {i[1]}, {i[2]}, graph-replayed; floor = K and V bytes ÷ the "
                            "run's measured read bandwidth. Each shape's rows come from the newest run that measured "
                            "it, all its implementations side by side in that run."),
        header=["batch", "context", "impl", "median µs", "IQR µs", "floor µs", "% of floor"],
        row=lambda x: (x["B"], x["ctx"], x["impl"], x["median_us"], x["iqr_us"], x["floor_us"], x["pct_floor"]),
        extra=read)
    out += _merged_tables(
        recs, "bench-linear",
        lambda r: {((r["model"], r["dtype"]), T, op): rows
                   for (op, T), rows in _group(r["rows"], lambda x: (x["op"], x["T"])).items()},
        heading="Decode GEMVs: dense projections and lm_head (`benchmarks/bench_linear.py`)",
        preamble=lambda i: (f"{i[0]}, {i[1]}, graph-replayed, weights rotated past the L2; floor = bytes ÷ the run's "
                            "measured read bandwidth. Each (op, T)'s rows come from the newest run that measured it."),
        header=["op", "T", "N", "K", "impl", "median µs", "IQR µs", "floor µs", "% of floor", "× moelab"],
        row=lambda x: (x["op"], x["T"], x["N"], x["K"], x["impl"], x["median_us"], x["iqr_us"], x["floor_us"],
                       x["pct_floor"], x.get("moelab_x")),
        order=lambda c, first: (c[1], first[c]), extra=read)
    out += _merged_tables(  # the shipped kernels only (not bench_gdn's block-width variants), graph-replayed
        recs, "bench-gdn",
        lambda r: {(r["model"], tp, B, op): [x for x in rows if x["mode"] == "graph" and " " not in x["impl"]]
                   for (tp, B, op), rows in _group(r["rows"], lambda x: (x["tp"], x["B"], x["op"])).items()},
        heading="Gated DeltaNet decode kernels (`benchmarks/bench_gdn.py`)",
        preamble=lambda i: (f"{i}, one rank's shard at each tp, bf16 (the recurrence's state fp32), graph-replayed, "
                            "inputs rotated past the L2; floor = bytes ÷ the run's measured read bandwidth. eager = "
                            "the plain-torch references (`moelab.ops.gdn`)."),
        header=["tp", "batch", "op", "impl", "median µs", "IQR µs", "floor µs", "% of floor"],
        row=lambda x: (x["tp"], x["B"], x["op"], x["impl"], x["median_us"], x["iqr_us"], x["floor_us"], x["pct_floor"]),
        order=lambda c, first: (c[1], c[2], first[c]), extra=read)
    profiles = [(n, dict(r, kind="profile")) for n, r in recs if str(r.get("kind", "")).startswith("profile-")]
    for name, r in _newest(profiles, "profile", key=lambda r: (r.get("model"), r.get("tp"), r.get("batch"))):
        pc = r["per_ctx"][0]
        impls = r["impls"]
        out.append(f"### Where a decode step goes (`moelab profile {r['model']} --batch {r['batch']} --ctx {pc['ctx']}"
                   f"{' --tp ' + str(r['tp']) if r['tp'] > 1 else ''}`)\n\nPer op, graph-replayed µs per call × calls per "
                   f"step; floor at {r['read_gbps']:.0f} GB/s — {_env_line(r['env'])} — `{name}`\n")
        rows = []
        for op in pc["ops"]:
            row = [op["name"], op["count"], op["floor_us"]]
            for i in impls:  # graph-replayed; host-launched (marked) where the op cannot be captured
                m_ = op["impls"].get(i) or {}
                g, h = (m_.get("graph") or {}).get("us"), (m_.get("host") or {}).get("us")
                row.append(None if op["estimated"] else g if g is not None else (f"{fmt(h)} (host)" if h else None))
            m = ((op["impls"].get("moelab") or {}).get("graph") or {}).get("us") if "moelab" in impls else None
            row += [100 * op["floor_us"] / m if m else None, (op["impls"].get("moelab") or {}).get("launches")]
            rows.append(row)
        out += [_md_table(["op", "per step", "floor µs"] + [f"{i} µs" for i in impls] + ["moelab % of floor",
                          "moelab launches"], rows), ""]
        st = (r.get("step") or {}).get("impls", {})
        srows = [(i, pc["breakdown"][i]["total_us"] / 1e3, (st.get(i) or {}).get("graph_us") and st[i]["graph_us"] / 1e3,
                  (st.get(i) or {}).get("host_us") and st[i]["host_us"] / 1e3, (st.get(i) or {}).get("launches"),
                  pc["step_floor_us"] / 1e3) for i in impls]
        out += [_md_table(["impl", "Σ per op ms", "chained step, graph ms", "chained step, host ms", "launches",
                           "step floor ms"], srows), ""]
    # End to end: each (batch, implementation) from the newest run that measured it. The baselines (transformers eager
    # and compiled, moelab's eager reference) run ~0.05-0.2 s a token and are not re-run with every change of moelab's
    # kernels, so their rows may come from another run than moelab's: the `run` column says which.
    decode = dict(
        cells=lambda r: {((r["model"], r["prompt_len"], r["new_tokens"]), x["batch"], x["row"]): [x] for x in r["rows"]},
        preamble=lambda i: (f"{i[0]}, random bf16 weights, prompt {i[1]}, up to {i[2]} new tokens (the eager rows time "
                            "fewer: they run ~100 ms a token). Each row comes from the newest run that measured it; "
                            "rows of different runs were measured in different processes."),
        header=["batch", "implementation", "tokens timed", "ms per step", "tokens/s", "% of floor", "spread %",
                "prefill logits rel err vs transformers"],
        row=lambda x: (x["batch"], x["row"], x.get("new_tokens"), x.get("decode_ms_per_token"), x.get("tokens_per_s"),
                       x.get("pct_of_floor"), x.get("decode_spread_pct"), x.get("prefill_logits_rel_err_vs_hf")),
        order=lambda c, first: (c[1], first[c]))
    out += _merged_tables(recs, "bench-decode", heading="End-to-end decode (`benchmarks/bench_decode.py`)", **decode)
    for name, r in _newest(recs, "verify-moe"):
        out.append(f"### `moelab verify` on the second worklog's MoE problems\n\n{_env_line(r['env'])} — `{name}`\n")
        keys = list(r["rows"][0].keys()) if r["rows"] else []
        out += [_md_table(keys, [[x.get(k) for k in keys] for x in r["rows"]]), ""]
    # Runs on an H100 (sessions when no H200 came) live in results_dir/h100/ and never enter the tables above; their
    # MoE layer (`bench moe`) and end-to-end decode get tables of their own, floors against the H100's measured ceilings.
    h100 = load(Path(results_dir) / "h100")
    if any(r.get("kind") in ("bench-decode", "bench-moe") and shipped(r) for _, r in h100):
        out.append("### On an H100 (`benchmarks/results/h100/`)\n\nRecords from sessions in which only H100s came. "
                   "Their code is newer than some of the H200 records above; the floors are the H100's, from "
                   "bandwidth measured on it.\n")
        out += moe_tables(h100, "One MoE layer on an H100, routing included (`moelab bench moe`)")
        out += _merged_tables(h100, "bench-decode", heading="End-to-end decode on an H100 (`benchmarks/bench_decode.py`)",
                              **decode)
    return "\n".join(out).strip() + "\n"


def update_readme(readme: str = "README.md", results_dir: str = "benchmarks/results") -> bool:
    """Replace the README's block between the results markers; True if the file changed."""
    from pathlib import Path

    p = Path(readme)
    text = p.read_text()
    if README_BEGIN not in text or README_END not in text:
        raise ValueError(f"{readme} has no {README_BEGIN} … {README_END} block")
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    new = f"{head}{README_BEGIN}\n{results_markdown(results_dir)}{README_END}{tail}"
    if new != text:
        p.write_text(new)
    return new != text
