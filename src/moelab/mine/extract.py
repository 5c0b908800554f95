"""Pull the candidate's source out of a model's answer.

Models answer in Markdown: prose, maybe a reasoning section, and one or more fenced code blocks. The
candidate is the fenced Python block that defines `class ModelNew` (the last such one: models often show
a draft first and the final version after). Reasoning sections (`<think>…</think>`, as Qwen3 and
DeepSeek-R1 emit through vLLM and ollama) are dropped first, so a draft inside them is never picked.
An answer cut off inside its last fence (max_tokens reached) still yields that block; `moelab verify`
then says whether it compiles.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_THINK = re.compile(r"<think>.*?(</think>|\Z)", re.DOTALL | re.IGNORECASE)
# An opening fence: three or more backticks or tildes, an optional info string, then the body.
_FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)\n", re.MULTILINE)
_DEFINES_MODELNEW = re.compile(r"^\s*class\s+ModelNew\b", re.MULTILINE)
_PY_INFO = {"", "python", "py", "python3", "triton"}


@dataclass
class Extraction:
    """The code found (or None) and why: `code` is set when `reason` is "ok"; otherwise the reason is
    `empty_answer` (nothing but whitespace or reasoning) or `no_code` (prose without a Python block)."""

    code: str | None
    reason: str
    blocks: int  # fenced blocks seen
    note: str = ""


def _blocks(text: str) -> list[tuple[str, str, bool]]:
    """(info string, body, closed) for each fenced block, in order."""
    out = []
    pos = 0
    while m := _FENCE_OPEN.search(text, pos):
        fence, info = m["fence"], m["info"].strip().lower()
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        c = close.search(text, m.end())
        if c is None:
            out.append((info, text[m.end():], False))
            break
        out.append((info, text[m.end():c.start()], True))
        pos = c.end()
    return out


def extract_code(answer: str) -> Extraction:
    """The candidate source in `answer` (see the module docstring for the rules)."""
    text = _THINK.sub("", answer or "")
    if not text.strip():
        return Extraction(None, "empty_answer", 0)
    blocks = _blocks(text)
    python = [(b, closed) for info, b, closed in blocks if (info.split() or [""])[0] in _PY_INFO]
    with_model = [(b, closed) for b, closed in python if _DEFINES_MODELNEW.search(b)]
    if with_model:
        body, closed = with_model[-1]
        note = "" if closed else "the code block is not closed (answer cut off?)"
        return Extraction(body.rstrip() + "\n", "ok", len(blocks), note)
    if not blocks and _DEFINES_MODELNEW.search(text) and _parses(text):
        return Extraction(text.strip() + "\n", "ok", 0, "unfenced answer taken whole")
    if python:
        # Code without ModelNew: hand the largest block to verify, which names the problem (no_modelnew).
        body = max((b for b, _ in python), key=len)
        return Extraction(body.rstrip() + "\n", "ok", len(blocks), "no block defines ModelNew")
    return Extraction(None, "no_code", len(blocks))


def _parses(src: str) -> bool:
    try:
        ast.parse(src)
    except SyntaxError:
        return False
    return True
