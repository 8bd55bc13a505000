"""Many streaming conversations on one Gateway process over PostgreSQL and Redis (issue 54).

At 64 conversations through ``ChatOpenAI`` the process ran out of Redis connections (one
blocked ``XREAD`` per waiting reader, plus the writes, past redis-py's pool of 100): writes
failed with ``Too many connections``, 4,206 warnings, and live readers got 65-203 of 200
token chunks with a normal ``end``. Here 16 conversations, each read by its creator and six
joiners (112 readers, past that pool), run on a deliberately small pool of 4 connections:
every reader gets every token, and the log stays quiet. ``nox -s chaos`` runs 128
conversations (``tests/chaos/test_many_streams.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from scaleout_cluster import Cluster

from fake_openai import FakeOpenAI
from many_streams import answer, converse, model_config
from redis_support import REDIS_UNREACHABLE, REDIS_URL

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(REDIS_UNREACHABLE is not None, reason=str(REDIS_UNREACHABLE))]

CONVERSATIONS = 16
JOINERS = 6


def test_every_reader_of_every_concurrent_stream_gets_every_token(
    cluster_of: Callable[..., Cluster], redis_prefix: str
) -> None:
    with FakeOpenAI(reply=answer, token_delay=0.002) as fake:
        cluster = cluster_of(
            1,
            extra_env={
                "DEERFLOW_REDIS_URL": REDIS_URL,
                "DEERFLOW_REDIS_PREFIX": redis_prefix,
                "DEERFLOW_REDIS_MAX_CONNECTIONS": "4",
                "DEERFLOW_SSE_HEARTBEAT_SECONDS": "2",
            },
            extra_config=model_config(fake),
        )
        (gateway,) = cluster.gateways
        outcome = converse(gateway.base_url, CONVERSATIONS, joiners=JOINERS)
    readers = CONVERSATIONS * (1 + JOINERS)
    assert len(outcome.texts) == readers
    short = outcome.short()
    assert not short, f"{len(short)} of {readers} readers missed tokens (words, events): {short[:5]}"
    assert not outcome.unclean(), outcome.unclean()[:5]
    log = gateway.log()
    assert "Too many connections" not in log, log[-2000:]
    assert log.count(" WARNING ") < 5, log[-2000:]
