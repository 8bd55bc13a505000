"""A small OpenAI-compatible chat server on loopback, for tests and ``.ci/first-run``.

Real provider packages (``langchain-openai``'s ``ChatOpenAI`` over the ``openai`` SDK and
httpx) talk to it exactly as they talk to the real API, so what the host does with a real
model — streaming tokens, usage, provider errors and their retries, credentials — is tested
without a network. Standard library only, so ``.ci/first-run`` can start it from a fresh
virtualenv: ``python tests/fake_openai.py --port-file PATH [--api-key KEY]``.

It serves ``POST /v1/chat/completions`` (``stream`` true or false, ``stream_options.
include_usage``) and ``GET /v1/models``. The reply is ``reply(messages)`` — by default
``Echo: <last user text>`` — split into word tokens when streamed. ``fail_next(n, status)``
makes the next ``n`` completions fail with an OpenAI-shaped error body; with ``api_key``
set, a request without that bearer token gets 401. ``fail_when(messages)`` picks requests
by what they ask (say, only the host's title prompt): it returns an HTTP status to fail
that request with, ``DROP`` to close the connection without answering (what a provider
that stops looks like to the client), or None to answer it; ``stall_when(messages)`` returns
seconds to wait before answering that one. ``call_tools(body)`` makes the model call tools:
given the request (its ``messages`` and the ``tools`` offered), it returns ``[(name,
arguments)]`` to answer with those tool calls (``finish_reason: tool_calls``), or None to
answer with text. Every completion request body is kept in ``requests`` (in arrival order)
so tests can count attempts.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["DROP", "FakeOpenAI", "echo"]

Reply = Callable[[list[dict[str, Any]]], str]
FailWhen = Callable[[list[dict[str, Any]]], int | None]
StallWhen = Callable[[list[dict[str, Any]]], float]
CallTools = Callable[[dict[str, Any]], list[tuple[str, dict[str, Any]]] | None]

DROP = 0
"""``fail_when``'s answer for "close the connection, send nothing"."""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def echo(messages: list[dict[str, Any]]) -> str:
    """``Echo: <the last user message>`` (whitespace collapsed, at most 200 characters)."""
    user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    text = " ".join(_text(user.get("content") if user else "").split())[:200]
    return f"Echo: {text}" if text else "Echo."


def _tokens(text: str) -> Iterator[str]:
    words = text.split(" ")
    for index, word in enumerate(words):
        yield word if index == len(words) - 1 else word + " "


class FakeOpenAI:
    """The server; a context manager that starts it on a free loopback port."""

    def __init__(
        self,
        *,
        reply: Reply = echo,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        delay: float = 0.0,
        fail_when: FailWhen | None = None,
        stall_when: StallWhen | None = None,
        token_delay: float = 0.0,
        call_tools: CallTools | None = None,
    ) -> None:
        self.reply = reply
        self.call_tools = call_tools
        self.fail_when = fail_when
        self.stall_when = stall_when
        self.api_key = api_key
        self.delay = delay  # seconds before each completion answers (a slow provider)
        self.token_delay = token_delay  # seconds between streamed tokens (a model generating)
        self.requests: list[dict[str, Any]] = []
        self._failures: list[tuple[int, str]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), _handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def fail_next(self, count: int = 1, status: int = 500, message: str = "the fake provider failed") -> None:
        with self._lock:
            self._failures.extend([(status, message)] * count)

    def completions(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.requests)

    def start(self) -> FakeOpenAI:
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next_failure(self) -> tuple[int, str] | None:
        with self._lock:
            return self._failures.pop(0) if self._failures else None


def _handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return None  # quiet: tests read the host's log, not this one

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, kind: str) -> None:
            self._json(status, {"error": {"message": message, "type": kind, "param": None, "code": None}})

        def _authorised(self) -> bool:
            if fake.api_key is None or self.headers.get("authorization") == f"Bearer {fake.api_key}":
                return True
            self._error(401, "Incorrect API key provided.", "invalid_request_error")
            return False

        def do_GET(self) -> None:
            if self.path.rstrip("/") != "/v1/models":
                self._error(404, f"no route {self.path}", "invalid_request_error")
            elif self._authorised():
                model = {"id": "fake-model", "object": "model", "owned_by": "fake"}
                self._json(200, {"object": "list", "data": [model]})

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._error(404, f"no route {self.path}", "invalid_request_error")
                return
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
            with fake._lock:
                fake.requests.append(body)
            if not self._authorised():
                return
            messages = body.get("messages") or []
            chosen = fake.fail_when(messages) if fake.fail_when is not None else None
            if chosen == DROP:
                self.close_connection = True
                self.connection.shutdown(2)  # socket.SHUT_RDWR: the client sees the peer go away
                return
            if chosen is not None:
                self._error(chosen, "the fake provider failed this request", "server_error")
                return
            if fake.stall_when is not None:
                time.sleep(fake.stall_when(messages))
            failure = fake._next_failure()
            if failure is not None:
                kind = "server_error" if failure[0] >= 500 else "invalid_request_error"
                self._error(failure[0], failure[1], kind)
                return
            if fake.delay:
                time.sleep(fake.delay)
            calls = fake.call_tools(body) if fake.call_tools is not None else None
            tool_calls = [
                {
                    "id": f"call_{uuid.uuid4().hex[:12]}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
                for name, arguments in calls or ()
            ]
            text = "" if tool_calls else fake.reply(messages)
            prompt_tokens = sum(len(_text(m.get("content")).split()) for m in messages)
            usage = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": len(text.split()),
                "total_tokens": prompt_tokens + len(text.split()),
            }
            model = str(body.get("model") or "fake-model")
            if body.get("stream"):
                include_usage = (body.get("stream_options") or {}).get("include_usage")
                self._stream(model, text, usage if include_usage else None, tool_calls)
                return
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if tool_calls:
                message["tool_calls"] = tool_calls
            self._json(
                200,
                {
                    "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": message if tool_calls else {"role": "assistant", "content": text},
                            "finish_reason": "tool_calls" if tool_calls else "stop",
                        }
                    ],
                    "usage": usage,
                },
            )

        def _stream(
            self, model: str, text: str, usage: dict[str, int] | None, tool_calls: list[dict[str, Any]]
        ) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            chunk_id = f"chatcmpl-{uuid.uuid4().hex[:12]}"

            def send(choices: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> None:
                chunk = {
                    "id": chunk_id,
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": model,
                    "choices": choices,
                    **(extra or {}),
                }
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()

            send([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
            for token in () if tool_calls else _tokens(text):
                if fake.token_delay:
                    time.sleep(fake.token_delay)
                send([{"index": 0, "delta": {"content": token}, "finish_reason": None}])
            for index, call in enumerate(tool_calls):
                send([{"index": 0, "delta": {"tool_calls": [{"index": index, **call}]}, "finish_reason": None}])
            send([{"index": 0, "delta": {}, "finish_reason": "tool_calls" if tool_calls else "stop"}])
            if usage is not None:
                send([], {"usage": usage})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", type=Path, help="write the bound port here once listening")
    parser.add_argument("--api-key", default=None, help="require this bearer token")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each completion answers")
    args = parser.parse_args(argv)
    fake = FakeOpenAI(api_key=args.api_key, port=args.port, delay=args.delay)
    print(f"fake OpenAI server on {fake.base_url}", flush=True)
    if args.port_file is not None:
        args.port_file.write_text(str(fake.port))
    try:
        fake._server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
