"""The chat-completions client against a scripted server on a real loopback socket."""

import socket
import time

import pytest
from fake_llm import MODEL, Reply, ScriptedLLM

from moelab.errors import UserError
from moelab.mine.client import ChatClient, ChatError, normalize_endpoint, redact_url, retry_after_s

MSG = [{"role": "user", "content": "Problem: p (attempt 1 of 1)"}]


@pytest.mark.parametrize("url", ["http://h:8000", "http://h:8000/", "http://h:8000/v1", "http://h:8000/v1/",
                                 "http://h:8000/v1/chat/completions"])
def test_endpoint_with_or_without_v1(url):
    assert normalize_endpoint(url) == "http://h:8000/v1"


def test_endpoint_other_path_kept_and_bad_scheme_refused():
    assert normalize_endpoint("https://gw.example/api/openai/v1beta/") == "https://gw.example/api/openai/v1beta"
    with pytest.raises(UserError, match="not an http"):
        normalize_endpoint("127.0.0.1:8000")
    assert redact_url("http://user:pw@h:1/v1") == "http://h:1/v1"


def test_retry_after_forms():
    assert retry_after_s("3") == 3.0
    assert retry_after_s(None) is None and retry_after_s("soon") is None
    assert 0.0 <= retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a past date: no wait


def test_answer_usage_and_bearer_token():
    with ScriptedLLM({1: [Reply(content="hello")]}) as llm, \
            ChatClient(llm.url.removesuffix("/v1"), MODEL, api_key="sk-test-123") as c:
        r = c.chat(MSG)
        assert c.list_models() == [MODEL]
    assert r.content == "hello" and r.finish_reason == "stop" and r.http_attempts == 1
    assert r.usage["total_tokens"] == r.usage["prompt_tokens"] + r.usage["completion_tokens"] > 0
    assert llm.requests[0].auth == "Bearer sk-test-123"


def test_500_then_success_is_retried():
    with ScriptedLLM({1: [Reply(500), Reply(503), Reply(content="ok")]}) as llm, \
            ChatClient(llm.url, MODEL, backoff_s=0.01) as c:
        r = c.chat(MSG)
    assert r.content == "ok" and r.http_attempts == 3


def test_429_honours_retry_after():
    with ScriptedLLM({1: [Reply(429, headers={"Retry-After": "1"}), Reply(content="ok")]}) as llm, \
            ChatClient(llm.url, MODEL, backoff_s=0.001) as c:
        t0 = time.monotonic()
        r = c.chat(MSG)
        waited = time.monotonic() - t0
    assert r.content == "ok" and r.http_attempts == 2
    assert waited >= 0.9  # the backoff alone would have been ~1 ms


def test_retries_are_bounded():
    with ScriptedLLM({1: [Reply(502)]}) as llm, ChatClient(llm.url, MODEL, backoff_s=0.001, max_retries=2) as c:
        with pytest.raises(ChatError) as e:
            c.chat(MSG)
    assert e.value.code == "http_error" and e.value.status == 502 and e.value.http_attempts == 3
    assert len(llm.requests) == 3 and not e.value.fatal


def test_slow_answer_times_out_without_retry():
    with ScriptedLLM({1: [Reply(content="late", delay_s=3.0)]}) as llm, ChatClient(llm.url, MODEL, timeout_s=0.5) as c:
        t0 = time.monotonic()
        with pytest.raises(ChatError) as e:
            c.chat(MSG)
    assert e.value.code == "timeout" and time.monotonic() - t0 < 2.5 and len(llm.requests) == 1


@pytest.mark.parametrize("reply,code", [
    (Reply(raw="<html>gateway</html>"), "malformed_answer"),
    (Reply(raw='{"choices": []}'), "malformed_answer"),
    (Reply(raw='{"choices": [{"message": {"content": 42}}]}'), "malformed_answer"),
])
def test_malformed_answers(reply, code):
    with ScriptedLLM({1: [reply]}) as llm, ChatClient(llm.url, MODEL) as c:
        with pytest.raises(ChatError) as e:
            c.chat(MSG)
    assert e.value.code == code


def test_wrong_model_or_key_is_fatal():
    with ScriptedLLM({1: [Reply(404)]}) as llm, ChatClient(llm.url, MODEL) as c:
        with pytest.raises(ChatError) as e:
            c.chat(MSG)
    assert e.value.fatal and e.value.status == 404 and len(llm.requests) == 1


def test_nothing_listening_is_connection_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with ChatClient(f"http://127.0.0.1:{port}/v1", MODEL, backoff_s=0.001, max_retries=1) as c:
        with pytest.raises(ChatError) as e:
            c.chat(MSG)
        assert e.value.code == "connection_error" and e.value.http_attempts == 2
        with pytest.raises(ChatError, match="connection_error"):
            c.list_models()
