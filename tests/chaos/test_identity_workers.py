"""Users under ``serve --workers 2`` on PostgreSQL: every worker loads the same ``auth.py``
(``examples/auth/auth.py``) and answers each user with their own threads and runs, whichever
worker a request reaches.

In the chaos suite (``nox -s chaos``): two worker processes start for ~30 s on a shared
machine, more than the ordinary suite's budget; the scale-out suite's Gateway launcher is
reused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jwt
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError

from scaleout.scaleout_cluster import Cluster, spawn_gateways

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "auth" / "auth.py"
SECRET = "workers-secret-0123456789abcdef0123"


def client(cluster: Cluster, user: str) -> Any:
    bearer = jwt.encode({"sub": user}, SECRET, algorithm="HS256")
    url = f"{cluster.gateways[0].base_url}/api"
    return get_sync_client(url=url, api_key=None, headers={"Authorization": f"Bearer {bearer}"})


def test_two_workers_scope_every_request_to_its_user(tmp_path: Path, pg_url: str) -> None:
    cluster = spawn_gateways(
        tmp_path,
        pg_url,
        1,
        extra_args=("--workers", "2"),
        extra_config={"auth": {"path": f"{EXAMPLE}:auth"}},
        extra_env={"AUTH_JWT_SECRET": SECRET},
    )
    try:
        _check(cluster)
    finally:
        for gateway in cluster.gateways:
            gateway.stop()


def _check(cluster: Cluster) -> None:
    alice, bob = client(cluster, "alice"), client(cluster, "bob")
    mine = [alice.threads.create(metadata={"n": n})["thread_id"] for n in range(4)]
    theirs = bob.threads.create()["thread_id"]
    alice.runs.wait(mine[0], "lead_agent", input={"messages": [{"role": "user", "content": "hi"}]})
    for _ in range(3):  # a few rounds: connections land on either worker
        assert sorted(t["thread_id"] for t in alice.threads.search(limit=100)) == sorted(mine)
        assert alice.threads.count() == 4
        assert [t["thread_id"] for t in bob.threads.search(limit=100)] == [theirs]
        assert len(alice.runs.list(mine[0])) == 1
        with pytest.raises(NotFoundError):
            bob.threads.get(mine[0])
        with pytest.raises(NotFoundError):
            bob.runs.list(mine[0])
