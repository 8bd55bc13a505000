"""Many concurrent streaming conversations through ``ChatOpenAI`` against one Gateway (issue 54).

Each conversation creates a thread and streams one run with ``stream_mode="messages-tuple"``
(as chat UIs do); ``joiners`` more readers per run join its stream from the start. The model
is ``langchain_openai.ChatOpenAI`` on the loopback provider (``fake_openai``), answering
``TOKENS`` words, one streamed token each. Used by the scale-out suite (a few dozen streams)
and by ``nox -s chaos`` (128).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from fake_openai import FakeOpenAI

__all__ = ["TOKENS", "Outcome", "answer", "converse", "model_config"]

TOKENS = 200


def answer(messages: list[dict[str, Any]]) -> str:
    """The provider's reply: ``TOKENS`` numbered words, so a missing token shows by number."""
    return " ".join(f"w{n}" for n in range(TOKENS))


def model_config(fake: FakeOpenAI) -> dict[str, Any]:
    """config.yaml keys: the lead model on ``fake``; no title or memory call (only the
    conversation's own tokens are counted)."""
    return {
        "models": [
            {
                "name": "gpt",
                "use": "langchain_openai:ChatOpenAI",
                "model": "gpt-x",
                "api_key": "k",
                "base_url": fake.base_url,
                "streaming": True,
            }
        ],
        "title": {"enabled": False},
        "memory": {"enabled": False},
    }


@dataclass
class Outcome:
    """What every reader of every run saw: the text of its token chunks, and who it was
    followed by the names of the events it got (``end`` with its data)."""

    texts: list[str] = field(default_factory=list)
    names: list[list[str]] = field(default_factory=list)
    seconds: float = 0.0

    def short(self) -> list[tuple[int, list[str]]]:
        """The readers that missed tokens: words received, and their first and last events."""
        expected = answer([])
        return [
            (len(text.split()), names[:3] + names[-2:])
            for text, names in zip(self.texts, self.names, strict=True)
            if text != expected
        ]

    def unclean(self) -> list[list[str]]:
        """The readers whose stream did not end with ``end``, or told of ``not_retained``."""
        return [
            [n for n in names if n != "messages"]
            for names in self.names
            if not names[-1].startswith("end") or "not_retained" in names
        ]


def _read(body: str) -> tuple[str, list[str]]:
    text: list[str] = []
    names: list[str] = []
    for block in body.split("\n\n"):
        event = data = None
        for line in block.splitlines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data = line[5:].strip()
        if event is None:
            continue
        names.append(event if event != "end" else f"end {data}")
        if event == "messages" and data:
            chunk, _ = json.loads(data)
            if chunk.get("type") in ("AIMessageChunk", "ai") and isinstance(chunk.get("content"), str):
                text.append(chunk["content"])
    return "".join(text), names


async def _conversation(client: httpx.AsyncClient, n: int, joiners: int, outcome: Outcome) -> None:
    thread = (await client.post("/api/threads", json={})).json()["thread_id"]
    body = {
        "assistant_id": "lead_agent",
        "input": {"messages": [{"role": "user", "content": f"conversation {n}"}]},
        "stream_mode": ["messages-tuple"],
    }
    async with client.stream("POST", f"/api/threads/{thread}/runs/stream", json=body) as response:
        response.raise_for_status()
        run_id = response.headers["content-location"].rstrip("/").split("/")[-1]
        join = [_join(client, thread, run_id, outcome) for _ in range(joiners)]
        tasks = [asyncio.create_task(j) for j in join]
        text, names = _read((await response.aread()).decode())
        names.insert(0, f"creator of {run_id}")
    outcome.texts.append(text)
    outcome.names.append(names)
    await asyncio.gather(*tasks)


async def _join(client: httpx.AsyncClient, thread: str, run_id: str, outcome: Outcome) -> None:
    url = f"/api/threads/{thread}/runs/{run_id}/stream"
    response = await client.get(url, params={"stream_mode": "messages-tuple"}, headers={"Last-Event-ID": "-1"})
    text, names = _read(response.text)
    names.insert(0, f"joiner of {run_id}")
    outcome.texts.append(text)
    outcome.names.append(names)


def converse(base_url: str, conversations: int, *, joiners: int = 0) -> Outcome:
    """Run ``conversations`` at once, each read by its creator and ``joiners`` more readers."""
    outcome = Outcome()

    async def main() -> None:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        async with httpx.AsyncClient(base_url=base_url, timeout=180, limits=limits) as client:
            await asyncio.gather(*(_conversation(client, n, joiners, outcome) for n in range(conversations)))

    started = time.monotonic()
    asyncio.run(main())
    outcome.seconds = time.monotonic() - started
    return outcome
