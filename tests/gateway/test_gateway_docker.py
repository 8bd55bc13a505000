"""The container files, tested as far as a machine without a Docker engine allows.

No image is built here (no engine). What is checked instead: the build context holds every
file the Dockerfile copies and nothing else is needed; compose.yaml wires the Gateway to its
PostgreSQL and Redis consistently; the image's environment is valid for ``Settings``; and the
entrypoint script itself, run directly with the image's environment, serves the Gateway on
the test database (PostgreSQL when reachable) and passes other commands through.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from ruamel.yaml import YAML

from conftest import free_port
from deerflow_ext.config.settings import load_settings
from deerflow_ext.persistence.engine import normalize_database_url

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"


def _dockerfile_lines() -> list[str]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for line in _dockerfile_lines():
        if line.startswith("ENV "):
            for pair in shlex.split(line[4:]):
                key, _, value = pair.partition("=")
                env[key] = value
    return env


def _ignored(path: str) -> bool:
    """.dockerignore as written: everything excluded, then the listed paths let back in."""
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    allowed = [ln.strip("!").rstrip("/") for ln in lines if ln.startswith("!")]
    return not any(path == a or path.startswith(a + "/") for a in allowed)


def test_the_build_context_holds_every_file_the_dockerfile_copies() -> None:
    copies = [line.split()[1:-1] for line in _dockerfile_lines() if line.startswith("COPY ") and "--from" not in line]
    sources = [source for sources in copies for source in sources]
    assert sources, "the Dockerfile copies nothing from the context"
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
        assert not _ignored(source.rstrip("/")), f"COPY {source}: excluded by .dockerignore"
    # The package build needs what pyproject.toml names and nothing the context leaves out:
    # the host, and the contract distribution its direct reference points at.
    assert not _ignored("src/deerflow_ext/cli.py") and not _ignored("contract/pyproject.toml")
    assert "{root:uri}/contract" in (ROOT / "pyproject.toml").read_text()
    assert _ignored(".venv/bin/python") and _ignored("tests/conftest.py")


def test_the_images_environment_is_valid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    env = _image_env()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = load_settings()
    assert settings.host == "0.0.0.0" and settings.port == 8001 and settings.log_format == "json"
    assert normalize_database_url(settings.database_url).get_backend_name() == "sqlite"
    assert "--start-period" in (ROOT / "Dockerfile").read_text() and "/health" in (ROOT / "Dockerfile").read_text()


def test_compose_wires_the_gateway_to_postgresql_and_redis() -> None:
    compose: Any = YAML(typ="safe").load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"gateway", "postgres", "redis"}
    gateway, postgres = services["gateway"], services["postgres"]
    url = normalize_database_url(gateway["environment"]["DEERFLOW_DATABASE_URL"])
    pg = postgres["environment"]
    assert (url.host, url.port, url.username, url.password, url.database) == (
        "postgres",
        5432,
        pg["POSTGRES_USER"],
        pg["POSTGRES_PASSWORD"],
        pg["POSTGRES_DB"],
    )
    assert gateway["environment"]["DEERFLOW_REDIS_URL"].startswith("redis://redis:6379")
    assert gateway["depends_on"] == {
        "postgres": {"condition": "service_healthy"},
        "redis": {"condition": "service_healthy"},
    }
    assert all("healthcheck" in services[name] for name in ("postgres", "redis"))
    port = _image_env()["DEERFLOW_PORT"]
    assert gateway["ports"] == [f"127.0.0.1:{port}:{port}"]
    assert any(v.endswith(":" + _image_env()["DEERFLOW_CONFIG"] + ":ro") for v in gateway["volumes"])


def _entrypoint(tmp_path: Path, *argv: str, **env: str) -> subprocess.Popen[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DEERFLOW_")}
    environment.update(_image_env())
    environment.update(
        DEERFLOW_HOME=str(tmp_path),
        DEERFLOW_CONFIG=str(tmp_path / "etc" / "config.yaml"),  # nothing mounted there
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{environment.get('PATH', '')}",
        **env,
    )
    shell = shutil.which("dash") or "/bin/sh"
    return subprocess.Popen(
        [shell, str(ENTRYPOINT), *argv],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_the_entrypoint_passes_other_commands_through(tmp_path: Path) -> None:
    process = _entrypoint(tmp_path, "echo", "passed through")
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0 and out.strip().endswith("passed through")
    version = _entrypoint(tmp_path, "--version")
    out, _ = version.communicate(timeout=60)
    assert version.returncode == 0 and re.search(r"deerflow-ext \d", out)


def test_the_entrypoint_serves_the_gateway_with_the_images_environment(tmp_path: Path, database_url: str) -> None:
    port = free_port()
    process = _entrypoint(
        tmp_path, DEERFLOW_DATABASE_URL=database_url, DEERFLOW_HOST="127.0.0.1", DEERFLOW_PORT=str(port)
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=2).json() == {"status": "ok"}:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None, process.communicate()[0]
            assert time.monotonic() < deadline, "the Gateway did not answer /health"
            time.sleep(0.2)
        thread = httpx.post(f"{base}/api/threads", json={}, timeout=10).json()["thread_id"]
        with httpx.stream(
            "POST",
            f"{base}/api/threads/{thread}/runs/stream",
            json={"input": {"messages": [{"role": "user", "content": "hello"}]}},
            timeout=60,
        ) as response:
            events = [line for line in response.iter_lines() if line.startswith("event: ")]
        assert events[0] == "event: metadata" and events[-1] == "event: end"
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=30)
    lines = out.splitlines()
    missing = tmp_path / "etc" / "config.yaml"
    assert lines[0] == f"deerflow-entrypoint: no config file at {missing}; running with built-in defaults"
    records = [json.loads(line) for line in lines[1:] if line.startswith("{")]
    assert len(records) == len(lines) - 1, "every log line after the notice is JSON"
    (startup,) = [r for r in records if " starting: " in r["message"]]
    assert "(not found: built-in defaults)" in startup["message"]
    backend = normalize_database_url(database_url).get_backend_name()
    assert f"database {backend}" in startup["message"]
