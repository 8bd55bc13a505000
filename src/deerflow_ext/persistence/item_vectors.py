"""The store's vectors (``store_vectors``): what a put writes beside its item, and the ranked
keys a semantic search reads, per database.

A search with a ``query`` ranks the live items under its namespace prefix by their best
field's cosine similarity to the query (vectors are unit-length: a dot product), items with no
vector after every item with one (newest first among them, score null), as LangGraph's own
stores fill a page. The score is computed where the vectors are:

* SQLite: ``sqlite-vec``'s ``vec_distance_cosine`` over the float32 blobs (``semantic``
  loads it into the connection first);
* PostgreSQL with pgvector installed in the database (``CREATE EXTENSION vector``): the
  ``real[]`` column cast to ``vector`` and pgvector's ``<=>`` (cosine distance);
* PostgreSQL without it: an exact scan in SQL, the sum of the element-wise products
  (``unnest`` of both arrays side by side).

Only vectors of the configured length take part: after ``store.index.dims`` changes, older
vectors are left out rather than failing the search (a put re-embeds its item).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import REAL, Connection, Float, LargeBinary, bindparam, cast, delete, func, select, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.types import UserDefinedType

from deerflow_ext.semantic import encode_float32, ensure_sqlite_vec

from .store_table import STORE_ITEMS, STORE_VECTORS

__all__ = ["delete_vectors", "has_pgvector", "insert_vectors", "ranked_keys", "vector_rows"]

_V = STORE_VECTORS
_T = STORE_ITEMS

_DELETE = delete(_V).where(_V.c.prefix == bindparam("p_prefix"), _V.c.key == bindparam("p_key"))


class _PgVector(UserDefinedType[Any]):
    """pgvector's ``vector`` type, for the casts of a search (never a column's type)."""

    cache_ok = True

    def get_col_spec(self, **_kw: Any) -> str:
        return "vector"


def vector_rows(
    prefix: str, key: str, embedded: Sequence[tuple[str, Sequence[float]]], dialect: str
) -> list[dict[str, Any]]:
    """The rows of an item's vectors (``(field, unit vector)`` pairs)."""
    encode = (lambda v: list(v)) if dialect == "postgresql" else encode_float32
    return [{"prefix": prefix, "key": key, "field": field, "embedding": encode(vector)} for field, vector in embedded]


def delete_vectors(conn: Connection, prefix: str, key: str) -> None:
    conn.execute(_DELETE, {"p_prefix": prefix, "p_key": key})


def insert_vectors(conn: Connection, rows: list[dict[str, Any]]) -> None:
    if rows:
        conn.execute(_V.insert(), rows)


def has_pgvector(conn: Connection) -> bool:
    """Whether pgvector is installed in this PostgreSQL database."""
    return bool(conn.execute(text("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')")).scalar())


def _score(conn: Connection, query: Sequence[float], pgvector: bool) -> tuple[Any, Any, dict[str, Any]]:
    """The score expression of one vector row, the condition on its length, and their binds."""
    dims = len(query)
    if conn.dialect.name != "postgresql":
        ensure_sqlite_vec(conn)
        blob: Any = bindparam("p_query", type_=LargeBinary)
        score = 1.0 - func.vec_distance_cosine(_V.c.embedding, blob)
        return score, func.length(_V.c.embedding) == dims * 4, {"p_query": encode_float32(query)}
    q: Any = bindparam("p_query", type_=postgresql.ARRAY(REAL()))
    same_length = func.cardinality(_V.c.embedding) == dims
    if pgvector:
        distance = cast(_V.c.embedding, _PgVector()).op("<=>", return_type=Float())(cast(q, _PgVector()))
        return 1.0 - distance, same_length, {"p_query": list(query)}
    pairs = func.unnest(_V.c.embedding, q).table_valued("a", "b").render_derived()
    dot = select(func.sum(pairs.c.a * pairs.c.b)).scalar_subquery()
    return dot, same_length, {"p_query": list(query)}


def ranked_keys(
    conn: Connection,
    live: Any,
    under: Any | None,
    query: Sequence[float],
    *,
    pgvector: bool,
    limit: int | None,
    offset: int,
    params: dict[str, Any],
) -> Any:
    """``(namespace, key, score)`` of the live items (``live``, ``under``: conditions on the
    items), best first, as an open result (the caller reads what it needs, then closes it);
    a page of them when ``limit`` is given (no filter to apply after)."""
    score, same_length, binds = _score(conn, query, pgvector)
    best = select(_V.c.prefix, _V.c.key, func.max(score).label("score")).where(same_length)
    if under is not None:
        best = best.where(under(_V.c.prefix))
    scored = best.group_by(_V.c.prefix, _V.c.key).subquery("scored")
    keys = (
        select(_T.c.prefix, _T.c.key, scored.c.score)
        .select_from(_T.outerjoin(scored, (scored.c.prefix == _T.c.prefix) & (scored.c.key == _T.c.key)))
        .where(live)
    )
    if under is not None:
        keys = keys.where(under(_T.c.prefix))
    keys = keys.order_by(scored.c.score.desc().nulls_last(), _T.c.updated_at.desc(), _T.c.prefix, _T.c.key)
    if limit is not None:
        keys = keys.limit(limit).offset(offset)
    return conn.execute(keys, {**params, **binds})
