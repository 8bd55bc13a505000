"""Chaos suite fixtures (docs/RELIABILITY.md). The suite runs only in ``nox -s chaos``
(which sets ``DEERFLOW_CHAOS=1``): its cases start several Gateways, databases and a Redis
of their own, which the ordinary suite on a shared machine must not pay for.

Every case records one line of figures (``chaos_support.figure``); they are printed together
at the end of the session, whatever pytest captured.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from chaos_support import FIGURES  # noqa: E402

from live_uvicorn import free_port  # noqa: E402
from pg_support import PG_UNREACHABLE, fresh_database  # noqa: E402
from redis_support import REDIS_UNREACHABLE  # noqa: E402

if os.environ.get("DEERFLOW_CHAOS") != "1":
    collect_ignore_glob = ["test_*.py"]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if FIGURES:
        terminalreporter.section("chaos figures")
        for line in FIGURES:
            terminalreporter.write_line(line)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh database on the machine's PostgreSQL (127.0.0.1:5432), dropped afterwards."""
    if PG_UNREACHABLE:
        pytest.skip(PG_UNREACHABLE)
    with fresh_database("dfx_chaos") as name:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"


@pytest.fixture
def redis_needed() -> None:
    if REDIS_UNREACHABLE:
        pytest.skip(REDIS_UNREACHABLE)


def _pg_bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class OwnPostgres:
    """A throwaway PostgreSQL cluster of the test's own (never the machine's on 5432), so it
    can be stopped and restarted. Run as the ``postgres`` OS user when the test runs as root."""

    def __init__(self, directory: Path, bindir: Path) -> None:
        self.data = directory / "pgdata"
        self.bindir = bindir
        self.port = free_port()
        self.socket_dir = directory
        self.log = directory / "postgres.log"

    def _as_owner(self, *command: str) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", "postgres", "--", *command]
        return list(command)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def init(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.socket_dir, "postgres")
        subprocess.run(
            self._as_owner(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-N"),
            check=True,
            capture_output=True,
            timeout=120,
        )

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        )
        subprocess.run(
            self._as_owner(
                str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.log), "-w", "start"
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )

    def stop(self, mode: str = "fast") -> None:
        subprocess.run(
            self._as_owner(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"),
            capture_output=True,
            timeout=120,
        )


@pytest.fixture
def own_postgres() -> Iterator[OwnPostgres]:
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("initdb is not installed: no throwaway PostgreSQL cluster")
    # Not under tmp_path: pytest's base folder is private to this user, and the cluster runs
    # as ``postgres``.
    directory = Path(tempfile.mkdtemp(prefix="dfx-chaos-pg-"))
    os.chmod(directory, 0o755)
    cluster = OwnPostgres(directory, bindir)
    try:
        cluster.init()
        cluster.start()
    except (subprocess.SubprocessError, OSError) as exc:
        shutil.rmtree(directory, ignore_errors=True)
        pytest.skip(f"could not start a throwaway PostgreSQL cluster ({exc})")
    try:
        yield cluster
    finally:
        cluster.stop("immediate")
        shutil.rmtree(directory, ignore_errors=True)


class OwnRedis:
    """A ``redis-server`` of the test's own on a free port (never the machine's on 6379), to
    SIGKILL and restart."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        import redis

        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            cwd=self.directory,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while True:
            with contextlib.suppress(redis.RedisError):
                if redis.Redis.from_url(self.url, socket_connect_timeout=1).ping():
                    return
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not answer")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    server = OwnRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()
