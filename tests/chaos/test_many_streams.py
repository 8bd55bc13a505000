"""128 concurrent streaming conversations on one Gateway process over PostgreSQL and Redis.

Issue 54, row 16: at 64 conversations through ``ChatOpenAI`` (200 tokens at 20 ms,
``messages-tuple``) the process ran out of Redis connections and live readers got 65-203
of 200 token chunks, with a normal ``end``. Here 128 conversations (tokens 5 ms apart, so
the case stays short), the default connection settings: every reader gets every token and
an ``end``, no ``not_retained``, and the log names no Redis failure. The ordinary suite runs
16 conversations with 112 readers on a pool of 4 (``tests/scaleout/test_redis_many_streams.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chaos_support import Gateway, figure, gateways, load_average, scaled, write_config

from fake_openai import FakeOpenAI
from many_streams import TOKENS, answer, converse, model_config

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

CONVERSATIONS = scaled(128, 256)


def test_128_streaming_conversations_on_postgres_and_redis_lose_no_token(
    tmp_path: Path, pg_url: str, redis_prefix: str
) -> None:
    with FakeOpenAI(reply=answer, token_delay=0.005) as fake, gateways() as started:
        write_config(tmp_path, **model_config(fake))
        env = {
            "DEERFLOW_REDIS_URL": "redis://127.0.0.1:6379/0",
            "DEERFLOW_REDIS_PREFIX": redis_prefix,
            "DEERFLOW_SSE_HEARTBEAT_SECONDS": "2",
        }
        gateway = Gateway(tmp_path, pg_url, env)
        started.append(gateway.start(within=90))
        outcome = converse(gateway.url, CONVERSATIONS)
        log = gateway.log()
    short = outcome.short()
    figure(
        "many_streams",
        conversations=CONVERSATIONS,
        tokens=TOKENS,
        readers_complete=len(outcome.texts) - len(short),
        seconds=round(outcome.seconds, 1),
        warnings=log.count(" WARNING "),
        load=load_average(),
    )
    warnings = [line for line in log.splitlines() if " WARNING " in line][:10]
    assert len(outcome.texts) == CONVERSATIONS
    assert not short, (short[:5], warnings)
    assert not outcome.unclean(), (outcome.unclean()[:5], warnings)
    assert "Redis" not in log, [line for line in log.splitlines() if "WARNING" in line][:10]
