"""A scripted stand-in for an OpenAI-compatible model server, on 127.0.0.1 (an ephemeral port).

It speaks the chat-completions protocol over a real socket: `POST /v1/chat/completions` answers with
`choices[0].message.content` and `usage`; `GET /v1/models` lists one model. What it answers is scripted
per attempt: the mining prompt names its problem and round ("Problem: NAME (attempt R of N)"), and the
script maps R to a list of replies, one per successive request for that round (so `[Reply(500), ok]`
is "HTTP 500, then success"). Every request is recorded (round, auth header, time).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_ATTEMPT = re.compile(r"Problem: (?P<problem>\S+) \(attempt (?P<round>\d+) of \d+\)")
MODEL = "scripted-coder"


@dataclass
class Reply:
    status: int = 200
    content: str | None = ""  # the message text (status 200)
    raw: str | None = None  # a raw body instead of a chat-completions JSON
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    echo_auth: bool = False  # put the request's Authorization header in the body (a careless server)


def fenced(code: str, prose: str = "Here is the kernel.") -> str:
    return f"{prose}\n\n```python\n{code.strip()}\n```\n\nIt should be fast."


@dataclass
class Request:
    problem: str | None
    round: int | None
    auth: str | None
    t: float
    text: str = ""


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):  # a killed client is expected
            super().handle_error(request, client_address)


class ScriptedLLM:
    """`with ScriptedLLM(script) as llm:` serves on `llm.url` (…/v1) until the block ends.

    `script`: dict round -> list[Reply]; the n-th request for a round gets the n-th reply (the last
    one repeats). A round missing from the script gets `default`.
    """

    def __init__(self, script: dict[int, list[Reply]], default: Reply | None = None, port: int = 0) -> None:
        self.script = script
        self.default = default or Reply(content="I cannot help with that.")
        self.requests: list[Request] = []
        self._counts: dict[tuple[str | None, int | None], int] = {}
        self._lock = threading.Lock()
        llm = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: object) -> None:  # keep pytest output clean
                pass

            def _send(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
                data = body.encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): expected for slow replies

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}))
                else:
                    self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}))

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path != "/v1/chat/completions":
                    self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}))
                    return
                text = "\n".join(m.get("content", "") for m in body.get("messages", []))
                m = _ATTEMPT.search(text)
                problem, rnd = (m["problem"], int(m["round"])) if m else (None, None)
                auth = self.headers.get("Authorization")
                with llm._lock:
                    llm.requests.append(Request(problem, rnd, auth, time.monotonic(), text))
                    n = llm._counts.get((problem, rnd), 0)
                    llm._counts[(problem, rnd)] = n + 1
                replies = llm.script.get(rnd) or [llm.default]
                reply = replies[min(n, len(replies) - 1)]
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.raw is not None:
                    out = reply.raw
                elif reply.status != 200:
                    msg = f"scripted failure {reply.status}"
                    if reply.echo_auth:
                        msg += f" for {auth}"
                    out = json.dumps({"error": {"message": msg}})
                else:
                    out = json.dumps({
                        "id": f"chatcmpl-{rnd}-{n}", "object": "chat.completion", "model": body.get("model"),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": reply.content}}],
                        "usage": {"prompt_tokens": len(text) // 4, "completion_tokens": len(reply.content or "") // 4,
                                  "total_tokens": len(text) // 4 + len(reply.content or "") // 4},
                    })
                self._send(reply.status, out, reply.headers)

        self._server = _QuietServer(("127.0.0.1", port), Handler)
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> ScriptedLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def rounds_requested(self) -> list[int | None]:
        with self._lock:
            return [r.round for r in self.requests]


if __name__ == "__main__":
    # A manual end-to-end on any machine (the GPU box has no model endpoint):
    #   python tests/mine/fake_llm.py 8765 &
    #   moelab mine --endpoint http://127.0.0.1:8765/v1 --model scripted-coder \
    #       --problems tests/mine/problems/scale_add.py --rounds 6 --out /tmp/mine-demo
    #   moelab mine --report /tmp/mine-demo
    from answers import HACK_ALIAS, PROSE, SYNTAX_ERROR, TORCH_OK, TRITON_OK

    demo = {1: [Reply(content=fenced(TORCH_OK))], 2: [Reply(content=fenced(SYNTAX_ERROR))],
            3: [Reply(content=fenced(HACK_ALIAS))], 4: [Reply(content=PROSE)],
            5: [Reply(503, headers={"Retry-After": "1"}), Reply(content=fenced(TRITON_OK))]}
    with ScriptedLLM(demo, port=int(sys.argv[1]) if len(sys.argv) > 1 else 8765) as llm:
        print(f"scripted model on {llm.url} (Ctrl-C to stop)", flush=True)
        while True:
            time.sleep(3600)
