"""Who may read the operator's views (``/api/extensions``, ``/metrics``).

One FastAPI dependency, applied to the operator router as a whole, so the bearer-token
check of the hardening work (``DEERFLOW_API_TOKEN``) lands in one place and covers every
operator route at once. Today it admits everyone: the Gateway binds to loopback by default.
"""

from __future__ import annotations

from fastapi import Request

__all__ = ["operator_access"]


async def operator_access(request: Request) -> None:
    """Admit the request to an operator route (the auth dependency will live here)."""
    del request
