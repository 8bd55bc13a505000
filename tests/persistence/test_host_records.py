"""``HostStore`` on a real database (SQLite, and PostgreSQL when reachable): the records the
Gateway answers from, and the conditional updates that keep several processes honest."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from deerflow_ext.persistence import HostStore, create_engine, make_session_factory, upgrade_head
from deerflow_ext.persistence.records import (
    PROCESS_OWNER,
    TEMPORARY,
    ThreadNotFoundError,
    ThreadQuery,
    owner_is_dead,
)
from deerflow_ext.tokens import TokenUsage


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[HostStore]:
    engine = create_engine(database_url)
    try:
        await upgrade_head(engine)
        yield HostStore(make_session_factory(engine))
    finally:
        await engine.dispose()


async def test_a_thread_round_trips_and_its_records_are_detached_copies(store: HostStore) -> None:
    created = await store.create_thread({"user": "u1"}, thread_id="t-1")
    read = await store.get_thread("t-1")
    assert read is not None and read.id == created.id
    # The same instant; SQLite hands it back without its zone, which the API restores
    # (``gateway/schemas.py``), so compare as UTC.
    assert _utc(read.created_at) == _utc(created.created_at) and _utc(read.updated_at) == _utc(created.updated_at)
    assert (read.status, read.title, read.metadata) == ("idle", None, {"user": "u1"})
    read.metadata["user"] = "changed"  # a caller's copy: the stored row is not touched
    assert (await store.get_thread("t-1")).metadata == {"user": "u1"}
    assert await store.get_thread("missing") is None


async def test_metadata_patches_merge_and_search_filters_orders_and_pages(store: HostStore) -> None:
    for i in range(5):
        await store.create_thread({"team": "a" if i % 2 == 0 else "b", "i": i}, thread_id=f"t-{i}")
    patched = await store.update_thread_metadata("t-4", {"i": 40, "new": True})
    assert patched is not None and patched.metadata == {"team": "a", "i": 40, "new": True}
    assert await store.update_thread_metadata("missing", {"x": 1}) is None

    team_a = ThreadQuery(metadata={"team": "a"}, sort_by="thread_id", descending=False)
    assert [t.id for t in await store.search_threads(team_a)] == ["t-0", "t-2", "t-4"]
    assert [t.id for t in await store.search_threads(ThreadQuery(**{**vars(team_a), "offset": 1, "limit": 1}))] == [
        "t-2"
    ]
    assert await store.count_threads(team_a) == 3
    assert [t.id for t in await store.search_threads(ThreadQuery(ids=("t-1", "t-3"), sort_by="thread_id"))] == [
        "t-3",
        "t-1",
    ]
    assert (await store.list_threads(limit=1))[0].id == "t-4", "newest update first by default"


async def test_a_run_is_started_only_while_pending_and_its_end_syncs_the_thread(store: HostStore) -> None:
    thread = await store.create_thread(thread_id="t-1")
    created = await store.create_run(thread.id, "r-1", {"messages": ["hi"]}, owner=PROCESS_OWNER)
    assert (created.status, created.outcome, created.owner, created.input) == (
        "pending",
        None,
        PROCESS_OWNER,
        {"messages": ["hi"]},
    )

    assert await store.mark_started("r-1", thread.id) is True
    assert (await store.get_thread(thread.id)).status == "busy"
    assert await store.mark_started("r-1", thread.id) is False, "only a pending run starts"

    await store.finish_run(
        "r-1",
        status="success",
        outcome="completed",
        answer="done",
        tokens=TokenUsage(3, 4, 7),
        thread_id=thread.id,
        thread_status="idle",
        title="A title",
    )
    run = await store.get_run(thread.id, "r-1")
    assert (run.status, run.outcome, run.answer, run.tokens) == ("success", "completed", "done", TokenUsage(3, 4, 7))
    assert run.started_at is not None and run.finished_at is not None and run.finished_at >= run.started_at
    after = await store.get_thread(thread.id)
    assert (after.status, after.title) == ("idle", "A title")

    # A later run without a title keeps the thread's title.
    await store.create_run(thread.id, "r-2", {}, owner=PROCESS_OWNER)
    await store.finish_run("r-2", status="error", outcome="failed", thread_id=thread.id, thread_status="error")
    after = await store.get_thread(thread.id)
    assert (after.status, after.title) == ("error", "A title")
    assert await store.get_run("another-thread", "r-1") is None, "a run is found under its own thread only"


async def test_a_run_needs_its_thread_and_fills_in_the_thread_metadata_it_lacks(store: HostStore) -> None:
    with pytest.raises(ThreadNotFoundError):
        await store.create_run("missing", "r-0", {}, owner=PROCESS_OWNER, thread_defaults={"graph_id": "g"})
    assert await store.get_thread("missing") is None and await store.list_runs("missing") == []

    thread = await store.create_thread({"graph_id": "mine"}, thread_id="t-1")
    await store.create_run(thread.id, "r-1", {}, owner=PROCESS_OWNER, thread_defaults={"graph_id": "g", "a": 1})
    after = await store.get_thread(thread.id)
    assert after.metadata == {"graph_id": "mine", "a": 1}, "a key the thread has keeps its value"
    assert _utc(after.updated_at) > _utc(thread.updated_at)
    await store.create_run(thread.id, "r-2", {}, owner=PROCESS_OWNER, thread_defaults={"a": 2})
    unchanged = await store.get_thread(thread.id)
    assert (unchanged.metadata, unchanged.updated_at) == (after.metadata, after.updated_at), "nothing to fill in"
    assert [r.id for r in await store.list_runs(thread.id)] == ["r-1", "r-2"]


async def test_runs_list_in_creation_order_filter_by_status_and_delete_under_their_thread(store: HostStore) -> None:
    thread = await store.create_thread(thread_id="t-1")
    for i in range(3):
        await store.create_run(thread.id, f"r-{i}", {}, owner=PROCESS_OWNER)
    await store.finish_run("r-1", status="success", outcome="completed")
    assert [r.id for r in await store.list_runs(thread.id)] == ["r-0", "r-1", "r-2"]
    assert [r.id for r in await store.list_runs(thread.id, newest_first=True, limit=2)] == ["r-2", "r-1"]
    assert [r.id for r in await store.list_runs(thread.id, status="success")] == ["r-1"]
    assert await store.has_live_run(thread.id) is True
    assert await store.delete_run("another-thread", "r-0") is False
    assert await store.delete_run(thread.id, "r-0") is True
    assert [r.id for r in await store.list_runs(thread.id)] == ["r-1", "r-2"]


async def test_a_thread_with_a_live_run_is_not_deleted(store: HostStore) -> None:
    thread = await store.create_thread(thread_id="t-1")
    await store.create_run(thread.id, "r-1", {}, owner=PROCESS_OWNER)
    assert await store.delete_thread(thread.id) is None
    await store.finish_run("r-1", status="success", outcome="completed")
    assert await store.delete_thread(thread.id) is True
    assert await store.get_thread(thread.id) is None
    assert await store.list_runs(thread.id) == []
    assert await store.delete_thread(thread.id) is False


async def test_stop_requests_are_recorded_on_live_runs_only(store: HostStore) -> None:
    thread = await store.create_thread(thread_id="t-1")
    await store.create_run(thread.id, "r-1", {}, owner=PROCESS_OWNER)
    await store.create_run(thread.id, "r-done", {}, owner=PROCESS_OWNER)
    await store.finish_run("r-done", status="success", outcome="completed")
    other = await store.create_thread(thread_id="t-other")
    await store.create_run(other.id, "r-other", {}, owner=PROCESS_OWNER)

    # A follow-up marks the older live runs of its own thread, in the transaction of its row.
    follow_up, marked = await store.create_follow_up(thread.id, "r-2", {}, owner=PROCESS_OWNER, action="rollback")
    assert (follow_up.id, follow_up.status, marked) == ("r-2", "pending", 1)
    assert await store.cancel_requests(["r-1", "r-2", "r-done", "r-other"]) == {"r-1": "rollback"}
    # The next one marks both older live runs; a thread with none is marked nowhere.
    assert (await store.create_follow_up(thread.id, "r-3", {}, owner=PROCESS_OWNER, action="interrupt"))[1] == 2
    lone = await store.create_thread(thread_id="t-lone")
    assert (await store.create_follow_up(lone.id, "r-lone", {}, owner=PROCESS_OWNER, action="interrupt"))[1] == 0
    assert await store.cancel_requests(["r-1", "r-2", "r-3", "r-lone"]) == {"r-1": "interrupt", "r-2": "interrupt"}

    assert await store.request_cancel("interrupt", run_id="r-done") == 0
    assert await store.request_cancel("rollback", run_id="r-other") == 1
    assert await store.cancel_requests(["r-other"]) == {"r-other": "rollback"}
    assert await store.cancel_requests([]) == {}


async def test_startup_recovery_interrupts_a_dead_owners_runs_and_settles_busy_threads(store: HostStore) -> None:
    dead, alive = await store.create_thread(thread_id="t-dead"), await store.create_thread(thread_id="t-alive")
    await store.create_run(dead.id, "r-dead", {}, owner="gone")
    await store.mark_started("r-dead", dead.id)
    await store.create_run(alive.id, "r-alive", {}, owner="here")
    await store.mark_started("r-alive", alive.id)

    assert await store.interrupt_orphaned_runs(is_dead=lambda owner: owner == "gone") == ("r-dead",)
    run = await store.get_run(dead.id, "r-dead")
    assert (run.status, run.outcome) == ("interrupted", "aborted")
    assert run.error == "the process running it stopped before it finished"
    assert (await store.get_thread(dead.id)).status == "interrupted"
    assert (await store.get_run(alive.id, "r-alive")).status == "running"
    assert await store.interrupt_orphaned_runs(is_dead=lambda owner: False) == ()

    # A thread left busy with no live run gets its last run's status back; a busy one keeps it.
    await store.finish_run("r-alive", status="success", outcome="completed")
    assert (await store.get_thread(alive.id)).status == "busy"
    assert await store.settle_idle_busy_threads() == ("t-alive",)
    assert (await store.get_thread(alive.id)).status == "idle"
    assert await store.settle_idle_busy_threads() == ()


def test_an_owner_is_dead_when_its_process_is_gone_on_this_host_only() -> None:
    host = socket.gethostname()
    assert owner_is_dead(None) is True
    assert owner_is_dead(PROCESS_OWNER) is False, "this process"
    assert owner_is_dead(f"{host}:{os.getpid()}:earlier") is True, "our pid, an earlier start"
    assert owner_is_dead(f"{host}:{os.getppid()}:x") is False, "a live process on this host"
    assert owner_is_dead(f"{host}:not-a-pid:x") is True
    assert owner_is_dead(f"{host}:{2**22 + 12345}:x") is True, "no such pid"
    assert owner_is_dead("another-host:1:x") is False, "another machine is left alone"


async def test_startup_recovery_finds_the_temporary_threads_a_dead_owner_left(store: HostStore) -> None:
    """The threads of stateless runs (``TEMPORARY`` on the run's row) whose owner is gone and
    that no run holds; a thread a live owner's run marks, or a live run holds, stays."""
    temporary = {TEMPORARY: True}
    cases = {
        "t-orphaned": ("gone", temporary, "running"),  # killed mid-run
        "t-ended": ("gone", temporary, "success"),  # killed before the deletion
        "t-kept": ("gone", {"on_completion": "keep"}, "success"),
        "t-mine": ("here", temporary, "success"),  # a live process deletes it itself
        "t-marked-false": ("gone", {TEMPORARY: False}, "success"),
    }
    for thread_id, (owner, request, status) in cases.items():
        await store.create_thread(thread_id=thread_id)
        await store.create_run(thread_id, f"r-{thread_id}", request, owner=owner)
        await store.mark_started(f"r-{thread_id}", thread_id)
        if status != "running":
            await store.finish_run(f"r-{thread_id}", status=status, outcome="completed")
    # A follow-up run of a live process holds the thread of an ended temporary run.
    await store.create_thread(thread_id="t-held")
    await store.create_run("t-held", "r-first", temporary, owner="gone")
    await store.create_run("t-held", "r-follow-up", {}, owner="here")

    def dead(owner: str | None) -> bool:
        return owner == "gone"

    assert await store.temporary_threads_left(is_dead=dead) == ("t-ended",)  # t-orphaned's run is live
    await store.interrupt_orphaned_runs(is_dead=dead)
    assert await store.temporary_threads_left(is_dead=dead) == ("t-ended", "t-orphaned")
