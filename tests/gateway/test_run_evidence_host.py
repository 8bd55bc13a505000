"""Run evidence readers on a real uvicorn with the real agent host (embedded model): the run
journal a run leaves, the readers' paging and limits at and past their edges, their owner
scope, and the owner a run and its ``TaskInfo`` carry (digest §4.9; issue 56's owners)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import APIRouter, HTTPException, Request

from conftest import live_server
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.extensions.contract.registry import HostRegistry
from deerflow_ext.extensions.contract.snapshot import LoadedExtensions
from deerflow_ext.gateway import create_app
from deerflow_ext.gateway.host_access import HostRunEvidenceReader
from deerflow_extension_api import (
    EXTENSION_PRINCIPAL_RESOLVER_KEY,
    ExtensionPrincipal,
    InvalidRunEvidenceCursor,
    TaskInfo,
    require_run_evidence_reader,
)

# Both databases: the journal's append and the feed's position comparisons are SQL of each dialect.

infos: list[TaskInfo] = []
service_deps: list[Any] = []


class Service:
    async def start(self, deps: Any) -> None:
        service_deps.append(deps)

    async def stop(self) -> None:
        return None


class Lifecycle:
    async def on_task_start(self, app_store: Any, task_store: Any, info: TaskInfo) -> None:
        infos.append(info)


def _router() -> APIRouter:
    """What an extension's route does: a reader for its caller, paged by query parameters."""
    router = APIRouter(prefix="/api/evidence-probe")

    @router.get("/runs")
    async def runs(request: Request, limit: int = 10, cursor: str | None = None) -> Any:
        try:
            page = await require_run_evidence_reader(request).list_changed_runs(cursor=cursor, limit=limit)
        except InvalidRunEvidenceCursor as exc:
            raise HTTPException(400, str(exc)) from None
        return {"items": [i.__dict__ if hasattr(i, "__dict__") else _view(i) for i in page.items], **_page(page)}

    @router.get("/events/{thread_id}/{run_id}")
    async def events(request: Request, thread_id: str, run_id: str, after: int | None = None, limit: int = 50) -> Any:
        reader = require_run_evidence_reader(request)
        page = await reader.list_run_events(thread_id=thread_id, run_id=run_id, after_seq=after, limit=limit)
        status = await reader.get_run_status(thread_id=thread_id, run_id=run_id)
        return {
            "items": [_view(e) for e in page.items],
            "next_after_seq": page.next_after_seq,
            "has_more": page.has_more,
            "status": None if status is None else status.status,
        }

    return router


def _view(item: Any) -> dict[str, Any]:
    return {name: getattr(item, name) for name in item.__slots__}


def _page(page: Any) -> dict[str, Any]:
    return {"next_cursor": page.next_cursor, "has_more": page.has_more}


def _extensions() -> LoadedExtensions:
    registry = HostRegistry()
    registry.begin(0, "probe", "probe:install")
    registry.task_lifecycle(Lifecycle())
    registry.service(Service())
    registry.routers([_router()])
    registry.end()
    return registry.freeze(loaded=["probe:install"], total=1)


@pytest.fixture
async def server(settings_for: Any) -> Any:
    infos.clear()
    service_deps.clear()
    app = create_app(settings_for(), config=AppConfig(), extensions=_extensions())
    app.state.run_evidence_settle_seconds = 0
    async with live_server(app) as live, live.client() as http:
        yield app, http


def _as(app: Any, principal: ExtensionPrincipal | None) -> None:
    setattr(app.state, EXTENSION_PRINCIPAL_RESOLVER_KEY, lambda request: principal)


async def _run(http: Any, thread_id: str, text: str) -> str:
    before = {r["run_id"] for r in (await http.get(f"/api/threads/{thread_id}/runs")).json()}
    response = await http.post(
        f"/api/threads/{thread_id}/runs/wait", json={"input": {"messages": [{"role": "user", "content": text}]}}
    )
    assert response.status_code == 200, response.text
    (new,) = {r["run_id"] for r in (await http.get(f"/api/threads/{thread_id}/runs")).json()} - before
    return str(new)


async def test_a_run_leaves_its_journal_and_the_feed_pages_it_for_its_owner(server: Any) -> None:
    app, http = server
    _as(app, ExtensionPrincipal("alice", roles=("user",)))
    thread = (await http.post("/api/threads", json={})).json()["thread_id"]
    first = await _run(http, thread, "hello")

    # The run's owner is on its row and its TaskInfo.
    record = await app.state.runtime.store.get_run(thread, first)
    assert record.user_id == "alice"
    assert [(i.run_id, i.user_id) for i in infos] == [(first, "alice")]

    feed = (await http.get("/api/evidence-probe/runs")).json()
    assert [(i["run_id"], i["thread_id"], i["status"]) for i in feed["items"]] == [(first, thread, "success")]
    assert feed["has_more"] is False and feed["next_cursor"]
    # Caught up: an empty page keeps the cursor it was given.
    again = (await http.get("/api/evidence-probe/runs", params={"cursor": feed["next_cursor"]})).json()
    assert again == {"items": [], "next_cursor": feed["next_cursor"], "has_more": False}

    events = (await http.get(f"/api/evidence-probe/events/{thread}/{first}")).json()
    kinds = [(e["seq"], e["event_type"], e["category"]) for e in events["items"]]
    assert kinds == [
        (1, "run.start", "trace"),
        (2, "llm.human.input", "message"),
        (3, "llm.ai.response", "message"),
        (4, "run.end", "outputs"),
    ]
    assert events["items"][1]["content"]["content"] == "hello"
    assert events["items"][3]["content"]["status"] == "success"
    assert (events["next_after_seq"], events["has_more"], events["status"]) == (4, False, "success")
    # Paging by seq: one at a time after 2, more to come.
    one = (await http.get(f"/api/evidence-probe/events/{thread}/{first}", params={"after": 2, "limit": 1})).json()
    assert ([e["seq"] for e in one["items"]], one["next_after_seq"], one["has_more"]) == ([3], 3, True)

    # A second run on the thread: seq goes on across the thread's runs; the feed moves on.
    second = await _run(http, thread, "again")
    later = (await http.get("/api/evidence-probe/runs", params={"cursor": feed["next_cursor"]})).json()
    assert [i["run_id"] for i in later["items"]] == [second]
    seqs = [e["seq"] for e in (await http.get(f"/api/evidence-probe/events/{thread}/{second}")).json()["items"]]
    assert seqs == [5, 6, 7, 8]

    # A service's reader is the trusted one: every user's runs, its own cursor scope.
    (deps,) = service_deps
    everyone = await deps.run_evidence_reader.list_changed_runs(cursor=None, limit=10)
    assert [r.run_id for r in everyone.items] == [first, second]
    with pytest.raises(InvalidRunEvidenceCursor):
        await deps.run_evidence_reader.list_changed_runs(cursor=feed["next_cursor"], limit=10)

    # Another principal sees none of it, and alice's cursor is refused under its scope.
    _as(app, ExtensionPrincipal("bob"))
    assert (await http.get("/api/evidence-probe/runs")).json()["items"] == []
    foreign = await http.get("/api/evidence-probe/runs", params={"cursor": feed["next_cursor"]})
    assert foreign.status_code == 400 and "scope" in foreign.json()["detail"]
    hidden = (await http.get(f"/api/evidence-probe/events/{thread}/{first}", params={"after": 1})).json()
    assert hidden == {"items": [], "next_after_seq": 1, "has_more": False, "status": None}
    # No principal: the reader is refused, not widened.
    _as(app, None)
    with pytest.raises(PermissionError):
        require_run_evidence_reader(_Request(app))


class _Request:
    def __init__(self, app: Any) -> None:
        self.app = app


async def test_limits_at_and_past_their_edges_and_the_settle_window(server: Any) -> None:
    app, http = server
    thread = (await http.post("/api/threads", json={})).json()["thread_id"]
    run_id = await _run(http, thread, "hi")
    store = app.state.runtime.store
    reader = HostRunEvidenceReader(store, user_id="default", settle_seconds=0)
    assert len((await reader.list_changed_runs(cursor=None, limit=2000)).items) == 1
    for bad in (0, 2001, True, 1.0, "5"):
        with pytest.raises(ValueError, match="limit"):
            await reader.list_changed_runs(cursor=None, limit=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="limit"):
            await reader.list_run_events(thread_id=thread, run_id=run_id, after_seq=None, limit=bad)  # type: ignore[arg-type]
    page = await reader.list_run_events(thread_id=thread, run_id=run_id, after_seq=0, limit=1)
    assert [e.seq for e in page.items] == [1] and page.has_more
    for bad_seq in (-1, True, "1"):
        with pytest.raises(ValueError, match="after_seq"):
            await reader.list_run_events(thread_id=thread, run_id=run_id, after_seq=bad_seq, limit=1)  # type: ignore[arg-type]
    for cursor in ("%%%", "e30", "eyJ2IjoyfQ"):  # not base64, {}, {"v":2}
        with pytest.raises(InvalidRunEvidenceCursor):
            await reader.list_changed_runs(cursor=cursor, limit=1)
    # A run on another thread is not this thread's; a global reader sees every owner's run.
    assert await reader.get_run_status(thread_id="elsewhere", run_id=run_id) is None
    everyone = HostRunEvidenceReader(store, user_id=None, settle_seconds=0)
    assert (await everyone.get_run_status(thread_id=thread, run_id=run_id)).status == "success"  # type: ignore[union-attr]
    # The journal goes with its run, and with its thread.
    second = await _run(http, thread, "bye")
    assert (await http.delete(f"/api/threads/{thread}/runs/{run_id}")).status_code in (200, 204)
    assert await store.run_events(thread, run_id, None, 10) == []
    assert len(await store.run_events(thread, second, None, 10)) == 4
    assert (await http.delete(f"/api/threads/{thread}")).status_code in (200, 204)
    assert await store.run_events(thread, second, None, 10) == []
    # Changes younger than the settle window are held back (they may still be committing).
    assert (
        await HostRunEvidenceReader(store, user_id=None, settle_seconds=3600).list_changed_runs(cursor=None, limit=5)
    ).items == ()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(("journal", "extensions", "written"), [(False, True, False), (True, False, True)])
async def test_the_operator_decides_whether_runs_are_journaled(
    settings_for: Any, journal: bool, extensions: bool, written: bool
) -> None:
    """``gateway.run_journal`` overrides the default (journal when an extension could read it)."""
    config = AppConfig.model_validate({"gateway": {"run_journal": journal}})
    ext = _extensions() if extensions else LoadedExtensions()
    app = create_app(settings_for(), config=config, extensions=ext)
    async with live_server(app) as live, live.client() as http:
        thread = (await http.post("/api/threads", json={})).json()["thread_id"]
        run_id = await _run(http, thread, "hi")
        reader = HostRunEvidenceReader(app.state.runtime.store, user_id=None, settle_seconds=0)
        assert [r.run_id for r in (await reader.list_changed_runs(cursor=None, limit=5)).items] == [run_id]
        page = await reader.list_run_events(thread_id=thread, run_id=run_id, after_seq=None, limit=10)
        assert bool(page.items) is written
