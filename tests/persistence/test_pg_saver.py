"""The PostgreSQL checkpointer (``persistence/pg_saver.py``) against LangGraph's own async saver.

The saver is LangGraph's ``PostgresSaver`` on one-connection pools, each on a thread of its
own (one by default; the checks of its sharding ask for :data:`SHARDS`), its writes from
its event loop sent by asyncpg (``pg_loop_writes``), so the checks are: the same
operations leave the same rows and read back the same tuples as ``AsyncPostgresSaver``
(what the Gateway used before); writes waiting together go together, on the loop and on a
thread; on a thread a LangGraph thread's operations stay on one connection while different
threads spread over all of them; the checkpointer carries on after PostgreSQL terminates
its sessions (a restart), which the single connection before it never did; Gateways
starting together set the tables up once.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any

import asyncpg
import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from test_sqlite_saver import _alist, _plain, _write_history

from deerflow_ext.adapters.langgraph_postgres_private import Statement
from deerflow_ext.persistence import pg_loop_writes, pg_saver
from deerflow_ext.persistence.pg_saver import CONNECTIONS, ShardedPostgresSaver, open_postgres_saver
from pg_support import PG_ADMIN, PG_UNREACHABLE, fresh_database

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(PG_UNREACHABLE is not None, reason=PG_UNREACHABLE or ""),
]

LOCK_KEY = 0x7465737473  # this module's own setup lock
SHARDS = 3
"""Connections the saver under test spreads threads over: more than the Gateway's one, so
the sharding and every shard's batching and recovery are exercised."""


def _conninfo(database: str) -> str:
    return f"postgresql://postgres@127.0.0.1:5432/{database}"


@pytest.fixture
def databases() -> Iterator[tuple[str, str]]:
    with fresh_database() as ours, fresh_database() as theirs:
        yield _conninfo(ours), _conninfo(theirs)


@pytest.fixture
async def savers(
    request: pytest.FixtureRequest, databases: tuple[str, str]
) -> AsyncIterator[tuple[ShardedPostgresSaver, AsyncPostgresSaver]]:
    """Ours on :data:`SHARDS` connections (a test may ask for another count, indirectly),
    and LangGraph's own async saver on the second database."""
    ours, theirs = databases
    async with open_postgres_saver(ours, lock_key=LOCK_KEY, connections=getattr(request, "param", SHARDS)) as saver:
        async with AsyncPostgresSaver.from_conn_string(theirs) as reference:
            await reference.setup()
            yield saver, reference


def _rows(conninfo: str) -> list[list[Any]]:
    queries = (
        "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata "
        "FROM checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id",
        "SELECT thread_id, checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs "
        "ORDER BY thread_id, checkpoint_ns, channel, version",
        "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path "
        "FROM checkpoint_writes ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx",
    )
    with psycopg.connect(conninfo) as conn:
        return [conn.execute(query).fetchall() for query in queries]


async def test_the_same_operations_leave_the_same_rows_and_read_the_same_as_langgraphs_async_saver(
    databases: tuple[str, str], savers: tuple[ShardedPostgresSaver, AsyncPostgresSaver]
) -> None:
    reads = []
    for target in savers:
        await _write_history(target, "t-1", 5)
        await _write_history(target, "t-2", 3, ns="child:1")
        await _write_history(target, "gone", 2)
        await target.adelete_thread("gone")
        await _write_history(target, "pruned", 3)
        await target.aprune(["pruned"])
        config = {"configurable": {"thread_id": "t-1", "checkpoint_ns": ""}}
        reads.append(
            (
                _plain(await target.aget_tuple(config)),
                await _alist(target, config),
                await _alist(target, config, limit=2),
                await _alist(target, None, filter={"source": "loop"}),
                await _alist(target, {"configurable": {"thread_id": "gone"}}),
                await _alist(target, {"configurable": {"thread_id": "pruned"}}),
            )
        )
    ours, theirs = databases
    assert _rows(ours) == _rows(theirs)
    assert _rows(ours)[0], "nothing was written"
    assert reads[0] == reads[1]
    assert len(reads[0][1]) == 5 and len(reads[0][3]) == 9 and len(reads[0][5]) == 1


def _handed_to_threads(saver: ShardedPostgresSaver, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What ``saver`` hands its threads from now on (each call's function)."""
    handed: list[Any] = []
    for _shard, thread in saver.shards:

        def spied(fn: Any, /, *args: Any, _run: Any = thread.run, **kwargs: Any) -> Any:
            handed.append(fn)
            return _run(fn, *args, **kwargs)

        monkeypatch.setattr(thread, "run", spied)
    return handed


def _reads(thread_id: str, ns: str = "", checkpoint_id: str | None = None) -> dict[str, Any]:
    configurable = {"thread_id": thread_id, "checkpoint_ns": ns}
    return {"configurable": configurable if checkpoint_id is None else {**configurable, "checkpoint_id": checkpoint_id}}


async def test_a_checkpoint_is_read_from_the_loop_as_langgraphs_saver_reads_it(
    savers: tuple[ShardedPostgresSaver, AsyncPostgresSaver], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read each run starts with goes by asyncpg from the loop, no thread (``pg_loop_reads``)."""
    saver, reference = savers
    for target in savers:  # checkpoints as a graph writes them (version 4)
        await _write_history(target, "t-1", 3, version=4)
        await _write_history(target, "t-2", 2, ns="child:1", version=4)
    first = (await _alist(reference, _reads("t-1")))[-1][0]["configurable"]["checkpoint_id"]
    handed = _handed_to_threads(saver, monkeypatch)
    for config in (
        _reads("t-1"),
        _reads("t-1", checkpoint_id=first),
        _reads("t-2", "child:1"),
        _reads("t-2"),  # another namespace: none
        _reads("nobody"),
        _reads("t-1", checkpoint_id="no-such-checkpoint"),
    ):
        assert _plain(await saver.aget_tuple(config)) == _plain(await reference.aget_tuple(config)), config
    assert handed == []


async def test_a_checkpoint_langgraph_reads_more_for_and_reads_from_another_loop_go_to_the_thread(
    databases: tuple[str, str],
    savers: tuple[ShardedPostgresSaver, AsyncPostgresSaver],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A checkpoint from before LangGraph's version 4 (it migrates pending sends, with a second
    query) is read LangGraph's way, and so is any read from a loop the reads are not bound to."""
    saver, reference = savers
    for target in savers:
        await _write_history(target, "old", 2, version=3)
    handed = _handed_to_threads(saver, monkeypatch)
    ours = await saver.aget_tuple(_reads("old"))
    assert ours is not None and ours.checkpoint["v"] == 3
    assert _plain(ours) == _plain(await reference.aget_tuple(_reads("old")))
    assert handed == [saver.get_tuple]
    from_elsewhere = await asyncio.to_thread(asyncio.run, saver.aget_tuple(_reads("old")))
    assert _plain(from_elsewhere) == _plain(ours)
    assert handed == [saver.get_tuple] * 2


async def test_one_threads_operations_stay_on_one_connection_and_threads_spread_over_all(
    savers: tuple[ShardedPostgresSaver, AsyncPostgresSaver],
) -> None:
    saver, _ = savers
    assert len(saver.shards) == SHARDS
    saver.loop_writes = None  # writes as from a loop other than the saver's: on the shards
    where: dict[str, set[int]] = {}
    for shard, _thread in saver.shards:
        put = shard.put

        def spied(config: Any, *args: Any, _put: Any = put) -> Any:
            where.setdefault(config["configurable"]["thread_id"], set()).add(threading.get_ident())
            return _put(config, *args)

        shard.put = spied  # type: ignore[method-assign]
    threads = [f"thread-{n}" for n in range(24)]
    await asyncio.gather(*(_write_history(saver, thread_id, 6) for thread_id in threads))
    assert all(len(ran_on) == 1 for ran_on in where.values()), where
    assert set().union(*where.values()) == {thread.ident for _, thread in saver.shards}
    for thread_id in threads:  # each chain intact: its order was kept
        items = await _alist(saver, {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        parents = [item[3]["configurable"]["checkpoint_id"] for item in items[:-1]]
        assert parents == [item[0]["configurable"]["checkpoint_id"] for item in items[1:]]


async def _write_connection_held(saver: ShardedPostgresSaver) -> tuple[asyncio.Queue[Any], Any]:
    """The saver's loop write connection, out of its slot: nothing is sent until it is back."""
    assert saver.loop_writes is not None
    slots = saver.loop_writes._connection._slots
    return slots, await slots.get()


async def test_writes_waiting_on_the_loop_go_in_one_batch_and_leave_langgraphs_rows(
    databases: tuple[str, str],
    savers: tuple[ShardedPostgresSaver, AsyncPostgresSaver],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    saver, reference = savers
    assert saver.loop_writes is not None
    batches: list[int] = []
    calls: list[str] = []
    send = pg_loop_writes._send

    async def counted(statements: Any, connection: Any) -> None:
        batches.append(len(statements))
        await send(statements, _Counting(connection, calls))

    monkeypatch.setattr(pg_loop_writes, "_send", counted)
    # The connection busy while the first writes queue up behind it.
    slots, held = await _write_connection_held(saver)

    async def release() -> None:
        slots.put_nowait(held)

    await _write_held_back(databases, saver, reference, release)
    # The 16 first puts (a blobs and a checkpoint statement each) went in at most two
    # batches, and the writes in four or more a batch on the whole.
    assert sum(batches[:2]) >= 2 * len(BATCHED), batches
    assert len(batches) <= WRITES // 4, (len(batches), WRITES)
    # Each batch in one statement (joined_upserts), whatever it held.
    assert calls == ["execute"] * len(batches), calls


class _Counting:
    """An asyncpg connection that notes which of its statement methods are called."""

    def __init__(self, connection: asyncpg.Connection, calls: list[str]) -> None:
        self._connection = connection
        self._calls = calls

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)

    async def execute(self, *args: Any) -> Any:
        self._calls.append("execute")
        return await self._connection.execute(*args)

    async def executemany(self, *args: Any) -> Any:
        self._calls.append("executemany")
        return await self._connection.executemany(*args)


@pytest.mark.parametrize("savers", [CONNECTIONS, SHARDS], indirect=True, ids=["gateway-default", "sharded"])
async def test_writes_waiting_on_a_thread_go_in_one_round_trip_and_leave_langgraphs_rows(
    databases: tuple[str, str], savers: tuple[ShardedPostgresSaver, AsyncPostgresSaver]
) -> None:
    saver, reference = savers
    saver.loop_writes = None  # writes as from a loop other than the saver's: on the shards
    sends: list[int] = []
    for shard, _thread in saver.shards:

        def counted(statements: Any, _send: Any = shard.send) -> None:
            sends.append(len(statements))
            _send(statements)

        shard.send = counted  # type: ignore[method-assign]
    released = threading.Event()
    # Every connection's thread busy while the first writes queue up behind it.
    holds = [asyncio.ensure_future(thread.run(released.wait, 5)) for _, thread in saver.shards]

    async def release() -> None:
        released.set()
        await asyncio.gather(*holds)

    await _write_held_back(databases, saver, reference, release)
    # At least the 16 first puts went out in one round trip per connection.
    assert len(sends) <= WRITES - (len(BATCHED) - len(saver.shards)), (len(sends), WRITES)


BATCHED = [f"batched-{n}" for n in range(16)]
WRITES = len(BATCHED) * 4 * 2  # a put and a put_writes a checkpoint


async def _write_held_back(
    databases: tuple[str, str], saver: Any, reference: Any, release: Callable[[], Awaitable[None]]
) -> None:
    """:data:`BATCHED`'s histories written by ``saver``, their first writes held back until
    ``release``, then by LangGraph's own saver: both leave the same rows."""
    writing = asyncio.gather(*(_write_history(saver, thread_id, 4) for thread_id in BATCHED))
    await asyncio.sleep(0.1)
    await release()
    await writing
    for thread_id in BATCHED:
        await _write_history(reference, thread_id, 4)
    ours, theirs = databases
    assert _rows(ours) == _rows(theirs)


def _named(statement: Statement) -> Statement:
    """``statement`` with psycopg's named placeholders (``%(p0)s``...) in place of ``%s``."""
    parts = statement.query.split("%s")
    query = "".join(part + (f"%(p{n})s" if n < len(parts) - 1 else "") for n, part in enumerate(parts))
    rows = tuple({f"p{n}": value for n, value in enumerate(row)} for row in statement.rows)
    return Statement(query, rows, statement.many)


async def test_writes_whose_placeholders_asyncpg_cannot_take_go_through_psycopg(
    databases: tuple[str, str],
    savers: tuple[ShardedPostgresSaver, AsyncPostgresSaver],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A LangGraph that wrote its SQL with named placeholders: the same rows, by the thread."""
    saver, reference = savers
    for shard, _thread in saver.shards:

        def recorded_named(write: Any, *args: Any, _record: Any = shard.record) -> Any:
            result, statements = _record(write, *args)
            return result, [_named(statement) for statement in statements]

        monkeypatch.setattr(shard, "record", recorded_named)
    sent_from_the_loop: list[Any] = []
    monkeypatch.setattr(pg_loop_writes, "_send", lambda *args: sent_from_the_loop.append(args))
    await asyncio.gather(*(_write_history(saver, f"named-{n}", 3) for n in range(4)))
    for n in range(4):
        await _write_history(reference, f"named-{n}", 3)
    ours, theirs = databases
    assert _rows(ours) == _rows(theirs)
    assert sent_from_the_loop == []


def _put(thread_id: str, n: int, **metadata: Any) -> tuple[Any, ...]:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = f"1f000000-0000-6000-8000-{n:012d}"
    checkpoint["channel_values"] = {"items": [n]}
    checkpoint["channel_versions"] = {"items": n}
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    return config, checkpoint, {"step": n, **metadata}, {"items": n}


@pytest.mark.parametrize(
    "refused",
    [
        pytest.param(_put("bad\x00thread", 2), id="by-psycopg-before-sending"),  # no NUL in a text
        pytest.param(_put("bad-thread", 2, score=float("nan")), id="by-postgresql"),  # no NaN in a jsonb
    ],
)
async def test_a_write_refused_in_a_batch_fails_alone_and_the_others_are_written(
    databases: tuple[str, str], refused: tuple[Any, ...]
) -> None:
    ours, _ = databases
    good = {"configurable": {"thread_id": "good-1", "checkpoint_ns": "", "checkpoint_id": "c-1"}}
    async with open_postgres_saver(ours, lock_key=LOCK_KEY) as saver:
        batch = [
            (saver, "put", _put("good-1", 1)),
            (saver, "put", refused),
            (saver, "put_writes", (good, [("items", 1)], "task", "")),
            (saver, "put", _put("good-3", 3)),
        ]
        outcomes = await saver.thread.run(pg_saver._write_batch, batch)
    assert [error is None for _, error in outcomes] == [True, False, True, True], outcomes
    assert isinstance(outcomes[1][1], psycopg.Error)
    _assert_only_the_good_ones(ours)


@pytest.mark.parametrize(
    "refused",
    [
        pytest.param(_put("bad\x00thread", 2), id="no-nul-in-a-text"),
        pytest.param(_put("bad-thread", 2, score=float("nan")), id="no-nan-in-a-jsonb"),
    ],
)
async def test_a_write_refused_in_a_loop_batch_fails_alone_and_the_others_are_written(
    databases: tuple[str, str], refused: tuple[Any, ...]
) -> None:
    ours, _ = databases
    good = {"configurable": {"thread_id": "good-1", "checkpoint_ns": "", "checkpoint_id": "c-1"}}
    async with open_postgres_saver(ours, lock_key=LOCK_KEY) as saver:
        await saver.aput(*_put("warm-up", 0))  # the connection is open and idle
        slots, held = await _write_connection_held(saver)  # the four below wait, then go in one batch
        writing = asyncio.gather(
            saver.aput(*_put("good-1", 1)),
            saver.aput(*refused),
            saver.aput_writes(good, [("items", 1)], "task", ""),
            saver.aput(*_put("good-3", 3)),
            return_exceptions=True,
        )
        await asyncio.sleep(0.05)
        slots.put_nowait(held)
        outcomes = await writing
    assert [not isinstance(outcome, BaseException) for outcome in outcomes] == [True, False, True, True], outcomes
    assert isinstance(outcomes[1], asyncpg.PostgresError)
    _assert_only_the_good_ones(ours, also=["warm-up"])


def _assert_only_the_good_ones(conninfo: str, also: Sequence[str] = ()) -> None:
    with psycopg.connect(conninfo) as conn:
        written = conn.execute("SELECT thread_id FROM checkpoints ORDER BY thread_id").fetchall()
        writes = conn.execute("SELECT thread_id, checkpoint_id, task_id FROM checkpoint_writes").fetchall()
    assert written == sorted([("good-1",), ("good-3",), *((thread,) for thread in also)])
    assert writes == [("good-1", "c-1", "task")]


def _terminate_sessions(database: str) -> int:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchone()
    return int(row[0]) if row else 0


async def test_the_checkpointer_carries_on_after_postgresql_terminates_its_sessions(
    databases: tuple[str, str],
) -> None:
    ours, _ = databases
    async with open_postgres_saver(ours, lock_key=LOCK_KEY, connections=SHARDS) as saver:
        await asyncio.gather(*(_write_history(saver, f"before-{n}", 2) for n in range(8)))
        assert _terminate_sessions(ours.rsplit("/", 1)[1]) >= SHARDS
        await asyncio.sleep(0.2)  # the notices and ends of stream have reached the sockets
        # Not one operation fails: each closed connection is noticed and replaced at checkout.
        await asyncio.gather(*(_write_history(saver, f"after-{n}", 2) for n in range(8)))
        for n in range(8):
            config = {"configurable": {"thread_id": f"after-{n}", "checkpoint_ns": ""}}
            assert len(await _alist(saver, config)) == 2


async def test_a_loop_batch_whose_connection_was_lost_unnoticed_goes_again_on_a_new_one(
    databases: tuple[str, str],
) -> None:
    ours, _ = databases
    async with open_postgres_saver(ours, lock_key=LOCK_KEY) as saver:
        assert saver.loop_writes is not None
        await saver.aput(*_put("before", 1))
        slots = saver.loop_writes._connection._slots
        connection = slots.get_nowait()
        slots.put_nowait(connection)
        pid = connection.get_server_pid()
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:  # synchronous: the loop reads nothing meanwhile
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
                threading.Event().wait(0.01)
        assert not connection.is_closed(), "the loop has not noticed yet"
        await saver.aput(*_put("after", 2))
        replaced = slots.get_nowait()
        slots.put_nowait(replaced)
        assert replaced is not connection
    with psycopg.connect(ours) as conn:
        written = conn.execute("SELECT thread_id FROM checkpoints ORDER BY thread_id").fetchall()
    assert written == [("after",), ("before",)]


def test_the_checkout_check_replaces_only_a_connection_the_server_closed(databases: tuple[str, str]) -> None:
    ours, _ = databases
    with psycopg.connect(ours, autocommit=True) as healthy:
        healthy.execute("SELECT 1")
        pg_saver._still_open(healthy)  # type: ignore[arg-type]
        assert not healthy.closed
    with psycopg.connect(ours, autocommit=True) as doomed:
        pid = doomed.info.backend_pid
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        for _ in range(50):
            try:
                pg_saver._still_open(doomed)  # type: ignore[arg-type]
            except psycopg.OperationalError:
                break
            threading.Event().wait(0.02)
        else:
            raise AssertionError("a terminated session passed the check")
        assert doomed.closed  # closed by the check, so the pool discards it


async def test_gateways_starting_together_set_the_tables_up_once_between_them(databases: tuple[str, str]) -> None:
    ours, _ = databases

    async def start() -> int:
        async with open_postgres_saver(ours, lock_key=LOCK_KEY, connections=2) as saver:
            await _write_history(saver, f"t-{id(saver)}", 1)
            return len(saver.shards)

    assert await asyncio.gather(*(start() for _ in range(3))) == [2, 2, 2]
    with psycopg.connect(ours) as conn:
        versions = [v for (v,) in conn.execute("SELECT v FROM checkpoint_migrations ORDER BY v").fetchall()]
    assert versions == sorted(set(versions)) and versions, "each migration recorded once"


def test_every_async_method_langgraphs_async_saver_has_is_ours_too() -> None:
    """A LangGraph upgrade that gives ``AsyncPostgresSaver`` a new async method would leave
    ours answering with ``PostgresSaver``'s or the base class's ``NotImplementedError``."""
    import inspect

    theirs = {
        name
        for name, member in vars(AsyncPostgresSaver).items()
        if inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member)
    }
    # async there, sync here (run on the first shard's thread at opening); _cursor and
    # _load_checkpoint_tuple are AsyncPostgresSaver's private helpers.
    theirs -= {"setup", "from_conn_string", "_cursor", "_load_checkpoint_tuple"}
    ours = {
        name
        for name in theirs
        if getattr(ShardedPostgresSaver, name).__qualname__.startswith(("ShardedPostgresSaver.", "OnThreads."))
    }
    assert theirs - ours == set(), f"AsyncPostgresSaver has async methods we lack: {theirs - ours}"


async def test_in_a_runs_scope_writes_are_acknowledged_once_queued_and_all_written_at_its_end(
    databases: tuple[str, str], savers: tuple[ShardedPostgresSaver, AsyncPostgresSaver]
) -> None:
    saver, reference = savers
    ours, theirs = databases
    warm_up = _put("warm-up", 0)
    await saver.aput(*warm_up)  # the connection is open
    await reference.aput(*warm_up)
    slots, held = await _write_connection_held(saver)  # nothing goes out while the writes are made
    async with saver.writes_behind():
        # Each write acknowledged queued: waiting for its commit would wait for ever here.
        await asyncio.wait_for(_write_history(saver, "behind", 3, version=4), 5)
        assert [row[0] for row in _rows(ours)[0]] == ["warm-up"]
        slots.put_nowait(held)
    assert [row[0] for row in _rows(ours)[0]] == ["behind"] * 3 + ["warm-up"]  # all in at the end
    await _write_history(reference, "behind", 3, version=4)
    assert _rows(ours) == _rows(theirs)


async def test_a_read_in_a_runs_scope_sees_the_writes_queued_before_it(
    savers: tuple[ShardedPostgresSaver, AsyncPostgresSaver],
) -> None:
    saver, _ = savers
    slots, held = await _write_connection_held(saver)
    async with saver.writes_behind():
        saved = await saver.aput(*_put("seen", 1))
        asyncio.get_running_loop().call_later(0.2, slots.put_nowait, held)
        read = await saver.aget_tuple(_reads("seen"))
        listed = await _alist(saver, _reads("seen"))
    assert read is not None and read.config == saved
    assert len(listed) == 1


async def test_a_write_of_no_rows_in_a_batch_sends_nothing_and_fails_nothing(
    databases: tuple[str, str], savers: tuple[ShardedPostgresSaver, AsyncPostgresSaver]
) -> None:
    """``put_writes`` of no writes records an ``executemany`` of no rows: joined with the
    other writes of its batch, it must be left out, not sent as a kind with no arrays."""
    saver, _ = savers
    put = _put("quiet", 1)  # one checkpoint (its timestamp) for both
    for target in savers:
        async with target.writes_behind() if target is saver else contextlib.nullcontext():
            saved = await target.aput(*put)
            await target.aput_writes(saved, [], "task", "")
    ours, theirs = databases
    assert _rows(ours) == _rows(theirs)


def _checkpointed(conninfo: str) -> list[str]:
    with psycopg.connect(conninfo) as conn:
        return [thread for (thread,) in conn.execute("SELECT thread_id FROM checkpoints ORDER BY thread_id")]


def _batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many statements each batch sent from now on carries."""
    batches: list[int] = []
    send = pg_loop_writes._send

    async def counted(statements: Any, connection: Any) -> None:
        batches.append(len(statements))
        await send(statements, connection)

    monkeypatch.setattr(pg_loop_writes, "_send", counted)
    return batches


def _gathering(
    savers: tuple[ShardedPostgresSaver, AsyncPostgresSaver], databases: tuple[str, str], seconds: float
) -> tuple[ShardedPostgresSaver, str]:
    """Our saver, its loop writes gathered for ``seconds``, and its database."""
    saver, _ = savers
    assert saver.loop_writes is not None
    saver.loop_writes.gather = seconds
    return saver, databases[0]


async def test_in_a_runs_scope_writes_wait_to_go_together_until_something_waits_for_them(
    databases: tuple[str, str],
    savers: tuple[ShardedPostgresSaver, AsyncPostgresSaver],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    saver, ours = _gathering(savers, databases, 60.0)  # sent only when something waits for them
    await asyncio.wait_for(saver.aput(*_put("outside", 0)), 5)  # no scope: its caller waits, so at once
    batches = _batches(monkeypatch)
    async with asyncio.timeout(10):
        async with saver.writes_behind():
            for n in (1, 2):
                await saver.aput(*_put(f"gathered-{n}", n))
            await asyncio.sleep(0.2)
            assert _checkpointed(ours) == ["outside"]  # still gathering
            assert await saver.aget_tuple(_reads("gathered-2")) is not None  # a read sends them
            assert _checkpointed(ours) == ["gathered-1", "gathered-2", "outside"]
            await saver.aput(*_put("gathered-3", 3))
            await asyncio.sleep(0.2)
            assert "gathered-3" not in _checkpointed(ours)
        assert "gathered-3" in _checkpointed(ours)  # the scope's end sent the last
    assert batches == [4, 2], batches  # a put: its blob and its checkpoint


async def test_a_write_outside_any_scope_takes_the_gathered_writes_along(
    databases: tuple[str, str], savers: tuple[ShardedPostgresSaver, AsyncPostgresSaver]
) -> None:
    saver, ours = _gathering(savers, databases, 60.0)
    await saver.aput(*_put("warm-up", 0))

    async def in_a_scope() -> None:
        async with saver.writes_behind():
            await saver.aput(*_put("scoped", 1))
            await asyncio.sleep(60)  # the run goes on; its write waits to be gathered

    run = asyncio.create_task(in_a_scope())
    await asyncio.sleep(0.1)
    await asyncio.wait_for(saver.aput(*_put("unscoped", 2)), 5)
    assert _checkpointed(ours) == ["scoped", "unscoped", "warm-up"]
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run


async def test_gathered_writes_go_once_the_gathering_time_is_up_with_nobody_waiting(
    databases: tuple[str, str], savers: tuple[ShardedPostgresSaver, AsyncPostgresSaver]
) -> None:
    saver, ours = _gathering(savers, databases, 0.1)
    async with asyncio.timeout(10):
        async with saver.writes_behind():
            await saver.aput(*_put("on-time", 1))
            while _checkpointed(ours) != ["on-time"]:  # noqa: ASYNC110  (another connection: nobody waits for it)
                await asyncio.sleep(0.05)


async def test_a_write_that_fails_in_a_runs_scope_fails_the_scope_and_its_later_writes_stay_unsent(
    databases: tuple[str, str], savers: tuple[ShardedPostgresSaver, AsyncPostgresSaver]
) -> None:
    """As LangGraph sends no checkpoint after one that failed, and the run fails with it."""
    saver, _ = savers
    ours, _ = databases
    await saver.aput(*_put("warm-up", 0))
    slots, held = await _write_connection_held(saver)  # the three go in one batch
    with pytest.raises(asyncpg.PostgresError):  # NaN in a jsonb
        async with saver.writes_behind():
            await saver.aput(*_put("good-1", 1))
            await saver.aput(*_put("bad-thread", 2, score=float("nan")))
            await saver.aput(*_put("after-bad", 3))
            slots.put_nowait(held)
            await saver.loop_writes.idle()
            with pytest.raises(RuntimeError, match="an earlier checkpoint write of this run failed"):
                await saver.aput(*_put("later", 4))
    await saver.aput(*_put("outside", 5))  # another scope's, or none: written as ever
    with psycopg.connect(ours) as conn:
        written = conn.execute("SELECT thread_id FROM checkpoints ORDER BY thread_id").fetchall()
    assert written == [("good-1",), ("outside",), ("warm-up",)]


async def test_a_scope_over_two_write_connections_waits_for_both_whichever_settles_last(
    databases: tuple[str, str],
) -> None:
    """A scope's end awaits its last write directly, since one connection settles writes in
    the order they were queued; writes of another connection settle in no such order, and
    the end still waits for every one of them."""
    ours, _ = databases
    with psycopg.connect(ours, autocommit=True) as conn:
        conn.execute("CREATE TABLE marks (v int)")
    first, second = pg_loop_writes.PgLoopWrites.to(ours), pg_loop_writes.PgLoopWrites.to(ours)

    def mark(value: int) -> list[Statement]:
        return [Statement("INSERT INTO marks (v) VALUES (%s)", ((value,),), False)]

    try:
        await first.send(mark(0))  # both connections open
        await second.send(mark(0))
        slots = first._connection._slots
        held = await slots.get()  # the first connection's write waits
        async with asyncio.timeout(10):
            async with pg_loop_writes.writes_behind():
                await first.send(mark(1))
                await second.send(mark(2))  # the last queued, written at once
                await second.idle()
                asyncio.get_running_loop().call_later(0.2, slots.put_nowait, held)
        with psycopg.connect(ours) as conn:
            assert sorted(v for (v,) in conn.execute("SELECT v FROM marks")) == [0, 0, 1, 2]
    finally:
        await first.aclose()
        await second.aclose()
