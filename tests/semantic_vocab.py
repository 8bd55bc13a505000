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

#: A text holding "gated" makes the model wait, where it runs, until ``RELEASE`` is set, having
#: set ``ENTERED``: a test then asks the Gateway something else meanwhile. Were the model run
#: on the event loop, that request could not be answered until the wait ran out (``BLOCKED``).
ENTERED = threading.Event()
RELEASE = threading.Event()
BLOCKED: list[str] = []


def vector(text: str) -> list[float]:
    words = re.findall(r"[a-z]+", text.lower())
    return [float(sum(1 for w in words if w.rstrip("s") == v)) + 0.01 for v in VOCAB]


def embed(texts: list[str]) -> list[list[float]]:
    CALLS.append((len(texts), threading.current_thread().name))
    if any("gated" in text for text in texts):
        ENTERED.set()
        if not RELEASE.wait(30):
            BLOCKED.append(threading.current_thread().name)
    return [vector(text) for text in texts]


class VocabEmbeddings(Embeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return embed(texts)

    def embed_query(self, text: str) -> list[float]:
        return embed([text])[0]
