"""A local OpenAI-compatible chat server that streams every reply at a fixed pace.

Run: ``python benchmarks/stream_provider.py --port 8765`` (``streaming.py`` starts it itself).
Not a test and not a model: ``POST /v1/chat/completions`` answers with canned text, so a
benchmark of a Gateway measures the Gateway and not a provider's mood.

Why a server of our own and not a fake model class: the point of ``streaming.py`` is the
path users run, ``langchain_openai.ChatOpenAI(streaming=True)`` reading SSE over HTTP, and
both servers under test (ours and LangGraph's) must pay for it the same way.

What it answers, by what the request looks like:

- a request offering ``tools`` whose last message is the user's and says ``use the
  calculator``: a streamed tool call (``calculator`` with ``{"expression": "6*7"}``), split
  over a few chunks at the same pace: the tool-call turn;
- any other request offering ``tools`` (a conversation turn, or the turn after a tool's
  answer): :data:`REPLY_TOKENS` content tokens, ``--gap-ms`` apart, each one word and a space
  (``t0 t1 ...``) so a client can count tokens in a chunk that carries several;
- a request with no ``tools`` (the host's own calls: a title, memory facts): a short reply,
  a JSON list of facts when the prompt asks for one, else a title, at the same pace.

With ``--hold-after K`` a conversation reply stops after its K-th token until ``GET
/release`` (which lets every reply held so far go on; later ones hold again): streams held
open mid-reply, for measuring what an open stream costs a server (``stream_memory.py``).

Every stream ends with a ``finish_reason`` chunk, then a ``usage`` chunk (no choices, as
OpenAI sends with ``stream_options.include_usage``), then ``data: [DONE]``. A request with
``"stream": false`` gets the same content in one JSON body. The pace is kept against a
clock started with the reply (token ``i`` is due ``i x gap`` after the first), so a busy
loop delays tokens but never stretches the whole reply.

A raw ASGI app on uvicorn: with hundreds of open streams on one core, a framework's
per-chunk work would be the provider's cost, not the servers'.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn

__all__ = ["REPLY_TOKENS", "TOOL_PROMPT", "app", "reply_text"]

REPLY_TOKENS = 200
TOOL_PROMPT = "use the calculator"
"""Words of a user message that ask the provider for a tool call on that turn."""
TOOL_NAME = "calculator"
TOOL_ARGUMENTS = ('{"expr', 'ession": ', '"6*7"}')
FACTS = '["The user runs a streaming benchmark"]'
TITLE = "A streaming benchmark conversation"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def reply_text(tokens: int = REPLY_TOKENS) -> str:
    """The conversation reply, every token a word and a space: what a client should receive."""
    return "".join(f"t{i} " for i in range(tokens))


class Provider:
    """The app: its pace and reply length are set once, at start."""

    def __init__(self, gap_seconds: float, tokens: int, hold_after: int | None = None) -> None:
        self.gap = gap_seconds
        self.tokens = tokens
        self.hold_after = hold_after
        self.replies = 0
        self.held = 0
        self._gate: asyncio.Event | None = None

    def _release(self) -> int:
        """Let every held reply go on; returns how many were held."""
        held, self.held = self.held, 0
        if self._gate is not None:
            self._gate.set()
        self._gate = None
        return held

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        if scope["method"] == "GET":
            if scope["path"].endswith("/release"):
                await _respond(send, 200, b'{"released": %d}' % self._release())
                return
            await _respond(send, 200, b'{"ok": true, "replies": %d, "held": %d}' % (self.replies, self.held))
            return
        if not scope["path"].endswith("/chat/completions"):
            await _respond(send, 404, b'{"error": {"message": "only /v1/chat/completions"}}')
            return
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            request = json.loads(body)
        except ValueError:
            await _respond(send, 400, b'{"error": {"message": "the body is not JSON"}}')
            return
        self.replies += 1
        pieces, finish = self._pieces(request)
        if request.get("stream"):
            await self._stream(send, request, pieces, finish)
        else:
            await _respond(send, 200, json.dumps(_whole(request, pieces, finish)).encode())

    def _pieces(self, request: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        """The deltas of the reply and its finish reason."""
        messages = request.get("messages") or [{}]
        last = messages[-1]
        if not request.get("tools"):
            prompt = json.dumps(messages)
            text = FACTS if "JSON list" in prompt else TITLE
            return [{"content": word} for word in _words(text)], "stop"
        if last.get("role") == "user" and TOOL_PROMPT in str(last.get("content")):
            call_id = f"call_{uuid.uuid4().hex[:12]}"
            first = {"index": 0, "id": call_id, "type": "function", "function": {"name": TOOL_NAME, "arguments": ""}}
            deltas = [{"tool_calls": [first]}]
            deltas += [{"tool_calls": [{"index": 0, "function": {"arguments": part}}]} for part in TOOL_ARGUMENTS]
            return deltas, "tool_calls"
        return [{"content": f"t{i} "} for i in range(self.tokens)], "stop"

    async def _stream(self, send: Send, request: dict[str, Any], pieces: list[dict[str, Any]], finish: str) -> None:
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        ident, created, model = f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), str(request.get("model", "bench"))

        def chunk(delta: dict[str, Any] | None, reason: str | None = None, usage: Any = None) -> bytes:
            choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": reason}]
            data = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model}
            data["choices"] = choices
            if usage is not None:
                data["usage"] = usage
            return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"

        loop = asyncio.get_running_loop()
        start = loop.time()
        await _more(send, chunk({"role": "assistant", "content": ""}))
        hold = self.hold_after if finish == "stop" and len(pieces) == self.tokens else None
        for i, delta in enumerate(pieces):
            if i == hold:
                start += await self._hold(loop)
            due = start + i * self.gap
            if due > loop.time():
                await asyncio.sleep(due - loop.time())
            await _more(send, chunk(delta))
        await _more(send, chunk({}, finish))
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in request.get("messages") or [])
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(pieces)}
        usage["total_tokens"] = prompt_tokens + len(pieces)
        await _more(send, chunk(None, usage=usage))
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})

    async def _hold(self, loop: asyncio.AbstractEventLoop) -> float:
        """Wait for ``/release``; returns the seconds waited (the pace's clock moves on by them)."""
        if self._gate is None:
            self._gate = asyncio.Event()
        gate, began = self._gate, loop.time()
        self.held += 1
        await gate.wait()
        return loop.time() - began


def _words(text: str) -> list[str]:
    words = text.split(" ")
    return [word + " " for word in words[:-1]] + [words[-1]]


def _whole(request: dict[str, Any], pieces: list[dict[str, Any]], finish: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "".join(p.get("content", "") for p in pieces)}
    if finish == "tool_calls":
        call = dict(pieces[0]["tool_calls"][0])
        call.pop("index")
        call["function"] = {"name": TOOL_NAME, "arguments": "".join(TOOL_ARGUMENTS)}
        message["tool_calls"] = [call]
        message["content"] = None
    choice = {"index": 0, "message": message, "finish_reason": finish}
    usage = {"prompt_tokens": 1, "completion_tokens": len(pieces), "total_tokens": 1 + len(pieces)}
    return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": str(request.get("model", "bench")), "choices": [choice], "usage": usage}  # fmt: skip


async def _more(send: Send, body: bytes) -> None:
    await send({"type": "http.response.body", "body": body, "more_body": True})


async def _respond(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


app = Provider(0.020, REPLY_TOKENS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--gap-ms", type=float, default=20.0, help="milliseconds between two tokens of a reply")
    parser.add_argument("--tokens", type=int, default=REPLY_TOKENS, help="content tokens of a conversation reply")
    parser.add_argument("--hold-after", type=int, help="hold each conversation reply after this many tokens")
    args = parser.parse_args()
    provider = Provider(args.gap_ms / 1000, args.tokens, args.hold_after)
    uvicorn.run(provider, host="127.0.0.1", port=args.port, log_level="warning", access_log=False, backlog=4096)


if __name__ == "__main__":
    main()
