"""The prompt of one attempt: the problem, the machine, the target, and what earlier attempts taught.

What goes in, and why:
  * the problem's reference source (KernelBench format), verbatim — the model must match it exactly;
  * the GPU's ceilings (read bandwidth, matmul rate, SMs, L2, warp size) — so it can reason about the
    roofline instead of guessing, and never assume a warp of 32;
  * the problem's floor when known (from the harness's verdicts) — the target, and a warning that a time
    below it is rejected as impossible;
  * the rules the judge enforces (they are public: knowing them saves attempts, and a model told that
    aliasing, caching or precision downgrades are caught has less reason to try them);
  * feedback: the most recent earlier attempts on this problem with their failure reasons (compile
    errors verbatim, trimmed), and the best verified time so far with its speed-ups.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

FEEDBACK_ATTEMPTS = 4  # earlier attempts quoted in full; more only dilutes the prompt
REASON_CHARS = 1500  # a compile error's traceback tail is what matters; keep the prompt bounded

SYSTEM = (
    "You are an expert GPU kernel engineer. You write correct, fast Triton kernels for PyTorch "
    "modules. You answer with exactly one complete Python file in a single ```python fenced block."
)

RULES = """\
Rules (an automated judge enforces every one; breaking one fails the attempt):
- Define `class ModelNew(torch.nn.Module)` with the same constructor arguments as `Model` and the same
  forward signature; parameters with the same names and shapes as `Model`'s (weights are copied over).
- Do the work in Triton kernels (`import triton`, `import triton.language as tl`). Torch may allocate,
  reshape and launch; it must not compute the answer (no torch.matmul/F.linear/softmax fallbacks, no
  calling `Model`, no imports from moelab, no try/except fallback paths).
- Keep the task's precision: no fp16/bf16/tf32 shortcuts in an fp32 task (use
  `tl.dot(..., input_precision="ieee")` for fp32 dots).
- Return a fresh output tensor every call: no aliasing inputs, no in-place changes to inputs, no results
  cached across calls, no extra CUDA streams or threads, no changes to torch or to timers.
- The output is checked against a float64 oracle on fresh random inputs (several distributions, and a
  shape other than the timed one): handle any size, with masks on the boundaries.
- Do not assume a warp of 32 threads or a particular GPU; use the numbers above.
- A time below the roofline floor is rejected as physically impossible."""


def _ceilings_text(ceilings: Any) -> str:
    if ceilings is None:
        return "GPU: not known (no GPU on the machine that builds this prompt)."
    parts = [f"GPU: {ceilings.name} ({ceilings.source})",
             f"  memory read bandwidth {ceilings.read_gbps:,.0f} GB/s",
             f"  dense bf16 matmul {ceilings.bf16_tflops:,.0f} TFLOP/s, fp16 {ceilings.fp16_tflops:,.0f} TFLOP/s"]
    for label, value, unit in (("SMs", ceilings.sm_count, ""), ("L2", ceilings.l2_bytes, " bytes"),
                               ("warp size", ceilings.warp_size, ""), ("memory", ceilings.memory_gb, " GB"),
                               ("Triton launch from Python", ceilings.launch_triton_us, " us")):
        if value is not None:
            parts.append(f"  {label} {value:,}{unit}" if isinstance(value, int) else f"  {label} {value:g}{unit}")
    return "\n".join(parts)


def _fmt_time(us: float | None) -> str:
    return "—" if us is None else f"{us:,.1f} us"


def _fmt_x(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}x"


def _feedback_text(history: Sequence[dict[str, Any]]) -> str:
    if not history:
        return "Earlier attempts: none yet. This is the first."
    lines = [f"Earlier attempts on this problem: {len(history)} "
             f"({sum(1 for h in history if h.get('passed'))} passed)."]
    best = best_record(history)
    if best is not None:
        t = best.get("times") or {}
        lines.append(f"Best verified so far (attempt {best['round']}): {_fmt_time(t.get('candidate_us'))}, "
                     f"{_fmt_x(t.get('speedup_vs_eager'))} vs eager, {_fmt_x(t.get('speedup_vs_compile'))} vs "
                     f"torch.compile. Beat it.")
    for h in sorted(history, key=lambda r: r["round"])[-FEEDBACK_ATTEMPTS:]:
        head = f"- attempt {h['round']}: "
        if h.get("passed"):
            t = h.get("times") or {}
            lines.append(head + f"PASSED, {_fmt_time(t.get('candidate_us'))} "
                         f"({_fmt_x(t.get('speedup_vs_compile'))} vs torch.compile)")
            continue
        reasons = h.get("reasons") or []
        if not reasons:
            lines.append(head + "FAILED")
        for r in reasons:
            msg = str(r.get("message", "")).strip()
            if len(msg) > REASON_CHARS:
                msg = "…" + msg[-REASON_CHARS:]
            lines.append(head + f"FAILED [{r.get('code')}] {msg}")
            head = "  also: "
    return "\n".join(lines)


def best_record(records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The best passed attempt: highest speed-up vs torch.compile, then vs eager, then lowest time,
    then earliest. A pass without timings ranks below any timed pass."""
    passed = [r for r in records if r.get("passed")]
    if not passed:
        return None

    def key(r: dict[str, Any]) -> tuple:
        t = r.get("times") or {}
        sc, se, us = t.get("speedup_vs_compile"), t.get("speedup_vs_eager"), t.get("candidate_us")
        return (sc is not None, sc or 0.0, se or 0.0, -(us if us is not None else float("inf")), -r["round"])

    return max(passed, key=key)


def build_messages(problem: str, reference_source: str, *, round_no: int, rounds: int, ceilings: Any = None,
                   floor_us: float | None = None, precision: str | None = None,
                   history: Sequence[dict[str, Any]] = (),
                   helpers: Sequence[tuple[str, str]] = ()) -> list[dict[str, str]]:
    """Chat messages for attempt `round_no` (1-based) of `rounds` on `problem`.

    `ceilings` is a `moelab.hardware.Ceilings` or None; `history` holds the earlier log records of this
    problem (dicts with round, passed, reasons, times); `helpers` the (module, source) of local modules
    the reference imports, quoted after it.
    """
    helper_text = "\n\n".join(f"Module `{m}`, imported by the reference:\n```python\n{src.rstrip()}\n```"
                                for m, src in helpers)
    floor = (f"Roofline floor for this problem on this GPU: {floor_us:,.2f} us (the time if every byte "
             f"moved at full bandwidth / every FLOP at the peak rate)." if floor_us is not None
             else "Roofline floor: not yet measured for this problem.")
    user = "\n\n".join([
        f"Problem: {problem} (attempt {round_no} of {rounds})",
        "Write `ModelNew`, a faster drop-in replacement for `Model` below, using Triton kernels.",
        f"Reference (`Model`, `get_inputs()`, `get_init_inputs()`):\n```python\n{reference_source.rstrip()}\n```"
        + (f"\n\n{helper_text}" if helper_text else ""),
        f"Task precision: {precision or 'fp32'} (inputs, weights and outputs in this dtype; accuracy is judged at it).",
        _ceilings_text(ceilings) + "\n" + floor,
        RULES,
        _feedback_text(history),
        "Answer with the complete file (imports, kernels, ModelNew) in one ```python block.",
    ])
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def prompt_hash(messages: list[dict[str, str]]) -> str:
    """sha256 of the messages as canonical JSON: equal prompts, equal hashes."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
