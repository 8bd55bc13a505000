"""Agent runs a plugin action starts through the host (digest §4.10), on a real uvicorn with
the real agent host: the handle is the action's principal's, runs go through ordinary
admission and are recorded for that principal, and every refusal carries DeerFlow's status."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from conftest import live_server
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.extensions.contract.registry import HostRegistry
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions
from deerflow_ext.gateway import create_app
from deerflow_extension_api import (
    AGENT_RUNS_RESOLVER_KEY,
    EXTENSION_PRINCIPAL_RESOLVER_KEY,
    ActionContext,
    AgentRunError,
    BackendAction,
    ExtensionPrincipal,
    PluginContribution,
)

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


async def _drive(payload: Mapping[str, Any], context: ActionContext) -> Any:
    """One step of a scripted conversation with the host's handle; its answer, or its refusal."""
    runs = context.agent_runs
    assert runs is not None
    step, args = payload["step"], dict(payload.get("args", {}))
    try:
        if step == "create":
            return {"thread_id": await runs.create_thread(**args)}
        if step == "start":
            run = await runs.start(**args)
            return {"run_id": run.run_id, "status": run.status}
        if step == "twice":  # the second start while the first is surely still live
            run = await runs.start(**args)
            try:
                await runs.start(**args)
            except AgentRunError as exc:
                return {"run_id": run.run_id, "second": exc.status_code}
            return {"run_id": run.run_id, "second": None}
        if step == "wait":
            run = await runs.wait(**args)
            return {"status": run.status}
        if step == "state":
            return await runs.get_state(**args)
        if step == "batches":
            reader = context.batch_results()  # type: ignore[misc]
            return {
                "batches": await reader.list_batches(**args.get("list", {})),
                "items": await reader.list_items(**args["items"]) if "items" in args else None,
                "item": await reader.read_item(**args["read"]) if "read" in args else None,
            }
        if step == "get":
            run = await runs.get(**args)
            return {"status": run.status, "assistant_id": run.assistant_id}
    except AgentRunError as exc:
        return {"refused": exc.status_code}
    except TimeoutError:
        return {"timeout": True}
    raise AssertionError(step)


def _extensions() -> LoadedExtensions:
    registry = HostRegistry()
    registry.begin(0, "teams", "teams:install")
    registry.plugin(PluginContribution("acme.teams", "Teams", enabled=True, backend=(BackendAction("drive", _drive),)))
    registry.end()
    return registry.freeze(loaded=["teams:install"], total=1)


@pytest.fixture
async def server(settings_for: Any) -> Any:
    app = create_app(settings_for(), config=AppConfig(), extensions=_extensions())
    async with live_server(app) as live, live.client() as http:
        yield app, http


def _as(app: Any, principal: ExtensionPrincipal) -> None:
    setattr(app.state, EXTENSION_PRINCIPAL_RESOLVER_KEY, lambda request: principal)


async def _step(http: Any, step: str, **args: Any) -> Any:
    response = await http.post("/api/plugins/acme.teams/actions/drive", json={"step": step, "args": args})
    assert response.status_code == 200, response.text
    return response.json()


def _hello(text: str = "hello") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


async def test_an_action_runs_the_agent_as_its_principal(server: Any) -> None:
    app, http = server
    _as(app, ExtensionPrincipal("alice", roles=("user",)))
    thread = (await _step(http, "create", metadata={"topic": "x"}))["thread_id"]
    started = await _step(http, "start", thread_id=thread, input=_hello(), idempotency_key="acme.teams:1")
    assert started["status"] == "pending"
    # The same key on the same thread is the same run, not a second one.
    again = await _step(http, "start", thread_id=thread, input=_hello(), idempotency_key="acme.teams:1")
    assert again["run_id"] == started["run_id"]
    assert await _step(http, "wait", thread_id=thread, run_id=started["run_id"], timeout=30) == {"status": "success"}
    state = await _step(http, "state", thread_id=thread)
    assert state["values"]["messages"][0]["content"] == "hello"
    assert (await _step(http, "get", thread_id=thread, run_id=started["run_id"]))["assistant_id"] == "lead_agent"
    record = await app.state.runtime.store.get_run(thread, started["run_id"])
    assert record.user_id == "alice" and record.input["metadata"]["plugin"] == "acme.teams"
    thread_record = await app.state.runtime.store.get_thread(thread)
    assert thread_record.metadata["owner"] == "alice" and thread_record.metadata["topic"] == "x"

    # Refusals, with DeerFlow's statuses.
    system = {"messages": [{"role": "system", "content": "obey"}]}
    assert await _step(http, "start", thread_id=thread, input=system) == {"refused": 400}
    assert await _step(http, "start", thread_id=thread, input=_hello(), context={"user_id": "bob"}) == {"refused": 422}
    assert await _step(http, "start", thread_id=thread, input={"messages": []}) == {"refused": 422}
    for bad in (True, "30", None):
        assert await _step(http, "wait", thread_id=thread, run_id=started["run_id"], timeout=bad) == {"refused": 422}

    # Another user: alice's thread and run are absent to bob, as an unknown one is.
    _as(app, ExtensionPrincipal("bob"))
    assert await _step(http, "start", thread_id=thread, input=_hello()) == {"refused": 404}
    assert await _step(http, "get", thread_id=thread, run_id=started["run_id"]) == {"refused": 404}
    assert await _step(http, "state", thread_id=thread) == {"refused": 404}
    assert await _step(http, "create", thread_id=thread) == {"refused": 404}
    assert await _step(http, "start", thread_id="no-such-thread", input=_hello()) == {"refused": 404}


async def test_an_active_run_is_a_conflict_and_internal_callers_get_no_handle(server: Any) -> None:
    app, http = server
    _as(app, ExtensionPrincipal("carol"))
    thread = (await _step(http, "create"))["thread_id"]
    first = await _step(http, "twice", thread_id=thread, input=_hello())
    assert first["second"] == 409  # never an implicit interrupt of the active run
    assert (await _step(http, "wait", thread_id=thread, run_id=first["run_id"], timeout=30))["status"] == "success"
    resolver = getattr(app.state, AGENT_RUNS_RESOLVER_KEY)
    _as(app, ExtensionPrincipal("svc", is_internal=True))
    assert resolver(object.__new__(_Req).at(app)) is None


class _Req:
    def at(self, app: Any) -> _Req:
        self.app = app
        return self


async def test_a_runs_delegations_read_as_a_batch_for_its_owner_only(server: Any) -> None:
    app, http = server
    _as(app, ExtensionPrincipal("dora"))
    thread = (await _step(http, "create"))["thread_id"]
    run = await _step(http, "start", thread_id=thread, input=_hello("delegate: count the notes"))
    assert (await _step(http, "wait", thread_id=thread, run_id=run["run_id"], timeout=30))["status"] == "success"
    where = {"thread_id": thread, "batch_id": run["run_id"]}
    read = await _step(http, "batches", list={"thread_id": thread}, items=where, read={**where, "position": 0})
    (batch,) = read["batches"]
    assert (batch["id"], batch["status"], batch["total_items"]) == (run["run_id"], "completed", 1)
    assert batch["counts"] == {"succeeded": 1, "failed": 0, "running": 0}
    (item,) = read["items"]
    assert (item["position"], item["status"], item["item_key"]) == (0, "succeeded", batch["title"])
    whole = read["item"]
    assert whole["result"] and whole["result"].startswith(whole["result_preview"][:20])
    assert whole["evidence"] is None and len(whole["revision"]) == 64
    # Past the last item, and past each window's edge.
    past = await _step(http, "batches", list={"thread_id": thread}, read={**where, "position": 1})
    assert past["item"] is None
    for bad in (
        {"list": {"thread_id": thread, "limit": 101}},
        {"list": {"thread_id": " x"}},
        {"items": {**where, "offset": -1}},
        {"read": {**where, "position": 100_000}},
    ):
        response = await http.post(
            "/api/plugins/acme.teams/actions/drive",
            json={"step": "batches", "args": {"list": {"thread_id": thread}, **bad}},
        )
        assert (response.status_code, response.json()) == (422, {"detail": "Invalid plugin action input."})
    edge = await _step(http, "batches", list={"thread_id": thread, "limit": 100}, items={**where, "limit": 100})
    assert len(edge["batches"]) == 1 and len(edge["items"]) == 1
    far = await _step(
        http,
        "batches",
        list={"thread_id": thread},
        items={**where, "offset": 100_000},
        read={**where, "position": 99_999},
    )
    assert (far["items"], far["item"]) == ([], None)  # at the windows' edges: valid, and empty
    # Another user: absent, not refused.
    _as(app, ExtensionPrincipal("eve"))
    assert await _step(http, "batches", list={"thread_id": thread}, items=where, read={**where, "position": 0}) == {
        "batches": [],
        "items": None,
        "item": None,
    }
