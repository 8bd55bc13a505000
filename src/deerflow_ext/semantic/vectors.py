"""The texts of an item that are embedded, and their vectors, computed off the event loop.

A put's value gives one text per match of each configured path (``$``: the whole value as
JSON); a per-put ``index`` list replaces the configured paths, ``False`` embeds nothing. The
field a vector came from is recorded as the path, with ``[i]`` when one path matched several
texts: the store keeps one row per field and ranks an item by its best one (LangGraph's
max-pooling).

Vectors are made unit-length here, once, so every database compares them by a dot product
(cosine similarity for unit vectors) and SQLite's ``sqlite-vec`` and PostgreSQL agree on a
score. A model's sync methods run on a worker thread (``asyncio.to_thread``): an embedding
call is a network round trip or a matrix product, and either would stall every other request
on the loop. A model whose own async methods are truly async is awaited.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.store.base.embed import get_text_at_path
from sqlite_vec import serialize_float32

from .index import StoreIndex

__all__ = ["EmbeddedText", "embed_items", "embed_query", "encode_float32", "texts_to_embed"]


@dataclass(frozen=True)
class EmbeddedText:
    """One text of an item to embed, and the field it is recorded under."""

    field: str
    text: str


def texts_to_embed(value: Mapping[str, Any], fields: Sequence[str]) -> list[EmbeddedText]:
    """The texts at ``fields`` of ``value`` (empty ones left out)."""
    found: list[EmbeddedText] = []
    for path in fields:
        texts = [text for text in get_text_at_path(value, path) if text]
        if len(texts) == 1:
            found.append(EmbeddedText(path, texts[0]))
        else:
            found.extend(EmbeddedText(f"{path}[{position}]", text) for position, text in enumerate(texts))
    return found


def _unit(vector: Sequence[float], dims: int, source: str) -> list[float]:
    if len(vector) != dims:
        raise ValueError(f"store.index.dims is {dims}, but {source} returned a vector of {len(vector)} numbers")
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [float(x) / norm for x in vector] if norm > 0 else [0.0] * dims


def _units(vectors: Sequence[Sequence[float]], count: int, index: StoreIndex) -> list[list[float]]:
    if len(vectors) != count:
        raise ValueError(f"{index.source} returned {len(vectors)} vectors for {count} texts")
    return [_unit(vector, index.dims, index.source) for vector in vectors]


async def embed_items(index: StoreIndex, texts: Sequence[str]) -> list[list[float]]:
    """Unit vectors for ``texts``, in order (one model call for all of them)."""
    if not texts:
        return []
    if index.native_async:
        vectors = await index.embeddings.aembed_documents(list(texts))
        return _units(vectors, len(texts), index)
    return await asyncio.to_thread(lambda: _units(index.embeddings.embed_documents(list(texts)), len(texts), index))


async def embed_query(index: StoreIndex, query: str) -> list[float]:
    """The unit vector of a search's ``query``."""
    if index.native_async:
        return _unit(await index.embeddings.aembed_query(query), index.dims, index.source)
    return await asyncio.to_thread(lambda: _unit(index.embeddings.embed_query(query), index.dims, index.source))


def encode_float32(vector: Sequence[float]) -> bytes:
    """A vector as ``sqlite-vec`` reads it: little-endian float32s."""
    encoded: bytes = serialize_float32(list(vector))
    return encoded
