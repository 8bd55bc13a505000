"""Skills through the served Gateway: a folder under ``skills/public`` beside config.yaml,
switched over the CLI while the Gateway runs, is loadable in the next run and only then; the
body reaches the thread only as ``load_skill``'s answer (the embedded model's
``use load_skill {...}``)."""

from __future__ import annotations

from pathlib import Path

import httpx

from conftest import live_server
from deerflow_ext import cli
from deerflow_ext.config.loading import load_app_config
from deerflow_ext.config.settings import Settings
from deerflow_ext.gateway import create_app


async def _tool_answers(client: httpx.AsyncClient, text: str) -> list[str]:
    thread = (await client.post("/api/threads", json={})).json()["thread_id"]
    body = {"input": {"messages": [{"role": "user", "content": text}]}}
    values = (await client.post(f"/api/threads/{thread}/runs/wait", json=body)).json()
    return [m["content"] for m in values["messages"] if m["type"] == "tool"]


async def test_a_skill_switched_over_the_cli_is_loaded_by_the_next_run(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("title: {enabled: false}\nmemory: {enabled: false}\n", encoding="utf-8")
    skill = tmp_path / "skills" / "public" / "tides" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: tides\ndescription: Read a tide table.\n---\nHigh water twice a day.\n")
    assert cli.main(["extensions", "skill", "disable", "tides", "--config", str(config)]) == 0
    settings = Settings(config=config, database_url=f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    app = create_app(settings, config=load_app_config(config))
    ask = 'use load_skill {"name": "tides"}'
    async with live_server(app) as server, server.client() as client:
        assert await _tool_answers(client, ask) == []  # no such tool while it is off: a plain answer
        assert cli.main(["extensions", "skill", "enable", "tides", "--config", str(config)]) == 0
        assert await _tool_answers(client, "hello") == []  # listed, not loaded
        assert [answer.strip() for answer in await _tool_answers(client, ask)] == ["High water twice a day."]
