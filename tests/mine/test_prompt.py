"""The prompt: reference source, ceilings, floor, rules, feedback; and problem resolution."""

from pathlib import Path

import pytest

from moelab import hardware
from moelab.errors import UserError
from moelab.mine.problems import resolve_problems
from moelab.mine.prompt import REASON_CHARS, build_messages, prompt_hash

PROBLEM_FILE = Path(__file__).parent / "problems" / "scale_add.py"


def test_prompt_carries_source_ceilings_floor_and_rules():
    (p,) = resolve_problems(str(PROBLEM_FILE))
    c = hardware.ceilings("h200")
    msgs = build_messages(p.name, p.source, round_no=2, rounds=5, ceilings=c, floor_us=12.5, precision="fp32")
    user = msgs[-1]["content"]
    assert msgs[0]["role"] == "system" and "Problem: scale_add (attempt 2 of 5)" in user
    assert p.source.strip() in user and f"{c.read_gbps:,.0f} GB/s" in user and "12.50 us" in user
    assert "warp size" in user and "input_precision" in user and "fp32" in user
    assert prompt_hash(msgs) == prompt_hash([dict(m) for m in msgs]) != prompt_hash(msgs[:1])


def test_feedback_is_recent_and_bounded():
    long_error = "Traceback ...\n" + "x" * 10_000 + "\nNameError: name 'tl' is not defined"
    history = [{"round": n, "passed": False, "reasons": [{"code": "incorrect", "message": f"err {n}"}]}
               for n in range(1, 8)]
    history.append({"round": 8, "passed": False, "reasons": [{"code": "compile_error", "message": long_error}]})
    user = build_messages("p", "src", round_no=9, rounds=9, history=history)[-1]["content"]
    assert "err 1" not in user and "err 7" in user  # only the most recent attempts are quoted
    assert "NameError: name 'tl' is not defined" in user and len(user) < 6000 + REASON_CHARS
    assert "8 (0 passed)" in user and "not yet measured" in user and "GPU: not known" in user


def test_shipped_problems_by_name():
    from moelab.verify import list_problems
    shipped = list_problems()
    if not shipped:
        pytest.skip("verify ships no problems yet")
    ps = resolve_problems(f"{shipped[0]},{PROBLEM_FILE},{shipped[0]}")
    assert [p.name for p in ps] == [shipped[0], "scale_add"] and "class Model" in ps[0].source
    assert [p.name for p in resolve_problems("all")] == shipped
    # A shipped problem whose Model lives in a shared module: the prompt quotes that module too.
    moe = [p for p in resolve_problems("all") if "import" in p.source and p.helpers]
    if moe:
        p = moe[0]
        user = build_messages(p.name, p.source, round_no=1, rounds=1, helpers=p.helpers)[-1]["content"]
        assert all(src.strip() in user for _, src in p.helpers)


def test_problem_paths_and_mistakes(tmp_path):
    with pytest.raises(UserError, match="unknown problem"):
        resolve_problems("no_such_problem")
    with pytest.raises(UserError, match="does not exist"):
        resolve_problems(str(tmp_path / "missing.py"))
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\n")
    with pytest.raises(UserError, match="lacks"):
        resolve_problems(str(bad))
    other = tmp_path / "sub" / "scale_add.py"
    other.parent.mkdir()
    other.write_text(PROBLEM_FILE.read_text())
    with pytest.raises(UserError, match="both named"):
        resolve_problems(f"{PROBLEM_FILE},{other}")
