"""Semantic search for the store: what ``store.index`` in config.yaml turns into.

This package owns the index configuration as LangGraph users know it from
``langgraph.json`` (``embed``, ``dims``, ``fields``), resolving ``embed`` to an embedding
model once at startup (:mod:`.index`), the texts of an item that are embedded and the
vectors computed for them off the event loop (:mod:`.vectors`), and ``sqlite-vec`` on the
host's SQLite connections (:mod:`.sqlite_vec_functions`). Where vectors are kept and how a
search ranks by them is the store's (``persistence.item_store``): this package knows no table.
"""

from __future__ import annotations

from .index import StoreIndex, StoreIndexError, load_store_index, store_index_of
from .sqlite_vec_functions import ensure_sqlite_vec
from .vectors import EmbeddedText, embed_items, embed_query, encode_float32, texts_to_embed

__all__ = [
    "EmbeddedText",
    "StoreIndex",
    "StoreIndexError",
    "embed_items",
    "embed_query",
    "encode_float32",
    "ensure_sqlite_vec",
    "load_store_index",
    "store_index_of",
    "texts_to_embed",
]
