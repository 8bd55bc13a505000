"""``ItemStore``: LangGraph's ``BaseStore`` over the host database's ``store_items`` table.

One store serves both doors: the Gateway's ``/store`` routes (what ``langgraph_sdk``'s
``client.store`` calls) and the graph runtime (``runtime.store`` in a tool or a middleware),
so an agent reads what a client wrote and the other way round, across restarts and, on
PostgreSQL, across Gateway processes.

How it runs, for the reasons ``transactions`` and ``loop_statements`` give: a batch is one
transaction function (SQLite: on the engine's synchronous twin, its own connection and
loop-first thread; PostgreSQL: on the engine, through ``run_sync``); a lone put or get, what a
client and a tool send most, is one statement, which on PostgreSQL asyncpg sends straight
from the event loop and on SQLite goes compiled once to pysqlite, as a thread write does.
A search or a namespace listing, whose size a client sets, never runs on the event loop: on
SQLite it always goes to the connection's thread (``Transactions.read_aside``), and it reads
values by key, a few at a time, up to :data:`SEARCH_ANSWER_BYTES`.

Semantic search, with an index (``store.index`` in config.yaml: ``semantic.StoreIndex``): a
put embeds its value's configured fields (or the put's own ``index`` list; ``index=False``:
none) before anything is written, off the event loop, and writes the item and its vectors in
one transaction; a search with a ``query`` embeds it likewise and ranks by cosine similarity
(``item_vectors``), each item with its ``score``; filters, the namespace prefix, ``limit`` and
``offset`` apply as without one. With no index configured, ``SearchOp.query`` and
``PutOp.index`` are ignored, as LangGraph's own stores ignore them without an index (newest
first, ``score`` None), and a put is the one statement it always was.

TTL: a put with ``ttl`` (minutes) expires the item then; reads skip expired items and,
with ``refresh_ttl``, push the deadline forward by the item's ttl again. ``ttl_config``
(``store.ttl`` in config.yaml: ``default_ttl``, ``refresh_on_read``) is LangGraph's
``BaseStore.ttl_config``: what a put without ``ttl`` and a read without ``refresh_ttl`` get
through ``aput``/``aget``/``asearch`` (the graph's ``runtime.store``; the ``/store`` routes
ask :meth:`ItemStore.default_ttl` and :meth:`ItemStore.refresh_on_read`).
:meth:`ItemStore.sweep_expired` deletes what has expired, in bounded batches off the event
loop (the Gateway calls it at startup and every ``sweep_interval_minutes``: ``deerflow_ext.expiry``).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from sqlalchemy import (
    ColumnElement,
    Connection,
    LargeBinary,
    Text,
    bindparam,
    cast,
    delete,
    func,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from deerflow_ext.semantic import StoreIndex, embed_items, embed_query, texts_to_embed

from . import sqlite_statements
from .item_matching import (
    SEPARATOR,
    check_filter,
    check_labels,
    join_namespace,
    matches_conditions,
    matches_filter,
    split_namespace,
    truncate,
)
from .item_vectors import delete_vectors, has_pgvector, insert_vectors, ranked_keys, vector_rows
from .loop_statements import LoopStatements, aclose_after
from .models import utcnow
from .store_table import STORE_ITEMS
from .transactions import Transactions, transactions_for

__all__ = ["MAX_TTL_MINUTES", "SEARCH_ANSWER_BYTES", "SWEEP_BATCH", "SWEEP_BATCHES", "ItemStore"]

MAX_TTL_MINUTES = 100 * 366 * 24 * 60
"""The longest time to live a put may ask for: 100 years, in minutes. A deadline past what a
timestamp holds (year 9999) raised ``OverflowError`` mid-batch; longer is "keep it" (no ttl)."""

_T = STORE_ITEMS
_VALUE_CHUNK = 16  # items a search reads the values of at a time, until its page is full

SEARCH_ANSWER_BYTES = 16 * 1024 * 1024
"""The most bytes of values (as stored JSON) one search answers: a page ends before the item
that would pass it, though it always holds one item. ``limit: 1000`` over items of 200 KiB
answered 205 MB, built whole in memory more than once (746 MB at the peak). A client that
pages by ``offset`` goes on from ``offset`` + the items it got, as with any short page."""
_COLUMNS = (_T.c.prefix, _T.c.key, _T.c.value, _T.c.created_at, _T.c.updated_at, _T.c.ttl_minutes)

# Bound names are never a column's (``p_*``): SQLAlchemy would also SET them in an UPDATE.
_LIVE = or_(_T.c.expires_at.is_(None), _T.c.expires_at > bindparam("p_now"))
_SELECT_ITEM = select(*_COLUMNS).where(_T.c.prefix == bindparam("p_prefix"), _T.c.key == bindparam("p_key"), _LIVE)
_DELETE_ITEM = delete(_T).where(_T.c.prefix == bindparam("p_prefix"), _T.c.key == bindparam("p_key"))
_REFRESH_ITEM = (
    update(_T)
    .where(_T.c.prefix == bindparam("p_prefix"), _T.c.key == bindparam("p_key"))
    .values(expires_at=bindparam("p_expires_at"))
)
SWEEP_BATCH = 500
"""Expired items one sweep transaction deletes at most; a sweep takes batches until one
comes back short (or :data:`SWEEP_BATCHES` of them: the rest wait for the next sweep)."""
SWEEP_BATCHES = 200

# The oldest expired items, locked where they are (``SKIP LOCKED``: rows another process's
# sweep holds are skipped, so two processes never wait on each other's batch).
_EXPIRED = (
    select(_T.c.prefix, _T.c.key)
    .where(_T.c.expires_at <= bindparam("p_now"))
    .order_by(_T.c.expires_at)
    .limit(bindparam("p_limit"))
    .with_for_update(skip_locked=True)
)
_SWEEP = delete(_T).where(tuple_(_T.c.prefix, _T.c.key).in_(_EXPIRED.scalar_subquery()))


@functools.cache
def _upsert(dialect: str) -> Any:
    """Insert, or on the same namespace and key replace the value, keeping ``created_at``."""
    insert = postgresql.insert(_T) if dialect == "postgresql" else sqlite.insert(_T)
    changed = ("value", "updated_at", "expires_at", "ttl_minutes")
    return insert.on_conflict_do_update(
        index_elements=[_T.c.prefix, _T.c.key], set_={name: insert.excluded[name] for name in changed}
    )


def _aware(moment: datetime) -> datetime:
    # SQLite hands back the naive UTC text it stored.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _under(prefix: str, column: Any = _T.c.prefix) -> ColumnElement[bool]:
    """Rows whose namespace is ``prefix`` or lies under it, as a range on the primary key:
    in bytewise order (SQLite's; PostgreSQL's "C" collation on this column) every text that
    starts with "a.b." sorts at or after it and before "a.b/". (Not ``LIKE``: SQLite's
    ignores case, and a label may hold ``%`` or ``_``.)"""
    below = prefix + chr(ord(SEPARATOR) + 1)
    return or_(column == prefix, (column >= prefix + SEPARATOR) & (column < below))


def _expiry(now: datetime, ttl_minutes: float | None) -> datetime | None:
    return None if ttl_minutes is None else now + timedelta(minutes=ttl_minutes)


def _item(row: Any, kind: type[Item] = Item, score: float | None = None) -> Any:
    namespace = split_namespace(row.prefix)
    value = dict(row.value)
    created, updated = _aware(row.created_at), _aware(row.updated_at)
    if kind is SearchItem:
        return SearchItem(namespace, row.key, value, created, updated, score)
    return Item(namespace=namespace, key=row.key, value=value, created_at=created, updated_at=updated)


class _Semantic:
    """What a batch's semantic work computed before its transaction: each indexed put's
    vectors (by op; ``None``: the put is not indexed), each query's vector, and whether the
    PostgreSQL database has pgvector (asked once per store, in the first search)."""

    __slots__ = ("pgvector", "puts", "queries")

    def __init__(self) -> None:
        self.puts: dict[int, list[tuple[str, list[float]]] | None] = {}
        self.queries: dict[str, list[float]] = {}
        self.pgvector: bool | None = None


class _Batch:
    """One batch's ops run in order on one connection; the TTL refreshes its reads owe."""

    def __init__(self, conn: Connection, now: datetime, semantic: _Semantic | None = None) -> None:
        self.conn = conn
        self.dialect = conn.dialect.name
        self.now = now
        self.refresh: list[dict[str, Any]] = []
        self.semantic = semantic

    def run(self, op: Op) -> Result:
        if isinstance(op, PutOp):
            self.put(op)
            return None
        if isinstance(op, GetOp):
            return self.get(op)
        if isinstance(op, SearchOp):
            return self.search(op)
        if isinstance(op, ListNamespacesOp):
            return self.list_namespaces(op)
        raise TypeError(f"the store cannot run {type(op).__name__}")

    def put(self, op: PutOp) -> None:
        prefix = join_namespace(op.namespace)
        if op.value is None:
            self.conn.execute(_DELETE_ITEM, {"p_prefix": prefix, "p_key": op.key})  # its vectors: cascade
        else:
            self.conn.execute(_upsert(self.dialect), _put_row(op, prefix, self.now))
            if self.semantic is not None:  # the old value's vectors go, the new one's (if any) come
                delete_vectors(self.conn, prefix, op.key)
                embedded = self.semantic.puts.get(id(op))
                if embedded:
                    insert_vectors(self.conn, vector_rows(prefix, op.key, embedded, self.dialect))

    def get(self, op: GetOp) -> Item | None:
        params = {"p_prefix": join_namespace(op.namespace), "p_key": op.key, "p_now": self.now}
        row = self.conn.execute(_SELECT_ITEM, params).first()
        if row is None:
            return None
        self._owe_refresh(row, op.refresh_ttl)
        item: Item = _item(row)
        return item

    def search(self, op: SearchOp) -> list[SearchItem]:
        """One page, newest first: the page's keys in order first (the items' namespaces and
        keys alone: a sort of small rows, once), then their values by key, a few at a time,
        filtered here, until the page holds ``limit`` items or :data:`SEARCH_ANSWER_BYTES`
        of values. Never a value read twice or a scan re-sorted page by page (an ``OFFSET``
        that grows, as the filtered scan once was: 21 s for 1,000 items of 200 KiB)."""
        check_filter(op.filter)
        scores: dict[tuple[str, str], float | None] = {}
        query = self.semantic.queries.get(op.query) if self.semantic is not None and op.query else None
        ranked: Any = None
        ordered: Iterable[tuple[str, str]]
        if query is not None:
            # Read as the page fills: with a filter, every item is ranked (the filter runs
            # here), and fetching all of them first cost more than ranking them.
            ranked = self._ranked(op, query)
            ordered = _keeping_scores(ranked, scores)
        else:
            keys = select(_T.c.prefix, _T.c.key).where(_LIVE)
            if op.namespace_prefix:
                keys = keys.where(_under(join_namespace(op.namespace_prefix)))
            keys = keys.order_by(_T.c.updated_at.desc(), _T.c.prefix, _T.c.key)
            if not op.filter:
                keys = keys.limit(op.limit).offset(op.offset)
            ordered = [(prefix, key) for prefix, key in self.conn.execute(keys, {"p_now": self.now})]
        rows: list[Any] = []
        try:
            self._fill(op, iter(ordered), rows)
        finally:
            if ranked is not None:
                ranked.close()
        for row in rows:
            self._owe_refresh(row, op.refresh_ttl)
        return [_item(row, SearchItem, scores.get((row.prefix, row.key))) for row in rows]

    def _fill(self, op: SearchOp, pending: Iterator[tuple[str, str]], rows: list[Any]) -> None:
        """``rows`` filled with the page: the values of ``pending``'s keys read a chunk at a
        time, filtered and offset here, up to ``limit`` items or the answer's byte cap."""
        skipped = size = 0
        while chunk := list(itertools.islice(pending, _VALUE_CHUNK)):
            found = {(row.prefix, row.key): row for row in self.conn.execute(_values_of(chunk, self.dialect))}
            for at in chunk:
                row = found.get(at)
                if row is None or (op.filter and not matches_filter(row.value, op.filter)):
                    continue
                if op.filter and skipped < op.offset:
                    skipped += 1
                    continue
                if len(rows) >= op.limit or (rows and size + row.size > SEARCH_ANSWER_BYTES):
                    break
                rows.append(row)
                size += row.size
            else:
                continue
            break

    def _ranked(self, op: SearchOp, query: list[float]) -> Any:
        """The search's ``(namespace, key, score)`` rows best first (``item_vectors.ranked_keys``),
        an open result the caller closes."""
        assert self.semantic is not None
        if self.dialect == "postgresql" and self.semantic.pgvector is None:
            self.semantic.pgvector = has_pgvector(self.conn)
        prefix = join_namespace(op.namespace_prefix) if op.namespace_prefix else None
        ranked = ranked_keys(
            self.conn,
            _LIVE,
            None if prefix is None else (lambda column: _under(prefix, column)),
            query,
            pgvector=bool(self.semantic.pgvector),
            limit=None if op.filter else op.limit,
            offset=op.offset,
            params={"p_now": self.now},
        )
        return ranked

    def list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        """Distinct namespaces: narrowed in SQL by the literal labels a prefix condition
        starts with, then matched, truncated to ``max_depth``, deduplicated and ordered here
        (distinct namespaces are few next to items)."""
        conditions = tuple(op.match_conditions or ())
        query = select(_T.c.prefix).where(_LIVE).distinct()
        for condition in conditions:
            literal = []
            for label in condition.path if condition.match_type == "prefix" else ():
                if label == "*":
                    break
                literal.append(label)
            if literal:
                query = query.where(_under(join_namespace(literal)))
        found: set[tuple[str, ...]] = set()
        for (prefix,) in self.conn.execute(query, {"p_now": self.now}):
            namespace = split_namespace(prefix)
            if matches_conditions(namespace, conditions):
                found.add(truncate(namespace, op.max_depth))
        return sorted(found)[op.offset : op.offset + op.limit]

    def _owe_refresh(self, row: Any, refresh: bool) -> None:
        if refresh and row.ttl_minutes is not None:
            self.refresh.append(
                {"p_prefix": row.prefix, "p_key": row.key, "p_expires_at": _expiry(self.now, row.ttl_minutes)}
            )


def _keeping_scores(ranked: Iterable[Any], scores: dict[tuple[str, str], float | None]) -> Iterator[tuple[str, str]]:
    for namespace, key, score in ranked:
        scores[(namespace, key)] = None if score is None else float(score)
        yield namespace, key


def _values_of(keys: list[tuple[str, str]], dialect: str) -> Any:
    """The items at ``keys`` (namespace, key), each with its value's size in bytes."""
    if dialect == "postgresql":
        size = func.octet_length(cast(_T.c.value, Text))
    else:  # the stored JSON text's bytes, read from its header, not counted character by character
        size = func.length(cast(_T.c.value, LargeBinary))
    return select(*_COLUMNS, size.label("size")).where(tuple_(_T.c.prefix, _T.c.key).in_(keys))


def _put_row(op: PutOp, prefix: str, now: datetime) -> dict[str, Any]:
    ttl = op.ttl if isinstance(op.ttl, int | float) and not isinstance(op.ttl, bool) else None
    return {
        "prefix": prefix,
        "key": op.key,
        "value": dict(op.value or {}),
        "created_at": now,
        "updated_at": now,
        "expires_at": _expiry(now, ttl),
        "ttl_minutes": None if ttl is None else float(ttl),
    }


def _check(op: Op) -> None:
    """Labels checked before anything is sent: joined with dots, a label holding one would
    address another namespace."""
    if isinstance(op, PutOp | GetOp):
        check_labels(op.namespace)
        if op.key is None or not isinstance(op.key, str):
            raise ValueError("key: an item's key must be a string")
        ttl = op.ttl if isinstance(op, PutOp) else None
        if isinstance(ttl, int | float) and not isinstance(ttl, bool) and not ttl <= MAX_TTL_MINUTES:
            raise ValueError(f"ttl: a time to live is at most {MAX_TTL_MINUTES} minutes (100 years), not {ttl!r}")
    elif isinstance(op, SearchOp):
        check_labels(op.namespace_prefix, field="namespace_prefix")
        check_filter(op.filter)
        if op.limit < 0 or op.offset < 0:
            raise ValueError("limit and offset cannot be negative")
    elif isinstance(op, ListNamespacesOp):
        for index, condition in enumerate(op.match_conditions or ()):
            check_labels(condition.path, field=f"match_conditions[{index}].path")
        if op.limit < 0 or op.offset < 0 or (op.max_depth is not None and op.max_depth < 1):
            raise ValueError("limit and offset cannot be negative, and max_depth must be at least 1")


def _last_puts(ops: Sequence[Op]) -> list[Op]:
    """``ops`` with a put superseded by a later put of the same item in the batch dropped
    (LangGraph's stores keep the last write of a batch)."""
    last: dict[tuple[tuple[str, ...], str], int] = {}
    for index, op in enumerate(ops):
        if isinstance(op, PutOp):
            last[(tuple(op.namespace), op.key)] = index
    return [
        op for index, op in enumerate(ops) if not isinstance(op, PutOp) or last[(tuple(op.namespace), op.key)] == index
    ]


class ItemStore(BaseStore):
    """The host's store: items in ``store_items``, on ``engine``'s database.

    ``transactions`` defaults to its own (``transactions_for``); :meth:`aclose`
    ends it. Built on the event loop that will use it: the synchronous methods (a sync tool
    in an executor thread) hand their batch to that loop and wait; on the loop itself use
    the ``a``-methods.
    """

    supports_ttl = True

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        transactions: Transactions | None = None,
        ttl_config: TTLConfig | None = None,
        index: StoreIndex | None = None,
    ) -> None:
        self.ttl_config = ttl_config
        self._tx = transactions if transactions is not None else transactions_for(engine)
        # Semantic search (``store.index``); None: ``query`` and ``index`` are ignored.
        self.index = index
        self._pgvector: bool | None = None
        self._pg = LoopStatements.for_engine(engine)
        self._dialect = "postgresql" if self._pg is not None else engine.dialect.name
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    async def aclose(self) -> None:
        await aclose_after(self._tx.aclose(), self._pg)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        loop = self._loop
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop or not loop.is_running():
            raise RuntimeError(
                "ItemStore's synchronous methods wait for its event loop: on that loop (or with none running) "
                "call aget/aput/asearch/alist_namespaces/adelete instead"
            )
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), loop).result()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        for op in ops:
            _check(op)
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        semantic = await self._embed(ops) if self.index is not None else None
        now = utcnow()
        if len(ops) == 1 and isinstance(ops[0], PutOp) and semantic is None:
            await self._put_one(ops[0], now)
            return [None]
        if len(ops) == 1 and isinstance(ops[0], GetOp) and self._pg is not None:
            return [await self._pg_get(ops[0], now)]
        writes = any(isinstance(op, PutOp) for op in ops)
        kept = _last_puts(ops) if writes else ops
        # A search or a namespace listing reads as much as the client asks: never on the loop.
        reads = self._tx.read_aside if any(isinstance(op, SearchOp | ListNamespacesOp) for op in ops) else self._tx.read
        by_op = await (self._tx.write if writes else reads)(_run_batch, kept, now, semantic)
        if semantic is not None and semantic.pgvector is not None:
            self._pgvector = semantic.pgvector
        if by_op.refresh:
            await self._tx.write(_refresh, by_op.refresh)
        results: dict[int, Result] = dict(zip(map(id, kept), by_op.results, strict=True))
        return [results.get(id(op)) for op in ops]

    async def _embed(self, ops: list[Op]) -> _Semantic:
        """The vectors of the batch's indexed puts and of its searches' queries, computed
        before its transaction opens (one model call for all the puts' texts)."""
        index = self.index
        assert index is not None
        semantic = _Semantic()
        semantic.pgvector = self._pgvector
        pending: list[tuple[int, list[str]]] = []
        texts: list[str] = []
        for op in ops:
            if not isinstance(op, PutOp) or op.value is None:
                continue
            fields = index.fields if op.index is None else (op.index or ())
            found = texts_to_embed(op.value, fields) if fields else []
            semantic.puts[id(op)] = None
            if found:
                pending.append((id(op), [text.field for text in found]))
                texts.extend(text.text for text in found)
        vectors = iter(await embed_items(index, texts))
        for op_id, names in pending:
            semantic.puts[op_id] = [(name, next(vectors)) for name in names]
        for query in {op.query for op in ops if isinstance(op, SearchOp) and op.query}:
            semantic.queries[query] = await embed_query(index, query)
        return semantic

    async def _put_one(self, op: PutOp, now: datetime) -> None:
        """One statement: what every ``put_item`` and every tool's ``put`` costs."""
        prefix = join_namespace(op.namespace)
        if op.value is None:
            statement, params = _DELETE_ITEM, {"p_prefix": prefix, "p_key": op.key}
        else:
            statement, params = _upsert(self._dialect), _put_row(op, prefix, now)
        if self._pg is not None:
            await self._pg.execute(statement, params)
        else:
            await self._tx.write(sqlite_statements.execute, statement, params)

    async def _pg_get(self, op: GetOp, now: datetime) -> Item | None:
        assert self._pg is not None
        prefix = join_namespace(op.namespace)
        row = await self._pg.first(_SELECT_ITEM, {"p_prefix": prefix, "p_key": op.key, "p_now": now})
        if row is None:
            return None
        if op.refresh_ttl and row.ttl_minutes is not None:
            expires = _expiry(now, row.ttl_minutes)
            await self._pg.execute(_REFRESH_ITEM, {"p_prefix": prefix, "p_key": op.key, "p_expires_at": expires})
        item: Item = _item(row)
        return item

    def default_ttl(self) -> float | None:
        """Minutes a put that names no ``ttl`` lives (``store.ttl.default_ttl``), or None."""
        return None if self.ttl_config is None else self.ttl_config.get("default_ttl")

    def refresh_on_read(self) -> bool:
        """Whether a read that does not say refreshes what it reads (LangGraph's default: yes)."""
        return True if self.ttl_config is None else bool(self.ttl_config.get("refresh_on_read", True))

    async def sweep_expired(self) -> int:
        """Delete the items whose time to live has passed, :data:`SWEEP_BATCH` per
        transaction, never on the event loop (``write_aside``); how many."""
        swept = 0
        for _ in range(SWEEP_BATCHES):
            deleted = await self._tx.write_aside(_sweep, utcnow(), SWEEP_BATCH)
            swept += deleted
            if deleted < SWEEP_BATCH:
                break
        return swept


class _Ran:
    __slots__ = ("refresh", "results")

    def __init__(self, results: list[Result], refresh: list[dict[str, Any]]) -> None:
        self.results = results
        self.refresh = refresh


def _run_batch(conn: Connection, ops: list[Op], now: datetime, semantic: _Semantic | None = None) -> _Ran:
    batch = _Batch(conn, now, semantic)
    results = [batch.run(op) for op in ops]
    return _Ran(results, batch.refresh)


def _refresh(conn: Connection, rows: list[dict[str, Any]]) -> None:
    conn.execute(_REFRESH_ITEM, rows)


def _sweep(conn: Connection, now: datetime, limit: int) -> int:
    return int(conn.execute(_SWEEP, {"p_now": now, "p_limit": limit}).rowcount)
