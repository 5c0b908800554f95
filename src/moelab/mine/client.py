"""A small client for OpenAI-compatible chat-completions endpoints (vLLM, ollama, SGLang, hosted APIs).

It speaks the real protocol over `httpx`: `POST {base}/chat/completions` with `model` and `messages`,
and reads `choices[0].message.content` and `usage`. Every way a request can go wrong comes back as a
`ChatError` with a stable code, so the mining loop records it as a failed attempt instead of crashing:

| code               | meaning                                                                   |
|--------------------|---------------------------------------------------------------------------|
| `timeout`          | no complete answer within the request timeout (not retried: the server is |
|                    | probably still generating, and asking again doubles its load)             |
| `http_error`       | an HTTP error status, after retries for 408/409/429/5xx                   |
| `connection_error` | the server could not be reached, after retries                            |
| `malformed_answer` | a 2xx reply that is not chat-completions JSON                             |

401, 403 and 404 are `fatal`: a wrong key, endpoint or model name is the user's mistake, not a property
of an attempt, so the loop stops instead of recording every remaining attempt as failed.
"""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from moelab.errors import UserError

# Statuses that mean "try again later": rate limits, overload, gateway trouble.
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
# Statuses that mean the request itself is wrong for every attempt (key, URL, model name).
FATAL_STATUSES = frozenset({401, 403, 404})
MAX_RETRY_AFTER_S = 120.0  # a server asking for longer than this is treated as down, not busy


@dataclass
class ChatResult:
    """One answer: its text, token usage as the server reported it, and how the request went."""

    content: str
    model: str | None
    finish_reason: str | None
    usage: dict[str, int | None]
    http_attempts: int
    seconds: float


@dataclass
class ChatError(Exception):
    """A request that produced no answer. `code` is one of the table in this module's docstring."""

    code: str
    message: str
    status: int | None = None
    http_attempts: int = 1
    seconds: float = 0.0
    fatal: bool = False

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def normalize_endpoint(url: str) -> str:
    """The API base that `/chat/completions` is appended to.

    `http://host:8000`, `http://host:8000/`, `http://host:8000/v1`, `http://host:8000/v1/` and
    `http://host:8000/v1/chat/completions` all give `http://host:8000/v1`; any other path is kept as
    given (some gateways mount the API elsewhere). Raises UserError for a URL that is not http(s).
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UserError(f"--endpoint {url!r} is not an http(s) URL (e.g. http://127.0.0.1:8000/v1)")
    path = parts.path.rstrip("/")
    if path.endswith("/chat/completions"):
        path = path[: -len("/chat/completions")]
    if path == "":
        path = "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def redact_url(url: str) -> str:
    """The URL without user:password, for logs and messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, ""))


def retry_after_s(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date); None if absent or bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass
class ChatClient:
    """Chat completions against one endpoint and model.

    `timeout_s` bounds each wait of one HTTP request (connecting, and any silence while reading; a
    non-streamed answer arrives at once, so in practice it bounds the whole answer). `max_retries`
    bounds how many times a retryable failure is repeated; waits grow as `backoff_s · 2^i` with ±25 %
    jitter, capped at `max_backoff_s`, and a server's Retry-After replaces them (up to 120 s).
    `api_key`, when given, is sent as a bearer token and kept nowhere else.
    """

    endpoint: str
    model: str
    api_key: str | None = None
    timeout_s: float = 600.0
    max_retries: int = 4
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    max_tokens: int | None = None
    temperature: float | None = None
    _http: httpx.Client = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.base = normalize_endpoint(self.endpoint)
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        # trust_env=False: a proxy from the environment must not silently reroute a loopback endpoint.
        self._http = httpx.Client(headers=headers, timeout=httpx.Timeout(self.timeout_s), trust_env=False)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def list_models(self) -> list[str] | None:
        """Model ids from `GET {base}/models`; None if the server does not offer that route.

        Raises ChatError(connection_error) when the server cannot be reached at all, so a run can
        stop before its first attempt instead of logging every attempt as failed.
        """
        try:
            r = self._http.get(f"{self.base}/models", timeout=min(self.timeout_s, 30.0))
        except httpx.TimeoutException as e:
            raise ChatError("timeout", f"GET /models: {type(e).__name__}") from None
        except httpx.TransportError as e:
            raise ChatError("connection_error", f"{redact_url(self.base)}: {type(e).__name__}: {e}") from None
        if r.status_code in (401, 403):
            raise ChatError("http_error", f"GET /models answered {r.status_code}: {_snippet(r.text)}",
                            status=r.status_code, fatal=True)
        if r.status_code != 200:
            return None
        try:
            return [str(m["id"]) for m in r.json()["data"]]
        except (ValueError, KeyError, TypeError):
            return None

    def chat(self, messages: list[dict[str, str]]) -> ChatResult:
        """Send `messages`, return the first choice's text. Raises ChatError (never anything else)."""
        body: dict[str, Any] = {"model": self.model, "messages": messages, "stream": False}
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        t0 = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            wait: float | None = None
            try:
                r = self._http.post(f"{self.base}/chat/completions", json=body)
            except httpx.TimeoutException as e:
                raise ChatError("timeout", f"no answer within {self.timeout_s:g} s ({type(e).__name__})",
                                http_attempts=attempt, seconds=time.monotonic() - t0) from None
            except httpx.TransportError as e:
                err = ChatError("connection_error", f"{type(e).__name__}: {e}", http_attempts=attempt)
            else:
                if r.status_code == 200:
                    return self._parse(r, attempt, time.monotonic() - t0)
                err = ChatError("http_error", f"HTTP {r.status_code}: {_snippet(r.text)}", status=r.status_code,
                                http_attempts=attempt, fatal=r.status_code in FATAL_STATUSES)
                if r.status_code not in RETRY_STATUSES:
                    err.seconds = time.monotonic() - t0
                    raise err
                wait = retry_after_s(r.headers.get("retry-after"))
                if wait is not None and wait > MAX_RETRY_AFTER_S:
                    err.message += f" (Retry-After {wait:.0f} s exceeds {MAX_RETRY_AFTER_S:.0f} s)"
                    err.seconds = time.monotonic() - t0
                    raise err
            if attempt > self.max_retries:
                err.message += f" (after {attempt} tries)"
                err.seconds = time.monotonic() - t0
                raise err
            if wait is None:
                wait = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)) * random.uniform(0.75, 1.25)
            time.sleep(wait)

    def _parse(self, r: httpx.Response, attempts: int, seconds: float) -> ChatResult:
        try:
            data = r.json()
            choice = data["choices"][0]
            content = choice["message"].get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise ChatError("malformed_answer", f"not a chat-completions reply: {_snippet(r.text)}",
                            status=r.status_code, http_attempts=attempts, seconds=seconds) from None
        if content is not None and not isinstance(content, str):
            raise ChatError("malformed_answer", f"message.content is {type(content).__name__}, not text",
                            status=r.status_code, http_attempts=attempts, seconds=seconds)
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return ChatResult(
            content=content or "",
            model=data.get("model"),
            finish_reason=choice.get("finish_reason"),
            usage={k: _int_or_none(usage.get(k)) for k in ("prompt_tokens", "completion_tokens", "total_tokens")},
            http_attempts=attempts,
            seconds=seconds,
        )


def _int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _snippet(text: str, n: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n] + " …"
