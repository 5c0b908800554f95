"""The append-only log: whole lines, torn tails, resume refusal, the lock, secrets."""

import json

import pytest

from moelab.errors import UserError
from moelab.mine.log import LOG_NAME, AttemptLog, read_log


def test_append_and_read_back(tmp_path):
    with AttemptLog(tmp_path, resume=False) as log:
        log.append({"problem": "p", "round": 1, "answer": "line one\nline two"})
        log.append({"problem": "p", "round": 2})
    text = (tmp_path / LOG_NAME).read_text()
    assert text.count("\n") == 2 and all(json.loads(x) for x in text.splitlines())
    recs = read_log(tmp_path / LOG_NAME)
    assert [(r["problem"], r["round"]) for r in recs] == [("p", 1), ("p", 2)]
    assert recs[0]["answer"] == "line one\nline two"


def test_torn_tail_is_ignored_then_cut(tmp_path):
    with AttemptLog(tmp_path, resume=False) as log:
        log.append({"problem": "p", "round": 1})
    with open(tmp_path / LOG_NAME, "ab") as f:
        f.write(b'{"problem": "p", "round": 2, "answer": "half a li')  # what a kill mid-write leaves
    assert [r["round"] for r in read_log(tmp_path / LOG_NAME)] == [1]
    with AttemptLog(tmp_path, resume=True) as log:
        assert log.torn_bytes > 0 and log.finished() == {("p", 1)}
        log.append({"problem": "p", "round": 2})
    assert [r["round"] for r in read_log(tmp_path / LOG_NAME)] == [1, 2]
    assert all(json.loads(x) for x in (tmp_path / LOG_NAME).read_text().splitlines())


def test_existing_run_needs_resume(tmp_path):
    with AttemptLog(tmp_path, resume=False) as log:
        log.append({"problem": "p", "round": 1})
    with pytest.raises(UserError, match="--resume"):
        AttemptLog(tmp_path, resume=False)


def test_second_writer_is_refused(tmp_path):
    with AttemptLog(tmp_path, resume=False):
        with pytest.raises(UserError, match="another"):
            AttemptLog(tmp_path, resume=True)
    AttemptLog(tmp_path, resume=True).close()  # released on close


def test_secrets_never_reach_the_file(tmp_path):
    with AttemptLog(tmp_path, resume=False, secrets=["sk-SECRET-42"]) as log:
        log.append({"problem": "p", "round": 1, "error": {"message": "HTTP 500 for Bearer sk-SECRET-42"}})
    text = (tmp_path / LOG_NAME).read_text()
    assert "sk-SECRET-42" not in text and "Bearer ***" in text
