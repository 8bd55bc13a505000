"""Deterministic test embeddings for the store's semantic search, named in a config as
``semantic_vocab:embed`` (a function of texts) or ``semantic_vocab:VocabEmbeddings``.

A text's vector counts the words of :data:`VOCAB` it holds, so "the cat sat" is nearest to
an item about cats and a test can say which item a query must rank first. ``CALLS`` counts
the model calls and the thread each ran on, for the tests that check the event loop is
never the one embedding.
"""

from __future__ import annotations

import re
import threading

from langchain_core.embeddings import Embeddings

VOCAB = ("cat", "dog", "fish", "car", "train", "plane", "pizza", "pasta")
DIMS = len(VOCAB)
CALLS: list[tuple[int, str]] = []  # (texts in the call, thread name)


def vector(text: str) -> list[float]:
    words = re.findall(r"[a-z]+", text.lower())
    return [float(sum(1 for w in words if w.rstrip("s") == v)) + 0.01 for v in VOCAB]


def embed(texts: list[str]) -> list[list[float]]:
    CALLS.append((len(texts), threading.current_thread().name))
    return [vector(text) for text in texts]


class VocabEmbeddings(Embeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return embed(texts)

    def embed_query(self, text: str) -> list[float]:
        return embed([text])[0]
