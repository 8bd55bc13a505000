"""Many streaming conversations on one Gateway process over PostgreSQL and Redis (issue 54).

At 64 conversations through ``ChatOpenAI`` the process ran out of Redis connections (one
blocked ``XREAD`` per waiting reader, plus the writes, past redis-py's pool of 100): writes
failed with ``Too many connections``, 4,206 warnings, and live readers got 65-203 of 200
token chunks with a normal ``end``. Here 32 conversations, each read by its creator and two
joiners (96 readers), run on a deliberately small pool of 4 connections: every reader gets
every token, and the log stays quiet. ``nox -s chaos`` runs 128 conversations
(``tests/chaos/test_many_streams.py``).
"""

from __future__ import annotations

import pytest

from fake_openai import FakeOpenAI
from many_streams import answer, converse, model_config
from redis_support import REDIS_URL, REDIS_UNREACHABLE

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(REDIS_UNREACHABLE is not None, reason=str(REDIS_UNREACHABLE))]

CONVERSATIONS = 32
JOINERS = int(__import__("os").environ.get("J", "2"))


def test_every_reader_of_every_concurrent_stream_gets_every_token(cluster_of: object, redis_prefix: str) -> None:
    with FakeOpenAI(reply=answer, token_delay=0.002) as fake:
        cluster = cluster_of(  # type: ignore[operator]
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
    short = [
        (len(t.split()), n[:3], n[-3:]) for t, n in zip(outcome.texts, outcome.names, strict=True) if t != answer([])
    ]
    print(f"{readers} readers in {outcome.seconds:.1f} s")
    assert not short, (
        f"{len(short)} of {readers} readers missed tokens (words, events): {short[:5]}\n{gateway.log()[-3000:]}"
    )
    assert all(names[-1].startswith("end") and "not_retained" not in names for names in outcome.names)
    log = gateway.log()
    assert "Too many connections" not in log and "could not write" not in log, log[-2000:]
    assert log.count("WARNING") < 10, log[-2000:]
