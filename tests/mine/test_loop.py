"""The mining loop with a scripted model over HTTP and a stand-in judge (the real judge: test_e2e.py)."""

from pathlib import Path

import pytest
from answers import HACK_ALIAS, PROSE, SYNTAX_ERROR, TRITON_OK, TORCH_OK
from fake_llm import MODEL, Reply, ScriptedLLM, fenced
from fake_verify import FakeVerify

from moelab.mine import AttemptLog, ChatClient, MineConfig, Miner, best_record, read_log
from moelab.mine.problems import Problem, resolve_problems

PROBLEM_FILE = Path(__file__).parent / "problems" / "scale_add.py"

# One scripted behaviour per round: the cases the issue names, and two more ways an answer can be empty.
SCRIPT = {
    1: [Reply(content=fenced(TRITON_OK))],  # an honest Triton kernel
    2: [Reply(content=fenced(SYNTAX_ERROR))],  # does not compile
    3: [Reply(content=fenced(HACK_ALIAS, "Blazing fast, in place!"))],  # reward hack: alias + mutation
    4: [Reply(content=PROSE)],  # prose, no code
    5: [Reply(500), Reply(content=fenced(TORCH_OK))],  # HTTP 500, then an honest torch rewrite
    6: [Reply(content=fenced(TORCH_OK), delay_s=4.0)],  # past the client's timeout
    7: [Reply(content="")],  # empty answer
    8: [Reply(raw="upstream overloaded")],  # 200 with a body that is not chat-completions JSON
}


def _client(llm, **kw):
    return ChatClient(llm.url, MODEL, api_key="sk-loop-secret", timeout_s=kw.pop("timeout_s", 1.5),
                      backoff_s=0.01, max_retries=2, **kw)


def _run(tmp_path, llm, verifier, rounds, problems=None, resume=False, **cfg):
    problems = problems or resolve_problems(str(PROBLEM_FILE))
    with _client(llm) as client, AttemptLog(tmp_path, resume=resume, secrets=["sk-loop-secret"]) as log:
        return Miner(problems, client, verifier, log, MineConfig(rounds=rounds, **cfg)).run()


def test_every_outcome_is_recorded_and_the_honest_kernel_is_best(tmp_path):
    verifier = FakeVerify()
    with ScriptedLLM(SCRIPT) as llm:
        summary = _run(tmp_path, llm, verifier, rounds=8, trials=1)
    assert summary.done == 8 and summary.stopped == "finished"
    recs = {r["round"]: r for r in read_log(tmp_path / "attempts.jsonl")}
    codes = {n: [x["code"] for x in r["reasons"]] for n, r in recs.items()}
    assert codes == {1: [], 2: ["compile_error"], 3: ["alias", "mutation"], 4: ["no_code"], 5: [],
                     6: ["timeout"], 7: ["empty_answer"], 8: ["malformed_answer"]}
    assert [n for n, r in recs.items() if r["passed"]] == [1, 5]
    assert recs[5]["http_attempts"] == 2 and recs[6]["error"]["code"] == "timeout"
    # The judge saw exactly the answers with code, each from its own file, with the requested trials.
    assert sorted(Path(c).name for c, _, _ in verifier.calls) == ["round_001.py", "round_002.py", "round_003.py",
                                                                  "round_005.py"]
    assert all(kw["trials"] == 1 for _, _, kw in verifier.calls)
    for n in (1, 2, 3, 5):
        assert (tmp_path / recs[n]["code_path"]).is_file() and recs[n]["verdict"] is not None
    assert recs[4]["code_path"] is None and recs[4]["answer"] == PROSE
    # The hack claimed 1000×; the best is still the honest Triton kernel.
    assert best_record(list(recs.values()))["round"] == 1
    r1 = recs[1]
    assert r1["model"] == MODEL and len(r1["prompt_sha256"]) == 64 and r1["tokens"]["total_tokens"] > 0
    assert r1["wall_s"] >= r1["llm_s"] >= 0 and r1["verify_s"] >= 0
    assert "sk-loop-secret" not in (tmp_path / "attempts.jsonl").read_text()
    assert all(req.auth == "Bearer sk-loop-secret" for req in llm.requests)


def test_prompts_carry_the_feedback_of_earlier_attempts():
    verifier = FakeVerify()
    with ScriptedLLM(SCRIPT) as llm:
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            _run(Path(d), llm, verifier, rounds=4, trials=1)
    prompts = {r.round: r.text for r in llm.requests}
    assert "first" in prompts[1] and "Reference" in prompts[1] and "return 2.0 * x + y" in prompts[1]
    assert "compile_error" in prompts[3] and "SyntaxError" in prompts[3]
    assert "Best verified so far (attempt 1)" in prompts[4] and "1.30x vs torch.compile" in prompts[4]
    assert "[alias]" in prompts[4] and "floor" in prompts[4]


def test_resume_skips_finished_attempts_and_feeds_them_back(tmp_path):
    verifier = FakeVerify()
    with ScriptedLLM(SCRIPT) as llm:
        _run(tmp_path, llm, verifier, rounds=3, trials=1)
        summary = _run(tmp_path, llm, verifier, rounds=5, trials=1, resume=True)
        assert llm.rounds_requested() == [1, 2, 3, 4, 5, 5]  # round 5: the 500, then the answer
    assert summary.skipped == 3 and summary.done == 2
    assert [r["round"] for r in read_log(tmp_path / "attempts.jsonl")] == [1, 2, 3, 4, 5]


def test_fatal_status_stops_the_run_and_records_nothing(tmp_path):
    with ScriptedLLM({1: [Reply(401)], 2: [Reply(content=PROSE)]}) as llm:
        summary = _run(tmp_path, llm, FakeVerify(), rounds=2, trials=1)
    assert summary.stopped == "fatal" and "401" in summary.fatal_message
    assert read_log(tmp_path / "attempts.jsonl") == [] and llm.rounds_requested() == [1]


def test_budget_stops_new_attempts(tmp_path):
    with ScriptedLLM({}, default=Reply(content=PROSE, delay_s=0.4)) as llm:
        summary = _run(tmp_path, llm, FakeVerify(), rounds=10, trials=1, budget_s=0.6)
    assert summary.stopped == "budget" and 1 <= summary.done < 10
    assert len(read_log(tmp_path / "attempts.jsonl")) == summary.done


def test_concurrent_requests_serial_verification(tmp_path):
    src = PROBLEM_FILE.read_text()
    problems = [Problem(f"p{i}", str(PROBLEM_FILE), src) for i in range(3)]
    verifier = FakeVerify(delay_s=0.05)
    with ScriptedLLM({}, default=Reply(content=fenced(TORCH_OK), delay_s=0.1)) as llm:
        summary = _run(tmp_path, llm, verifier, rounds=4, problems=problems, concurrency=4, trials=1)
    keys = [(r["problem"], r["round"]) for r in read_log(tmp_path / "attempts.jsonl")]
    assert summary.done == 12 and sorted(keys) == sorted({(p.name, n) for p in problems for n in range(1, 5)})
    assert verifier.max_active == 1 and len(verifier.calls) == 12


@pytest.mark.parametrize("bad", [dict(rounds=0), dict(concurrency=0), dict(trials=0), dict(budget_s=-1.0)])
def test_config_rejects_bad_values(bad):
    from moelab.errors import UserError
    with pytest.raises(UserError):
        MineConfig(**bad)


def test_an_internal_error_surfaces_instead_of_ending_quietly(tmp_path):
    def broken_verifier(*a, **k):
        raise KeyboardInterrupt  # not an Exception: the loop must not swallow it (verify_error is for Exceptions)

    with ScriptedLLM({}, default=Reply(content=fenced(TORCH_OK))) as llm:
        with pytest.raises(KeyboardInterrupt):
            _run(tmp_path, llm, broken_verifier, rounds=2, trials=1)
    assert read_log(tmp_path / "attempts.jsonl") == []


def test_a_raising_verifier_is_a_recorded_failure(tmp_path):
    def raising_verifier(*a, **k):
        raise RuntimeError("harness bug")

    with ScriptedLLM({}, default=Reply(content=fenced(TORCH_OK))) as llm:
        summary = _run(tmp_path, llm, raising_verifier, rounds=2, trials=1)
    recs = read_log(tmp_path / "attempts.jsonl")
    assert summary.done == 2 and all(r["reasons"] == [{"code": "verify_error", "message": "RuntimeError: harness bug"}]
                                     for r in recs)
