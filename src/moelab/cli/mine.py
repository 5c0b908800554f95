"""`moelab mine`: the kernel-mining loop, and `moelab mine --report DIR`."""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

import typer

from moelab.cli import app
from moelab.errors import UserError

_PRECISIONS = ("fp32", "fp16", "bf16")


def _ceilings(gpu: str | None, console: Any) -> Any:
    """The ceilings the prompt quotes: a datasheet row for --gpu, else this machine's measured ones,
    else none (said on stderr)."""
    from moelab import hardware
    if not hasattr(hardware, "ceilings"):
        console.print("[yellow]note:[/] moelab.hardware.ceilings is not available; the prompt omits GPU ceilings")
        return None
    if gpu:
        return hardware.ceilings(gpu)  # an unknown name is a UserError, as it should be
    try:
        return hardware.ceilings(None)
    except UserError as e:
        console.print(f"[yellow]note:[/] the prompt omits GPU ceilings: {e}")
        return None


def _print_report(summary: dict[str, Any], title: str) -> None:
    from moelab.report import console, table
    table(summary["problems"], ["problem", "attempts", "passed", "best_round", "candidate_us", "speedup_vs_eager",
                                "speedup_vs_compile", "pct_of_floor", "best_kernel"],
          title=title, headers={"best_round": "best", "candidate_us": "time µs", "speedup_vs_eager": "× eager",
                                "speedup_vs_compile": "× compile", "pct_of_floor": "% of floor",
                                "best_kernel": "best verified kernel"})
    rows = [{"source": f["source"], "code": f["code"], "attempts": f["attempts"],
             "problems": ", ".join(f"{p} {n}" for p, n in f["problems"].items())} for f in summary["failures"]]
    if rows:
        table(rows, ["source", "code", "attempts", "problems"], title="Failed attempts by reason",
              caption="verify: caught by the judge (the reward hacks); answer: no usable code; endpoint: the request")
    console.print(f"{summary['attempts']} attempts, {summary['passed']} verified, "
                  f"{summary['tokens']:,} tokens reported by the endpoint")


@app.command()
def mine(
    endpoint: str = typer.Option(None, help="OpenAI-compatible API base, e.g. http://127.0.0.1:8000/v1 "
                                 "(vLLM) or http://127.0.0.1:11434/v1 (ollama); `/v1` is added when the URL has no path."),
    model: str = typer.Option(None, help="Model name as the endpoint knows it (e.g. Qwen/Qwen3-Coder-30B-A3B-Instruct)."),
    api_key_env: str = typer.Option(None, help="Environment variable holding the API key (default OPENAI_API_KEY, "
                                    "optional). The key is sent as a bearer token and never written anywhere."),
    problems: str = typer.Option("all", help="Comma-separated problem names (`moelab verify --list`) or "
                                 "KernelBench-format .py files, or `all`."),
    rounds: int = typer.Option(5, help="Attempts per problem."),
    budget_minutes: float = typer.Option(None, help="Start no attempt after this many minutes (in-flight ones finish)."),
    concurrency: int = typer.Option(1, help="Requests to the endpoint in flight at once (verification stays one at a time)."),
    out: Path = typer.Option(Path("moelab-mine"), help="Directory for the log (attempts.jsonl) and the candidates."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out: finished attempts are skipped."),
    timeout_s: float = typer.Option(600.0, help="Seconds one request to the endpoint may take (not retried)."),
    max_retries: int = typer.Option(4, help="Retries of a request answered 429/5xx or not connected, with backoff."),
    verify_timeout_s: float = typer.Option(300.0, help="Seconds `verify` gives one candidate."),
    trials: int = typer.Option(5, help="Correctness trials per candidate (fresh inputs each)."),
    timing: bool = typer.Option(True, "--timing/--no-timing", help="Time verified candidates against eager and "
                                "torch.compile (off: correctness only, no speed-ups)."),
    precision: str = typer.Option(None, help="Task precision passed to verify: fp32, fp16 or bf16 (default: the problem's)."),
    gpu: str = typer.Option(None, help="Quote this GPU's datasheet ceilings in the prompt instead of measured ones."),
    max_tokens: int = typer.Option(None, help="max_tokens sent with each request (default: the server's)."),
    temperature: float = typer.Option(None, help="Sampling temperature sent with each request (default: the server's)."),
    report: Path = typer.Option(None, "--report", help="Summarize the run in this directory (report.json, report.png) "
                                "instead of mining."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Ask an LLM for Triton kernels, judge each with `moelab verify`, and keep everything.

    Each attempt builds a prompt from the problem's reference source, the GPU's ceilings and floor, \
and the verdicts of earlier attempts on that problem; extracts the ModelNew code from the answer; \
verifies it in an isolated process; and appends one line to OUT/attempts.jsonl (the answer, the \
code's file, the full verdict, tokens, timings). A run killed at any point continues with --resume, \
repeating no finished attempt. `--report OUT` shows the best verified kernel per problem and how many \
attempts failed for which reason.
    """
    from rich.console import Console

    err = Console(stderr=True)
    if report is not None:
        from moelab.mine.report import write_report
        summary = write_report(report)
        if json_out:
            from moelab.report import emit_json
            emit_json(summary)
        else:
            _print_report(summary, f"moelab mine report: {report}")
            err.print(f"wrote {summary['json']} and {summary['png']}")
        return

    if not endpoint or not model:
        raise UserError("--endpoint and --model are required (or --report DIR to summarize a run)")
    if precision is not None and precision not in _PRECISIONS:
        raise UserError(f"--precision must be one of {', '.join(_PRECISIONS)} (got {precision!r})")
    if timeout_s <= 0 or verify_timeout_s <= 0:
        raise UserError("--timeout-s and --verify-timeout-s must be positive")
    if max_retries < 0:
        raise UserError("--max-retries must be 0 or more")
    key_var = api_key_env or "OPENAI_API_KEY"
    api_key = os.environ.get(key_var) or None
    if api_key_env and api_key is None:
        raise UserError(f"--api-key-env {api_key_env}: that environment variable is not set")

    from moelab.mine import AttemptLog, ChatClient, ChatError, MineConfig, Miner, resolve_problems, summarize
    from moelab.mine.client import redact_url
    from moelab.mine.loop import problem_stats
    from moelab.mine.client import normalize_endpoint
    from moelab.verify import verify

    normalize_endpoint(endpoint)  # a malformed URL is reported before any problem is loaded
    probs = resolve_problems(problems)
    config = MineConfig(rounds=rounds, concurrency=concurrency,
                        budget_s=None if budget_minutes is None else budget_minutes * 60.0, trials=trials,
                        verify_timeout_s=verify_timeout_s, time_it=timing, precision=precision)
    client = ChatClient(endpoint, model, api_key=api_key, timeout_s=timeout_s, max_retries=max_retries,
                        max_tokens=max_tokens, temperature=temperature)
    try:
        listed = client.list_models()
    except ChatError as e:
        client.close()
        raise UserError(f"cannot use endpoint {redact_url(client.base)}: {e}") from None
    if listed is not None and model not in listed:
        err.print(f"[yellow]note:[/] {redact_url(client.base)}/models does not list {model!r} "
                  f"(it lists {', '.join(listed[:8]) or 'nothing'})")
    config.ceilings = _ceilings(gpu, err)

    with client, AttemptLog(out, resume=resume, secrets=[api_key] if api_key else []) as log:
        if log.torn_bytes:
            err.print(f"note: dropped a torn last line ({log.torn_bytes} bytes) left by a killed run")
        _record_invocation(log.dir, {
            "endpoint": redact_url(client.base), "model": model, "api_key_env": key_var,
            "problems": [p.name for p in probs], "rounds": rounds, "concurrency": concurrency,
            "budget_minutes": budget_minutes, "trials": trials, "timing": timing, "precision": precision,
            "ceilings": getattr(config.ceilings, "name", None), "resume": resume,
        })
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=err, disable=json_out)
        tasks: dict[str, Any] = {}

        def describe(name: str, note: str) -> str:
            s = problem_stats(log.records, name)
            if s["best_speedup_vs_compile"] is not None:
                best_txt = f"{s['best_speedup_vs_compile']:.3g}× vs compile"
            elif s["best_speedup_vs_eager"] is not None:  # no compile baseline (e.g. on CPU)
                best_txt = f"{s['best_speedup_vs_eager']:.3g}× vs eager"
            else:
                best_txt = "verified, untimed" if s["passed"] else "—"
            return f"{name:<22} {note:<12} passed {s['passed']}/{s['attempts']}  best {best_txt}"

        def on_start(name: str, round_no: int) -> None:
            progress.update(tasks[name], description=describe(name, f"round {round_no}…"))

        def on_record(rec: dict[str, Any]) -> None:
            name = rec["problem"]
            note = "passed" if rec["passed"] else ",".join(r["code"] for r in rec["reasons"])[:12]
            progress.update(tasks[name], advance=1, description=describe(name, note))

        miner = Miner(probs, client, verify, log, config, on_start=on_start, on_record=on_record)
        done_before = log.finished()
        with progress:
            for p in probs:
                done = sum(1 for r in range(1, rounds + 1) if (p.name, r) in done_before)
                tasks[p.name] = progress.add_task(describe(p.name, "waiting"), total=rounds, completed=done)
            try:
                summary = miner.run()
            except KeyboardInterrupt:
                miner.stop()
                err.print(f"interrupted; {len(log.records)} attempts are in {log.path}; continue with --resume")
                raise typer.Exit(130) from None

    names = {p.name for p in probs}
    rep = summarize([r for r in summary.records if r["problem"] in names])
    if json_out:
        from moelab.report import emit_json
        emit_json({"run": summary.to_dict(), "out": str(out), "report": rep})
    else:
        _print_report(rep, f"moelab mine: {summary.done} new attempts, {summary.skipped} resumed ({out})")
    if summary.stopped == "budget":
        err.print(f"budget of {budget_minutes:g} min reached; continue with --resume")
    if summary.stopped == "fatal":
        raise UserError(summary.fatal_message or "the endpoint refused the request")


def _record_invocation(out: Path, config: dict[str, Any]) -> None:
    """One line per invocation in OUT/runs.jsonl: which flags produced which attempts."""
    line = json.dumps({"started_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                       **config}) + "\n"
    with open(out / "runs.jsonl", "a", encoding="utf-8") as f:
        f.write(line)
