"""A Redis stream bridge whose Redis does not answer: a read says "nothing retained" (the
SSE layer then decides from the run's status) instead of raising into the response."""

from __future__ import annotations

import socket

from deerflow_ext.runtime.redis_stream import RedisStreamBridge
from deerflow_ext.runtime.stream import StreamBatch


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once the socket is closed


async def test_a_read_while_redis_is_down_reports_nothing_retained() -> None:
    bridge = RedisStreamBridge(f"redis://127.0.0.1:{_closed_port()}/0")
    try:
        assert await bridge.read("run-1", "3", wait=0.2) == StreamBatch(retained=False)
        assert await bridge.read("run-1", None) == StreamBatch(retained=False)
    finally:
        await bridge.aclose()
