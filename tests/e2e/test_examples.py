"""The example extensions, installed for real, enabled by name, in a real Gateway on loopback.

This is the operator's path end to end: ``pip install`` each package from
``plugins_examples/``, list them by entry-point name in a ``config.yaml``, start
``deerflow-ext serve`` (uvicorn in a subprocess, SQLite in a temporary directory), drive a
delegating run over HTTP with SSE, and look for each extension's effect where an operator
would: log lines in the server's stderr, rows in the audit tables, totals and spans from
the extensions' own routers. It also runs each package's own test suite against the
installed package, which is what an extension author does with the author kit.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from deerflow_ext.testing import SseEvent, parse_sse
from e2e.example_packages import EXAMPLES, PACKAGES
from e2e.served import Gateway, serve, wait

pytestmark = pytest.mark.e2e


def _config(directory: Path) -> Path:
    document = {
        "plugins": [
            {"name": "observers", "use": "observers"},
            {
                "name": "audit",
                "use": "audit",
                "required": True,
                "table_prefix": "audit_",
                "config": {"flush_interval": 0.05},
            },
            {
                "name": "costs",
                "use": "costs",
                "config": {"input_per_million": 1.0, "output_per_million": 2.0},
            },
            {"name": "otel", "use": "otel", "config": {"exporter": "memory"}},
        ]
    }
    path = directory / "config.yaml"
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")  # JSON is YAML
    return path


@pytest.fixture(scope="module")
def gateway(installed_examples: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    directory = tmp_path_factory.mktemp("e2e-gateway")
    with serve(directory, _config(directory)) as server:
        yield server


@dataclass(frozen=True)
class StreamedRun:
    thread_id: str
    run_id: str
    events: tuple[SseEvent, ...]
    run: dict[str, Any]


def _stream_run(server: Gateway, prompt: str) -> StreamedRun:
    with server.client() as client:
        created = client.post("/api/threads", json={})
        created.raise_for_status()
        thread_id = created.json()["thread_id"]
        body = {"input": {"messages": [{"role": "user", "content": prompt}]}, "goal": None}
        with client.stream("POST", f"/api/threads/{thread_id}/runs/stream", json=body) as response:
            assert response.status_code == 200, response.read()
            assert response.headers["content-type"].startswith("text/event-stream")
            events = parse_sse("".join(response.iter_text()))
        run_id = events[0].data["run_id"]
        run = client.get(f"/api/threads/{thread_id}/runs/{run_id}").json()
    return StreamedRun(thread_id, run_id, events, run)


@pytest.fixture(scope="module")
def delegated_run(gateway: Gateway) -> StreamedRun:
    return _stream_run(gateway, "delegate: summarise the plan")


def test_every_example_loads_by_name(gateway: Gateway) -> None:
    uses = ", ".join(use for _, use in PACKAGES.values())
    assert f"Extensions loaded: 4/4 ({uses})" in gateway.log()


def test_the_run_streams_and_completes(delegated_run: StreamedRun) -> None:
    names = [e.event for e in delegated_run.events]
    assert names[0] == "metadata" and names[-1] == "end"
    assert delegated_run.run["status"] == "success"
    assert delegated_run.run["outcome"] == "completed"


def test_observers_log_lines_in_the_server_stderr(gateway: Gateway, delegated_run: StreamedRun) -> None:
    thread = re.escape(delegated_run.thread_id)
    log = gateway.log()
    assert re.search(rf"deerflow_observers: lead \S+ in thread {thread} ended completed after \d+\.\d\ds", log), log
    assert re.search(rf"deerflow_observers: subagent \S+ in thread {thread} ended completed after \d+\.\d\ds", log)
    assert re.search(r"deerflow_observers: system title call on \S+: ok in \d+ ms \(\d+ message\(s\), scope ", log)


def test_audit_rows_via_its_router_and_in_its_own_tables(gateway: Gateway, delegated_run: StreamedRun) -> None:
    def listed() -> list[dict[str, Any]]:
        with gateway.client() as client:
            rows = client.get("/api/ext/audit/outcomes", params={"run_id": delegated_run.run_id}).json()
        return rows["outcomes"] if len(rows["outcomes"]) >= 2 else []

    rows = wait(listed)
    assert sorted((r["kind"], r["outcome"]) for r in rows) == [
        ("lead", "completed"),
        ("subagent", "completed"),
    ]
    assert {r["thread_id"] for r in rows} == {delegated_run.thread_id}
    with contextlib.closing(sqlite3.connect(gateway.database)) as db:
        stored = db.execute(
            "SELECT kind, outcome FROM audit_task_outcomes WHERE run_id = ? ORDER BY kind",
            (delegated_run.run_id,),
        ).fetchall()
        versions = db.execute("SELECT version_num FROM audit_alembic_version").fetchall()
    assert stored == [("lead", "completed"), ("subagent", "completed")]
    assert versions == [("audit_0001",)]


def test_cost_totals_from_its_router(gateway: Gateway, delegated_run: StreamedRun) -> None:
    with gateway.client() as client:
        totals = client.get("/api/ext/costs/totals").json()
    assert totals["tasks"] >= 2
    assert totals["by_kind"]["subagent"]["tasks"] >= 1
    assert totals["by_kind"]["lead"]["tools"].get("task", 0) >= 1
    assert totals["input_tokens"] > 0 and totals["output_tokens"] > 0
    assert totals["estimated_cost"] > 0 and totals["currency"] == "USD"


def test_otel_spans_carry_the_agent_fingerprint(gateway: Gateway, delegated_run: StreamedRun) -> None:
    with gateway.client() as client:
        spans = client.get("/api/ext/otel/spans", params={"name": "invoke_agent"}).json()["spans"]
    mine = [s for s in spans if s["attributes"].get("gen_ai.conversation.id") == delegated_run.thread_id]
    assert {s["attributes"]["deerflow.task.kind"] for s in mine} == {"lead", "subagent"}
    for span in mine:
        assert span["attributes"]["gen_ai.operation.name"] == "invoke_agent"
        assert re.fullmatch(r"[0-9a-f]{64}", span["attributes"]["deerflow.agent.fingerprint"])
    lead = next(s for s in mine if s["attributes"]["deerflow.task.kind"] == "lead")
    sub = next(s for s in mine if s["attributes"]["deerflow.task.kind"] == "subagent")
    assert sub["parent_span_id"] == lead["span_id"]


def test_an_unchanged_agent_keeps_its_fingerprint_across_runs(gateway: Gateway, delegated_run: StreamedRun) -> None:
    again = _stream_run(gateway, "what is two plus two")
    with gateway.client() as client:
        spans = client.get("/api/ext/otel/spans", params={"name": "invoke_agent"}).json()["spans"]

    def fingerprint(thread: str) -> str:
        return next(
            s["attributes"]["deerflow.agent.fingerprint"]
            for s in spans
            if s["attributes"].get("gen_ai.conversation.id") == thread
            and s["attributes"]["deerflow.task.kind"] == "lead"
        )

    assert fingerprint(again.thread_id) == fingerprint(delegated_run.thread_id)
    assert "changed:" not in gateway.log()  # the drift watcher saw no change


def test_audit_and_host_migrations_coexist(gateway: Gateway, delegated_run: StreamedRun) -> None:
    """After the host and the audit chain both upgraded, neither autogenerate touches the other."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from deerflow_audit.migrate import include_object as audit_include_object
    from deerflow_audit.schema import metadata as audit_metadata
    from sqlalchemy import create_engine, inspect

    from deerflow_ext.persistence.migrate import host_include_object
    from deerflow_ext.persistence.models import Base

    engine = create_engine(f"sqlite:///{gateway.database.as_posix()}")
    try:
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            assert {"alembic_version", "audit_alembic_version", "audit_task_outcomes"} <= tables
            host = MigrationContext.configure(conn, opts={"include_object": host_include_object(["audit_"])})
            host_diff = compare_metadata(host, Base.metadata)
            assert not [op for op in host_diff if "audit_" in repr(op)], host_diff
            audit = MigrationContext.configure(
                conn, opts={"include_object": audit_include_object, "version_table": "audit_alembic_version"}
            )
            assert compare_metadata(audit, audit_metadata) == []
    finally:
        engine.dispose()


@pytest.mark.parametrize("example", sorted(PACKAGES))
def test_the_installed_packages_own_suite_passes(installed_examples: dict[str, str], example: str) -> None:
    """Each package's tests, run as its author would, against the installed package and the kit."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=EXAMPLES / example,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"\d+ passed", done.stdout)


def test_runs_through_the_langgraph_api_are_counted_and_observed(gateway: Gateway) -> None:
    """The examples see runs that come through ``langgraph_sdk`` (stream with a list of
    modes, wait, create + join) exactly as they see the Gateway's own clients' runs."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=f"{gateway.base_url}/api", api_key=None)
    with gateway.client() as http:
        before = http.get("/api/ext/costs/totals").json()
    thread_id = client.threads.create(metadata={"via": "sdk"})["thread_id"]

    def prompt(text: str) -> dict[str, Any]:
        return {"messages": [{"type": "human", "content": [{"type": "text", "text": text}]}]}

    streamed = list(
        client.runs.stream(
            thread_id, "lead_agent", input=prompt("delegate: count me"), stream_mode=["values", "messages-tuple"]
        )
    )
    assert streamed[0].event == "metadata" and streamed[-1].data["status"] == "success"
    client.runs.wait(thread_id, "lead_agent", input=prompt("delegate: and me"))
    created = client.runs.create(thread_id, "lead_agent", input=prompt("delegate: me too"))
    client.runs.join(thread_id, created["run_id"])
    runs = client.runs.list(thread_id)
    assert len(runs) == 3 and {r["outcome"] for r in runs} == {"completed"}

    with gateway.client() as http:
        after = http.get("/api/ext/costs/totals").json()
    assert after["tasks"] - before["tasks"] == 6  # a lead and a subagent per run
    assert after["by_kind"]["lead"]["tools"]["task"] - before["by_kind"]["lead"]["tools"]["task"] == 3

    def audited() -> list[tuple[str, str]]:
        rows: list[tuple[str, str]] = []
        with gateway.client() as http:
            for run in runs:
                rows += [
                    (r["kind"], r["outcome"])
                    for r in http.get("/api/ext/audit/outcomes", params={"run_id": run["run_id"]}).json()["outcomes"]
                ]
        return rows if len(rows) >= 6 else []

    assert sorted(wait(audited)) == [("lead", "completed")] * 3 + [("subagent", "completed")] * 3
    log = gateway.log()
    thread = re.escape(thread_id)
    assert len(re.findall(rf"deerflow_observers: lead \S+ in thread {thread} ended completed", log)) == 3
    assert len(re.findall(rf"deerflow_observers: subagent \S+ in thread {thread} ended completed", log)) == 3
    with gateway.client() as http:
        spans = http.get("/api/ext/otel/spans", params={"name": "invoke_agent"}).json()["spans"]
    mine = [s for s in spans if s["attributes"].get("gen_ai.conversation.id") == thread_id]
    assert sorted(s["attributes"]["deerflow.task.kind"] for s in mine) == ["lead"] * 3 + ["subagent"] * 3
