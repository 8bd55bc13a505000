"""``extensions_config.json`` revisions: ``GET`` gives an ``ETag``, a ``PUT`` with a stale
``If-Match`` is refused 412 naming both revisions (the file is left as the other writer made
it), and the command line edits the same file under the same lock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gw_fixtures import FakeAgentHost

from conftest import live_server
from deerflow_ext.cli import main
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.gateway import create_app
from deerflow_ext.gateway.routes.extensions_config import (
    ExtensionsConfig,
    StaleRevisionError,
    revision_of,
    set_entry_enabled,
    update_extensions_config,
)


@pytest.fixture
async def client(settings_for):
    app = create_app(settings_for(), config=AppConfig(), agent_host_factory=lambda c, k: FakeAgentHost())
    async with live_server(app) as server, server.client() as http:
        yield http


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_stale_if_match_is_refused_and_a_fresh_one_wins(client, tmp_path) -> None:
    first = await client.get("/api/extensions-config")
    etag = first.headers["ETag"]
    assert etag == '"absent"'
    mine = {"mcpServers": {}, "skills": {"mine": {"enabled": True}}}
    theirs = {"mcpServers": {}, "skills": {"theirs": {"enabled": True}}}
    saved = await client.put("/api/extensions-config", json=theirs, headers={"If-Match": etag})
    assert saved.status_code == 200 and saved.headers["ETag"] != etag
    stale = await client.put("/api/extensions-config", json=mine, headers={"If-Match": etag})
    assert stale.status_code == 412
    assert "changed since revision absent" in stale.json()["detail"] and stale.headers["ETag"] == saved.headers["ETag"]
    assert json.loads((tmp_path / "extensions_config.json").read_text())["skills"] == {"theirs": {"enabled": True}}
    fresh = await client.put("/api/extensions-config", json=mine, headers={"If-Match": saved.headers["ETag"]})
    assert fresh.status_code == 200
    assert (await client.get("/api/extensions-config")).headers["ETag"] == fresh.headers["ETag"]


def test_update_checks_the_revision_under_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "extensions_config.json"
    _, revision = update_extensions_config(path, lambda c: set_entry_enabled(c, "skill", "a", True))
    assert revision == revision_of(path.read_bytes())
    with pytest.raises(StaleRevisionError, match="it is now"):
        update_extensions_config(path, ExtensionsConfig(), expected="absent")
    with pytest.raises(ValueError, match="no MCP server 'fs'"):
        update_extensions_config(path, lambda c: set_entry_enabled(c, "mcp", "fs", False))
    assert revision_of(path.read_bytes()) == revision  # refused edits leave the file as it was


def test_a_replacement_repairs_a_file_that_no_longer_parses(tmp_path: Path) -> None:
    path = tmp_path / "extensions_config.json"
    path.write_text("{not json")
    update_extensions_config(path, ExtensionsConfig())
    assert json.loads(path.read_text()) == {"mcpServers": {}, "skills": {}}


def test_the_command_line_edits_skills_and_names_a_missing_mcp_server(tmp_path: Path, capsys) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("plugins: []\n")
    assert main(["extensions", "skill", "enable", "research", "--config", str(config)]) == 0
    assert main(["extensions", "skill", "disable", "research", "--config", str(config)]) == 0
    assert json.loads((tmp_path / "extensions_config.json").read_text())["skills"] == {"research": {"enabled": False}}
    assert main(["extensions", "mcp", "enable", "fs", "--config", str(config)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no MCP server 'fs'" in err[0]
