"""The mining run's record: an append-only JSONL log, one line per finished attempt, in `--out`.

Durability: each line is written with one `os.write` on an `O_APPEND` descriptor, then `fsync`, so a run
killed at any instant leaves whole lines plus at most one torn tail. Reading skips a torn tail (no
newline, or not JSON); opening for append first cuts it off so the next line starts clean. An attempt
is finished exactly when its line exists; its identity is (problem, round).

Secrets: the log is given the strings that must never reach disk (the API key) and replaces any
occurrence with `***` before writing — a server that echoes the Authorization header in an error body
cannot leak it into the log.

A lock file (`flock`) keeps two `moelab mine` processes from writing one directory at once; the OS
drops the lock when its holder dies, so a killed run never blocks its own `--resume`.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from moelab.errors import UserError

LOG_NAME = "attempts.jsonl"
LOCK_NAME = ".mine.lock"
SCHEMA = 1


def read_log(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The complete records of a log, in order. A torn last line is skipped; a missing file is empty."""
    return list(_records(Path(path)))


def _records(path: Path) -> Iterator[dict[str, Any]]:
    if not path.exists():
        return
    data = path.read_bytes()
    for raw in data.split(b"\n")[:-1]:  # the part after the last newline is a torn tail, never a record
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError:
            continue  # a torn line later overwritten can only sit at the end; skip rather than die
        if isinstance(rec, dict) and "problem" in rec and "round" in rec:
            yield rec


class AttemptLog:
    """Append-only writer for `DIR/attempts.jsonl` (see the module docstring).

    `AttemptLog(out_dir, resume=False)` refuses a directory that already holds attempts (pass
    `resume=True` to continue it). Use as a context manager, or call `close()`.
    """

    def __init__(self, out_dir: str | os.PathLike, *, resume: bool, secrets: Iterable[str] = ()) -> None:
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / LOG_NAME
        self.secrets = [s for s in secrets if s]
        self._lock_fd = os.open(self.dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise UserError(f"another `moelab mine` is writing {self.dir} (lock {LOCK_NAME} is held)") from None
        self.records = read_log(self.path)
        if self.records and not resume:
            os.close(self._lock_fd)
            raise UserError(f"{self.dir} already holds {len(self.records)} attempts; pass --resume to continue "
                            "that run, or choose another --out")
        self.torn_bytes = self._cut_torn_tail()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _cut_torn_tail(self) -> int:
        """Truncate anything after the last newline (a line cut by a kill). Returns the bytes removed."""
        if not self.path.exists():
            return 0
        size = self.path.stat().st_size
        if size == 0:
            return 0
        with open(self.path, "rb+") as f:
            # Scan back from the end for the last newline; lines are at most a few hundred kB.
            pos, tail = size, b""
            while pos > 0:
                step = min(65536, pos)
                pos -= step
                f.seek(pos)
                tail = f.read(step) + tail
                if b"\n" in tail:
                    break
            keep = pos + tail.rfind(b"\n") + 1 if b"\n" in tail else 0
            if keep < size:
                f.truncate(keep)
                f.flush()
                os.fsync(f.fileno())
            return size - keep

    def finished(self) -> set[tuple[str, int]]:
        """(problem, round) of every attempt already in the log."""
        return {(r["problem"], int(r["round"])) for r in self.records}

    def append(self, record: dict[str, Any]) -> None:
        """Write one record as one line, durably (single write, then fsync)."""
        record = {"schema": SCHEMA, **record}
        line = json.dumps(record, ensure_ascii=False, default=str)
        for s in self.secrets:
            line = line.replace(s, "***")
        data = (line.replace("\n", "\\n") + "\n").encode()  # json.dumps never emits a raw newline; belt and braces
        n = os.write(self._fd, data)
        while n < len(data):  # a short write (signal, full disk) is finished, never left torn on purpose
            n += os.write(self._fd, data[n:])
        os.fsync(self._fd)
        self.records.append(record)

    def close(self) -> None:
        for fd in (self._fd, self._lock_fd):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> AttemptLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_file_durably(path: Path, text: str, secrets: Iterable[str] = ()) -> None:
    """Write `text` to `path` via a temporary file and rename, so a kill leaves the old file or the new."""
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
