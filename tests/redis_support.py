"""The local Redis the cross-process stream tests use (CI starts it: ``.ci/run``)."""

from __future__ import annotations

REDIS_URL = "redis://127.0.0.1:6379/0"


def _redis_reason() -> str | None:
    try:
        import redis

        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
        return None
    except Exception as exc:
        return f"Redis at 127.0.0.1:6379 is not reachable ({type(exc).__name__}: {exc})"


REDIS_UNREACHABLE = _redis_reason()
