"""deerflow-fullstack, the full-stack plugin example, installed with pip and served for real.

The package pins ``deerflow-extension-api>=0.2.6,<0.3`` and imports nothing else, as a
plugin written for DeerFlow today does; it is installed *with* its dependencies (offline:
the contract built from this tree is already here), enabled by the operator's ``settings:``
map, and driven over HTTP only: the plugin's card in ``GET /api/plugins``, its packaged
browser files with their headers, its actions, and its model tool called by the agent under
the name DeerFlow derives for it: by the embedded model (its ``use <tool> <json>`` rule) and
by a real ``ChatOpenAI`` against the loopback provider (``tests/fake_openai.py``), which
asks for the tool the way OpenAI's API does once it sees it offered.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deerflow_ext.testing import parse_sse
from e2e.example_packages import installed_example
from e2e.served import Gateway, serve
from fake_openai import FakeOpenAI

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "plugins_examples" / "fullstack"
USE = "deerflow_fullstack:install"
NAMESPACE = "example.notes"
# DeerFlow's name for a plugin tool, computed here from its rule (not by the host's function):
# ext_<namespace, [^a-z0-9_] as _, first 20>_<tool, first 25>_<sha256("ns:tool")[:12]>.
TOOL = "ext_example_notes_remember_" + hashlib.sha256(b"example.notes:remember").hexdigest()[:12]


@pytest.fixture(scope="module")
def installed() -> Iterator[None]:
    with installed_example(PACKAGE, "deerflow-fullstack", "fullstack", USE) as requires:
        assert [r for r in requires if "extra" not in r] == ["deerflow-extension-api<0.3,>=0.2.6"]
        yield


def fullstack_config(directory: Path, **extra: Any) -> Path:
    """A ``config.yaml`` with the example enabled in DeerFlow's record shape (JSON is YAML)."""
    record = {
        "package": "deerflow-fullstack",
        "use": USE,
        "required": True,
        "settings": {NAMESPACE: {"enabled": True, "max_notes": 3, "heading": "Team notes"}},
    }
    config = directory / "config.yaml"
    config.write_text(json.dumps({"plugins": [record], **extra}, indent=2), encoding="utf-8")
    return config


@pytest.fixture(scope="module")
def gateway(installed: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    directory = tmp_path_factory.mktemp("e2e-fullstack")
    with serve(directory, fullstack_config(directory)) as server:
        yield server


def _card(server: Gateway) -> dict[str, Any]:
    with server.client() as client:
        listing = client.get("/api/plugins")
    assert listing.status_code == 200, listing.text
    assert listing.headers["cache-control"] == "private, no-store"
    (card,) = [c for c in listing.json() if c["namespace"] == NAMESPACE]
    return card  # type: ignore[no-any-return]


def _action(server: Gateway, name: str, body: Any) -> Any:
    with server.client() as client:
        return client.post(f"/api/plugins/{NAMESPACE}/actions/{name}", json=body)


def test_the_installed_package_loads_by_its_record(gateway: Gateway) -> None:
    assert f"Extensions loaded: 1/1 ({USE})" in gateway.log()


def test_get_api_plugins_lists_it_with_its_packaged_entry(gateway: Gateway) -> None:
    card = _card(gateway)
    assert card["title"] == "Notes"
    assert (card["module"], card["transport"]) == ("example-notes.v1", "assets-v1")
    assert card["entry"].startswith(f"/api/plugins/{NAMESPACE}/assets/") and card["entry"].endswith("/notes.mjs")
    assert card["settings"] == {"enabled": True, "heading": "Team notes"}  # max_notes stays private
    assert card["backend_actions"] == ["list", "add", "clear", "ask"]


def test_its_assets_are_served_with_their_types_and_immutable_sandboxed_headers(gateway: Gateway) -> None:
    entry = _card(gateway)["entry"]
    with gateway.client() as client:
        module = client.get(entry)
        sheet = client.get(entry.rsplit("/", 1)[0] + "/notes.css")
        unlisted = client.get(entry.rsplit("/", 1)[0] + "/__init__.py")
    for response, media in ((module, "text/javascript"), (sheet, "text/css")):
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].split(";")[0] == media
        assert response.headers["cache-control"] == "private, max-age=31536000, immutable"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["content-security-policy"] == "sandbox"
        # Cookie and Authorization are the route's; the CORS layer adds Origin.
        assert {"Cookie", "Authorization"} <= {v.strip() for v in response.headers["vary"].split(",")}
    assert module.content == (PACKAGE / "src/deerflow_fullstack/static/notes.mjs").read_bytes()
    assert (unlisted.status_code, unlisted.headers["cache-control"]) == (404, "private, no-store")


def test_its_actions_answer_over_http(gateway: Gateway) -> None:
    assert _action(gateway, "clear", {}).status_code == 200
    for text in ("one", "two", "three", "four"):
        added = _action(gateway, "add", {"text": text})
        assert added.status_code == 200, added.text
    listed = _action(gateway, "list", {})
    assert listed.status_code == 200
    body = listed.json()
    # The operator's max_notes (3) bounds the notes; the public heading comes back too.
    assert (body["heading"], body["limit"]) == ("Team notes", 3)
    assert [n["text"] for n in body["notes"]] == ["four", "three", "two"]
    bad = _action(gateway, "add", {"text": "   "})
    assert (bad.status_code, bad.json()["detail"]) == (422, "Invalid plugin action input.")
    assert _action(gateway, "nope", {}).status_code == 404
    # ``ask`` runs the agent through the host's agent_runs handle and keeps its answer.
    asked = _action(gateway, "ask", {"text": "what is a note?"})
    assert asked.status_code == 200, asked.text
    assert (asked.json()["status"], asked.json()["saved"]["source"]) == ("success", "agent-run")
    assert asked.json()["saved"]["text"]


def _run_and_read_back(gateway: Gateway, prompt: str) -> tuple[str, list[dict[str, Any]]]:
    """Run ``prompt`` on a new thread to the end; its id and its messages."""
    with gateway.client() as client:
        thread_id = client.post("/api/threads", json={}).json()["thread_id"]
        body = {"input": {"messages": [{"role": "user", "content": prompt}]}}
        with client.stream("POST", f"/api/threads/{thread_id}/runs/stream", json=body) as response:
            assert response.status_code == 200, response.read()
            events = parse_sse("".join(response.iter_text()))
        run = client.get(f"/api/threads/{thread_id}/runs/{events[0].data['run_id']}").json()
        state = client.get(f"/api/threads/{thread_id}/state").json()
    assert run["status"] == "success", run
    return thread_id, state["values"]["messages"]


def test_the_agent_calls_its_model_tool(gateway: Gateway) -> None:
    assert _action(gateway, "clear", {}).status_code == 200
    thread_id, messages = _run_and_read_back(gateway, f'use {TOOL} {{"text": "buy oat milk"}}')
    (tool_message,) = [m for m in messages if m["type"] == "tool"]
    assert tool_message["name"] == TOOL and tool_message.get("status", "success") == "success"
    assert json.loads(tool_message["content"])["saved"] == {
        "text": "buy oat milk",
        "source": "agent",
        "thread_id": thread_id,
    }
    # What the agent saved, the user's page reads: one principal, one notebook.
    notes = _action(gateway, "list", {}).json()["notes"]
    assert notes == [{"text": "buy oat milk", "source": "agent", "thread_id": thread_id}]


def test_the_installed_packages_own_suite_passes(installed: None) -> None:
    """The package's tests, run as its author would, against the installed package."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=PACKAGE,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"\d+ passed", done.stdout)


def test_a_real_chat_openai_calls_its_model_tool(installed: None, tmp_path: Path) -> None:
    def call_tools(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]] | None:
        offered = {t["function"]["name"] for t in body.get("tools") or ()}
        last = (body.get("messages") or [{}])[-1]
        if TOOL in offered and last.get("role") == "user" and "remember" in str(last.get("content")):
            return [(TOOL, {"text": "call the plumber"})]
        return None

    with FakeOpenAI(call_tools=call_tools) as fake:
        model = {"name": "gpt", "use": "langchain_openai:ChatOpenAI", "model": "gpt-x"}
        config = fullstack_config(tmp_path, models=[{**model, "api_key": "k", "base_url": fake.base_url}])
        with serve(tmp_path, config) as server:
            thread_id, messages = _run_and_read_back(server, "please remember to call the plumber")
            notes = _action(server, "list", {}).json()["notes"]
        offers = [
            t["function"] for r in fake.completions() for t in r.get("tools") or () if t["function"]["name"] == TOOL
        ]
    # The provider was offered the plugin's own description and schema under DeerFlow's name.
    assert offers and offers[0]["description"].startswith("Save a short note for the user")
    assert offers[0]["parameters"]["properties"] == {"text": {"type": "string", "minLength": 1, "maxLength": 2000}}
    (tool_message,) = [m for m in messages if m["type"] == "tool"]
    assert tool_message["name"] == TOOL
    assert json.loads(tool_message["content"])["saved"]["text"] == "call the plumber"
    assert messages[-1]["type"] == "ai" and messages[-1]["content"].startswith("Echo:")
    assert notes == [{"text": "call the plumber", "source": "agent", "thread_id": thread_id}]
