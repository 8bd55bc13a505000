"""Scale-out suite fixtures: a fresh PostgreSQL database and real Gateway subprocesses
sharing it (see ``scaleout_cluster``). Everything here is skipped, with the reason, when
PostgreSQL is not reachable at 127.0.0.1:5432 (CI has it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from scaleout_cluster import HERE, Cluster, spawn_gateways

from pg_support import PG_UNREACHABLE, fresh_database


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).parent == HERE:
            item.add_marker(pytest.mark.postgres)
            if PG_UNREACHABLE:
                item.add_marker(pytest.mark.skip(reason=PG_UNREACHABLE))


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database, dropped afterwards (sessions of killed processes included)."""
    with fresh_database("dfx_scale") as name:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"


@pytest.fixture
def cluster_of(tmp_path: Path, pg_url: str) -> Iterator[Callable[..., Cluster]]:
    """``cluster_of(count, **options)``: options go to ``spawn_gateways``."""
    started: list[Cluster] = []

    def make(count: int, **options: Any) -> Cluster:
        cluster = spawn_gateways(tmp_path, pg_url, count, **options)
        started.append(cluster)
        return cluster

    yield make
    for cluster in started:
        for gateway in cluster.gateways:
            gateway.stop()
