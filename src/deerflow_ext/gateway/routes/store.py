"""The store: LangGraph Platform's ``/store`` routes over the host's ``ItemStore``.

What ``langgraph_sdk``'s ``client.store`` sends, answered in LangGraph's shapes:

- ``PUT /store/items`` ``{namespace, key, value, index?, ttl?}`` -> 204;
- ``GET /store/items?namespace=a.b&key=k`` -> the item, or ``null`` when there is none (the
  SDK sends the namespace joined with dots; repeating ``namespace`` once per label works too);
- ``DELETE /store/items`` ``{namespace, key}`` -> 204, whether or not the item was there;
- ``POST /store/items/search`` ``{namespace_prefix, filter?, limit?, offset?, query?}`` ->
  ``{"items": [...]}``, newest first, or with ``query`` and an index most similar first;
- ``POST /store/namespaces`` ``{prefix?, suffix?, max_depth?, limit?, offset?}`` ->
  ``{"namespaces": [[...], ...]}``.

An item is ``{namespace, key, value, created_at, updated_at}``; a search's also has ``score``:
its cosine similarity to ``query`` when ``store.index`` is configured (a put's ``index``
then picks the fields embedded, ``false`` none), else null, ``query`` and ``index`` being
ignored as LangGraph's server ignores them without an index (``ItemStore``).
Bad input gets 422 naming the field: an empty namespace, a label that is empty or holds a
dot, a value that is not a JSON object, an unknown filter operator. The same store is the
graph's ``runtime.store`` (``app.py`` hands it to the agent host).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request, Response
from langgraph.store.base import GetOp, InvalidNamespaceError, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from pydantic import BaseModel, Field, field_validator

from ...persistence.item_matching import SEPARATOR, InvalidFilterError, check_labels
from ...persistence.item_store import MAX_TTL_MINUTES
from ..errors import TolerantJSONResponse
from ..schemas import MAX_OFFSET
from ..scoping import authorized
from ..state import runtime_of

__all__ = ["ItemDelete", "ItemPut", "ItemSearch", "NamespaceList", "router"]

router = APIRouter(prefix="/api/store", tags=["store"])

MAX_LIMIT = 1000
"""The most items or namespaces one page answers."""

_RESERVED_ROOT = "langgraph"  # LangGraph keeps namespaces under it for itself
_JSON_KINDS = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}


def _namespace(labels: list[str], field: str, *, allow_empty: bool = False) -> list[str]:
    if not labels and not allow_empty:
        raise ValueError("a namespace needs at least one label")
    try:
        check_labels(labels, field=field)
    except InvalidNamespaceError as exc:
        raise ValueError(str(exc)) from None
    return labels


class ItemPut(BaseModel):
    namespace: list[str]
    key: str = Field(min_length=1)
    value: dict[str, Any]
    index: Literal[False] | list[str] | None = None  # fields to embed (store.index); ignored without one
    ttl: float | None = Field(
        default=None,
        gt=0,
        le=MAX_TTL_MINUTES,
        allow_inf_nan=False,
        description=f"minutes until the item expires (at most {MAX_TTL_MINUTES}: 100 years)",
    )

    @field_validator("namespace")
    @classmethod
    def _labels(cls, labels: list[str]) -> list[str]:
        _namespace(labels, "namespace")
        if labels[0] == _RESERVED_ROOT:
            raise ValueError(f'the root label "{_RESERVED_ROOT}" is reserved')
        return labels

    @field_validator("value", mode="before")
    @classmethod
    def _object(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            kind = "null" if value is None else _JSON_KINDS.get(type(value), type(value).__name__)
            raise ValueError(f"an item's value must be a JSON object, not {kind}")
        return value


class ItemDelete(BaseModel):
    namespace: list[str]
    key: str = Field(min_length=1)

    @field_validator("namespace")
    @classmethod
    def _labels(cls, labels: list[str]) -> list[str]:
        return _namespace(labels, "namespace")


class ItemSearch(BaseModel):
    namespace_prefix: list[str] = Field(default_factory=list)
    filter: dict[str, Any] | None = None
    limit: int = Field(default=10, ge=0, le=MAX_LIMIT)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    query: str | None = None  # ranks by similarity with store.index; ignored without one
    refresh_ttl: bool | None = None

    @field_validator("namespace_prefix")
    @classmethod
    def _labels(cls, labels: list[str]) -> list[str]:
        return _namespace(labels, "namespace_prefix", allow_empty=True)


class NamespaceList(BaseModel):
    prefix: list[str] | None = None
    suffix: list[str] | None = None
    max_depth: int | None = Field(default=None, ge=1)
    limit: int = Field(default=100, ge=0, le=MAX_LIMIT)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)

    @field_validator("prefix", "suffix")
    @classmethod
    def _labels(cls, labels: list[str] | None) -> list[str] | None:
        return None if labels is None else _namespace(labels, "path", allow_empty=True)

    def conditions(self) -> tuple[MatchCondition, ...]:
        found = []
        if self.prefix:
            found.append(MatchCondition(match_type="prefix", path=tuple(self.prefix)))
        if self.suffix:
            found.append(MatchCondition(match_type="suffix", path=tuple(self.suffix)))
        return tuple(found)


def _store(request: Request) -> Any:
    items = runtime_of(request).items
    if items is None:
        raise HTTPException(status_code=503, detail="the store is not available (the Gateway has none)")
    return items


def _unprocessable(exc: ValueError, field: str) -> HTTPException:
    text = str(exc)
    return HTTPException(status_code=422, detail=text if text.startswith(field) else f"{field}: {text}")


async def _scoped(request: Request, action: str, value: dict[str, Any], field: str = "namespace") -> tuple[str, ...]:
    """The namespace the operation works on: the client's, unless the user's ``store``
    handler (``auth``) rewrote ``value["namespace"]`` (a handler's filter has no meaning for
    the store: its namespace is what scopes it). 422 when the rewritten one is no namespace."""
    await authorized(request, "store", action, value)
    try:
        return check_labels(tuple(value.get("namespace") or ()), field=field)
    except InvalidNamespaceError as exc:
        raise _unprocessable(exc, field) from None


async def _run(request: Request, op: Any, field: str) -> Any:
    try:
        return (await _store(request).abatch([op]))[0]
    except (InvalidNamespaceError, InvalidFilterError) as exc:
        raise _unprocessable(exc, field) from None


@router.put("/items", status_code=204, response_class=Response)
async def put_item(request: Request, body: ItemPut) -> Response:
    """Create or replace the item at ``namespace`` and ``key``; without ``ttl`` it lives
    ``store.ttl.default_ttl`` minutes (none: until deleted)."""
    namespace = tuple(body.namespace)
    if request.scope.get("user") is not None:
        value = {"namespace": namespace, "key": body.key, "value": body.value, "index": body.index}
        namespace = await _scoped(request, "put", value)
    ttl = body.ttl if body.ttl is not None else _store(request).default_ttl()
    op = PutOp(namespace, body.key, body.value, index=body.index, ttl=ttl)
    await _run(request, op, "namespace")
    return Response(status_code=204)


@router.get("/items", response_model=None)
async def get_item(
    request: Request,
    key: Annotated[str, Query(min_length=1)],
    namespace: Annotated[list[str] | None, Query()] = None,
    refresh_ttl: bool | None = None,
) -> Any:
    """The item at ``namespace`` and ``key``, or ``null``."""
    labels = _query_namespace(namespace)
    if request.scope.get("user") is not None:
        labels = await _scoped(request, "get", {"namespace": labels, "key": key})
    refresh = _store(request).refresh_on_read() if refresh_ttl is None else refresh_ttl
    item = await _run(request, GetOp(labels, key, refresh_ttl=refresh), "namespace")
    return TolerantJSONResponse(None if item is None else item.dict())


def _query_namespace(values: list[str] | None) -> tuple[str, ...]:
    """``?namespace=a.b`` (the SDK's form) or ``?namespace=a&namespace=b``."""
    if not values or values == [""]:
        raise HTTPException(status_code=422, detail="namespace: a namespace needs at least one label")
    labels = values[0].split(SEPARATOR) if len(values) == 1 else values
    try:
        return check_labels(labels)
    except InvalidNamespaceError as exc:
        raise _unprocessable(exc, "namespace") from None


@router.delete("/items", status_code=204, response_class=Response)
async def delete_item(request: Request, body: ItemDelete) -> Response:
    """Delete the item at ``namespace`` and ``key`` (nothing to delete is no error)."""
    namespace = tuple(body.namespace)
    if request.scope.get("user") is not None:
        namespace = await _scoped(request, "delete", {"namespace": namespace, "key": body.key})
    await _run(request, PutOp(namespace, body.key, None), "namespace")
    return Response(status_code=204)


@router.post("/items/search", response_model=None)
async def search_items(request: Request, body: ItemSearch) -> Any:
    """Items under ``namespace_prefix`` whose values match ``filter``: newest first, or most
    similar to ``query`` first when the store has an index."""
    prefix = tuple(body.namespace_prefix)
    if request.scope.get("user") is not None:
        value = {
            "namespace": prefix,
            "filter": body.filter,
            "limit": body.limit,
            "offset": body.offset,
            "query": body.query,
        }
        prefix = await _scoped(request, "search", value, "namespace_prefix")
    op = SearchOp(
        prefix,
        filter=body.filter,
        limit=body.limit,
        offset=body.offset,
        query=body.query,
        refresh_ttl=_store(request).refresh_on_read() if body.refresh_ttl is None else body.refresh_ttl,
    )
    items = await _run(request, op, "filter")
    return TolerantJSONResponse({"items": [item.dict() for item in items]})


@router.post("/namespaces", response_model=None)
async def list_namespaces(request: Request, body: NamespaceList | None = None) -> Any:
    """The namespaces holding items, matching ``prefix``/``suffix`` (``*``: any one label),
    truncated to ``max_depth``, in order."""
    body = body or NamespaceList()
    conditions = body.conditions()
    if request.scope.get("user") is not None:
        value = {
            "namespace": tuple(body.prefix or ()),
            "suffix": tuple(body.suffix) if body.suffix else None,
            "max_depth": body.max_depth,
            "limit": body.limit,
            "offset": body.offset,
        }
        prefix = await _scoped(request, "list_namespaces", value, "prefix")
        conditions = NamespaceList(prefix=list(prefix), suffix=body.suffix).conditions()
    op = ListNamespacesOp(
        match_conditions=conditions or None, max_depth=body.max_depth, limit=body.limit, offset=body.offset
    )
    found = await _run(request, op, "prefix")
    return TolerantJSONResponse({"namespaces": [list(namespace) for namespace in found]})
