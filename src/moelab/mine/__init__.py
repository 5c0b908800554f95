"""`moelab mine`: an LLM writes kernels, `moelab verify` judges them, and nothing is lost.

    client.py    OpenAI-compatible chat-completions client (httpx; timeouts, retries, Retry-After)
    prompt.py    the prompt: reference source, ceilings, floor, rules, feedback of earlier attempts
    extract.py   the candidate's code out of a Markdown answer
    problems.py  which problems, and their reference sources
    log.py       the append-only JSONL log (one durable line per attempt) and resume
    loop.py      the scheduler: concurrent requests, one verify at a time, budget
    report.py    `--report`: best kernels, failures by reason, the speed-up PNG

Failure codes an attempt can carry besides verify's own: `timeout`, `http_error`, `connection_error`,
`malformed_answer` (the endpoint), `empty_answer`, `no_code` (the answer), `verify_error` (the
harness raised instead of giving a verdict).
"""

from moelab.mine.client import ChatClient, ChatError, ChatResult, normalize_endpoint
from moelab.mine.extract import Extraction, extract_code
from moelab.mine.log import LOG_NAME, AttemptLog, read_log
from moelab.mine.loop import MineConfig, Miner, RunSummary, problem_stats
from moelab.mine.problems import Problem, resolve_problems
from moelab.mine.prompt import best_record, build_messages, prompt_hash
from moelab.mine.report import summarize, write_report

__all__ = [
    "AttemptLog", "ChatClient", "ChatError", "ChatResult", "Extraction", "LOG_NAME", "MineConfig", "Miner",
    "Problem", "RunSummary", "best_record", "build_messages", "extract_code", "normalize_endpoint",
    "problem_stats", "prompt_hash", "read_log", "resolve_problems", "summarize", "write_report",
]
