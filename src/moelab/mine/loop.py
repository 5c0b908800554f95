"""The mining loop: ask the model for a kernel, judge it with `verify`, record it, repeat.

Scheduling. The attempts are every (problem, round) for rounds 1..R, in round-major order (round 1 of
every problem, then round 2, ...) so that all problems advance together and a budget cut leaves each
with a fair share. `concurrency` workers take attempts in that order; an attempt's prompt carries the
feedback of every attempt on its problem finished when the prompt is built (with one problem and C > 1,
C rounds run on the same feedback: concurrency buys throughput with staleness).

Requests to the model overlap; verification does not: one `verify` at a time, because candidates share
the GPU and a timing taken while another candidate runs is not a measurement.

Resume. Finished attempts are those in the log; they are skipped, and their records feed the prompts.
The budget (`budget_s`) stops new attempts from starting; attempts in flight finish and are recorded.
An attempt that failed because of the network is finished like any other (its reason says why); a
fatal HTTP status (401/403/404: wrong key, URL or model) stops the run without recording the attempt,
so `--resume` after fixing the flag redoes it.
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from moelab.errors import UserError
from moelab.mine.client import ChatClient, ChatError, redact_url
from moelab.mine.extract import extract_code
from moelab.mine.log import AttemptLog, write_file_durably
from moelab.mine.problems import Problem
from moelab.mine.prompt import best_record, build_messages, prompt_hash


class Verifier(Protocol):
    """`moelab.verify.verify`'s signature: returns an object with passed, reasons, times, to_dict()."""

    def __call__(self, candidate: str | Path, problem: str | Path, *, precision: str | None = None,
                 trials: int = 5, timeout_s: float = 300.0, time_it: bool = True,
                 seed: int | None = None) -> Any: ...


@dataclass
class MineConfig:
    rounds: int = 5
    concurrency: int = 1
    budget_s: float | None = None
    trials: int = 5
    verify_timeout_s: float = 300.0
    time_it: bool = True
    precision: str | None = None
    ceilings: Any = None  # moelab.hardware.Ceilings or None

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise UserError(f"--rounds must be at least 1 (got {self.rounds})")
        if self.concurrency < 1:
            raise UserError(f"--concurrency must be at least 1 (got {self.concurrency})")
        if self.budget_s is not None and self.budget_s <= 0:
            raise UserError("--budget-minutes must be positive")
        if self.trials < 1:
            raise UserError(f"--trials must be at least 1 (got {self.trials})")


@dataclass
class RunSummary:
    planned: int  # attempts this invocation had left to do
    skipped: int  # attempts found finished in the log
    done: int = 0  # attempts recorded by this invocation
    stopped: str = "finished"  # "finished" | "budget" | "fatal"
    fatal_message: str | None = None
    records: list[dict[str, Any]] = field(default_factory=list)  # the whole log after the run

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("planned", "skipped", "done", "stopped", "fatal_message")}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def _verdict_fields(v: Any) -> tuple[bool, list[dict[str, str]], dict[str, Any] | None, dict[str, Any]]:
    """passed, reasons, times, full verdict dict — read from the verdict object, trusting only its fields."""
    reasons = [{"code": str(r.code), "message": str(r.message)} for r in (v.reasons or [])]
    passed = bool(v.passed)
    times = dict(v.times) if v.times else None
    return passed, reasons, times, v.to_dict()


class Miner:
    """One mining run over `problems` (see the module docstring). `on_start(problem, round)` and
    `on_record(record)` are called from worker threads for a live display."""

    def __init__(self, problems: list[Problem], client: ChatClient, verifier: Verifier, log: AttemptLog,
                 config: MineConfig, *, on_start: Callable[[str, int], None] | None = None,
                 on_record: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.problems, self.client, self.verifier, self.log, self.config = problems, client, verifier, log, config
        self.on_start, self.on_record = on_start, on_record
        self._lock = threading.Lock()  # guards the log, the queue and the history
        self._verify_lock = threading.Lock()
        self._stop = threading.Event()
        self._closed = False  # set by stop(): no line may be written after the log is closed
        self._fatal: str | None = None

    def stop(self) -> None:
        """Stop now (Ctrl-C): no new attempt starts and no further line is written. Attempts in flight
        are abandoned unrecorded, so `--resume` redoes them. Returns once no append is under way."""
        self._stop.set()
        with self._lock:
            self._closed = True

    def plan(self) -> tuple[list[tuple[Problem, int]], int]:
        """Attempts still to do (round-major) and the number already finished."""
        finished = self.log.finished()
        todo = [(p, r) for r in range(1, self.config.rounds + 1) for p in self.problems
                if (p.name, r) not in finished]
        skipped = sum(1 for p in self.problems for r in range(1, self.config.rounds + 1) if (p.name, r) in finished)
        return todo, skipped

    def run(self) -> RunSummary:
        """Do every attempt not yet in the log, with `concurrency` workers. Returns a RunSummary."""
        todo, skipped = self.plan()
        summary = RunSummary(planned=len(todo), skipped=skipped)
        deadline = None if self.config.budget_s is None else time.monotonic() + self.config.budget_s
        queue = list(reversed(todo))

        crashed: list[BaseException] = []

        def worker() -> None:
            try:
                work()
            except BaseException as e:  # a bug here (or a full disk) must surface, not end a thread quietly
                crashed.append(e)
                self._stop.set()

        def work() -> None:
            while not self._stop.is_set():
                with self._lock:
                    if deadline is not None and time.monotonic() >= deadline:
                        summary.stopped = "budget"
                        return
                    if not queue:
                        return
                    problem, round_no = queue.pop()
                record = self._attempt(problem, round_no)
                if record is None:  # fatal: nothing recorded
                    return
                with self._lock:
                    if self._closed:
                        return
                    self.log.append(record)
                    summary.done += 1
                if self.on_record:
                    self.on_record(record)

        # Daemon threads: Ctrl-C ends the run at once; the log is whole lines, so --resume picks it up.
        threads = [threading.Thread(target=worker, daemon=True, name=f"mine-{i}")
                   for i in range(min(self.config.concurrency, max(1, len(todo))))]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(timeout=0.2)
        if crashed:
            raise crashed[0]
        if self._fatal is not None:
            summary.stopped, summary.fatal_message = "fatal", self._fatal
        summary.records = list(self.log.records)
        return summary

    def _history(self, problem: Problem) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.log.records if r["problem"] == problem.name]

    def _attempt(self, problem: Problem, round_no: int) -> dict[str, Any] | None:
        if self.on_start:
            self.on_start(problem.name, round_no)
        t0 = time.monotonic()
        started = _now()
        history = self._history(problem)
        floors = [(h.get("times") or {}).get("floor_us") for h in history]
        floor_us = next((f for f in reversed(floors) if f is not None), None)
        messages = build_messages(problem.name, problem.source, round_no=round_no, rounds=self.config.rounds,
                                  ceilings=self.config.ceilings, floor_us=floor_us,
                                  precision=self.config.precision or problem.precision, history=history,
                                  helpers=problem.helpers)
        rec: dict[str, Any] = {
            "problem": problem.name, "round": round_no, "problem_ref": problem.ref,
            "model": self.client.model, "endpoint": redact_url(self.client.base),
            "prompt_sha256": prompt_hash(messages), "prompt_chars": sum(len(m["content"]) for m in messages),
            "tokens": None, "finish_reason": None, "answer": None, "code_path": None, "extraction": None,
            "passed": False, "reasons": [], "times": None, "verdict": None, "error": None,
            "llm_s": None, "verify_s": None, "http_attempts": None, "started_at": started,
        }
        try:
            answer = self.client.chat(messages)
        except ChatError as e:
            if e.fatal:
                self._fatal = f"the endpoint refused the request ({e}); check --endpoint, --model and the API key"
                self._stop.set()
                return None
            rec.update(error={"code": e.code, "message": e.message, "status": e.status},
                       reasons=[{"code": e.code, "message": e.message}], llm_s=round(e.seconds, 3),
                       http_attempts=e.http_attempts)
            return self._finish(rec, t0)
        rec.update(tokens=answer.usage, finish_reason=answer.finish_reason, answer=answer.content,
                   llm_s=round(answer.seconds, 3), http_attempts=answer.http_attempts)
        ex = extract_code(answer.content)
        rec["extraction"] = {"reason": ex.reason, "blocks": ex.blocks, "note": ex.note}
        if ex.code is None:
            msg = {"empty_answer": "the answer is empty",
                   "no_code": "the answer has no Python code block"}[ex.reason]
            if answer.finish_reason == "length":
                msg += " (cut off at max_tokens)"
            rec["reasons"] = [{"code": ex.reason, "message": msg}]
            return self._finish(rec, t0)
        code_path = Path("candidates") / problem.name / f"round_{round_no:03d}.py"
        write_file_durably(self.log.dir / code_path, ex.code, self.log.secrets)
        rec["code_path"] = str(code_path)
        with self._verify_lock:
            tv = time.monotonic()
            try:
                v = self.verifier(self.log.dir / code_path, problem.ref, precision=self.config.precision,
                                  trials=self.config.trials, timeout_s=self.config.verify_timeout_s,
                                  time_it=self.config.time_it)
                passed, reasons, times, verdict = _verdict_fields(v)
            except Exception as e:  # noqa: BLE001 — a harness failure is recorded with its cause, never hidden
                passed, reasons, times, verdict = False, [
                    {"code": "verify_error", "message": f"{type(e).__name__}: {e}"}], None, None
        rec.update(passed=passed, reasons=reasons, times=times, verdict=verdict,
                   verify_s=round(time.monotonic() - tv, 3))
        return self._finish(rec, t0)

    @staticmethod
    def _finish(rec: dict[str, Any], t0: float) -> dict[str, Any]:
        rec["finished_at"] = _now()
        rec["wall_s"] = round(time.monotonic() - t0, 3)
        return rec


def problem_stats(records: list[dict[str, Any]], problem: str) -> dict[str, Any]:
    """attempts, passed, and the best passed record's speed-ups for one problem."""
    mine = [r for r in records if r["problem"] == problem]
    best = best_record(mine)
    t = (best or {}).get("times") or {}
    return {"attempts": len(mine), "passed": sum(1 for r in mine if r.get("passed")),
            "best_round": best["round"] if best else None,
            "best_speedup_vs_compile": t.get("speedup_vs_compile"),
            "best_speedup_vs_eager": t.get("speedup_vs_eager")}
