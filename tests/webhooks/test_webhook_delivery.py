"""Webhooks end to end: ``langgraph_sdk`` runs with a ``webhook`` against a real Gateway (SQLite
and PostgreSQL), delivered to a loopback receiver the test's policy allows.

Every delivery is signed (the Standard Webhooks headers, checked with the secret the Gateway
read from its environment) and carries LangGraph's payload; a receiver that failed first gets
the same delivery (same ``webhook-id``) on a later attempt; one failing every attempt leaves
the delivery ``failed`` and listed; a URL the policy refuses is a 422 and starts no run; a
delivery owed when a Gateway stopped is sent by the next one on the same database.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import UnprocessableEntityError
from webhook_receiver import Receiver

from deerflow_ext.webhooks import secret_bytes, verify
from gateway.sdk_server import SdkServer, sdk_server
from pg_support import PG_UNREACHABLE, fresh_database

SECRET = "test-signing-secret"
HUMAN = {"messages": [{"role": "user", "content": "hello"}]}
SCALE = 120.0


def sections(max_attempts: int = 3) -> dict[str, Any]:
    return {
        "webhooks": {
            "url": {"require_https": False, "disable_loopback": False, "max_url_length": 300},
            "headers": {"X-Team": "t-${{ env.LG_WEBHOOK_TEAM }}"},
            "backoff_seconds": 0.05,
            "max_attempts": max_attempts,
            "timeout_seconds": 5,
        }
    }


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.close()


@pytest.fixture(scope="module")
def environment() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in ("DEERFLOW_WEBHOOK_SECRET", "LG_WEBHOOK_TEAM", "DEERFLOW_TEST_CRON_CLOCK")}
    os.environ.update(
        DEERFLOW_WEBHOOK_SECRET=SECRET, LG_WEBHOOK_TEAM="blue", DEERFLOW_TEST_CRON_CLOCK=f"{time.time()}:{SCALE}"
    )
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, environment: None
) -> Iterator[SdkServer]:
    directory = tmp_path_factory.mktemp(f"webhooks-{request.param}")
    if request.param == "sqlite":
        with sdk_server(directory, sections=sections()) as server:
            yield server
        return
    if PG_UNREACHABLE:
        pytest.skip(PG_UNREACHABLE)
    with fresh_database() as name:
        url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
        with sdk_server(directory, database_url=url, sections=sections()) as server:
            yield server


def _signed(delivery: Any) -> bool:
    return verify(secret_bytes(SECRET), delivery.headers, delivery.body, now=int(time.time()))


def _path(tag: str) -> str:
    return f"/hook/{tag}-{time.monotonic_ns()}"


def test_every_run_kind_delivers_once_signed_with_langgraphs_payload(served: SdkServer, receiver: Receiver) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    thread = client.threads.create()["thread_id"]
    paths = {kind: _path(kind) for kind in ("create", "wait", "stream", "stateless", "pinned")}
    created = client.runs.create(thread, "lead_agent", input=HUMAN, webhook=receiver.url + paths["create"])
    client.runs.join(thread, created["run_id"])
    client.runs.wait(thread, "lead_agent", input=HUMAN, webhook=receiver.url + paths["wait"], metadata={"k": 1})
    list(client.runs.stream(thread, "lead_agent", input=HUMAN, webhook=receiver.url + paths["stream"]))
    client.runs.wait(None, "lead_agent", input=HUMAN, webhook=receiver.url + paths["stateless"])
    # A name is resolved once and the request sent to the address checked, the name kept in Host.
    client.runs.wait(thread, "lead_agent", input=HUMAN, webhook=f"http://localhost:{receiver.port}{paths['pinned']}")

    runs = {run["run_id"]: run for run in client.runs.list(thread, limit=10)}
    for kind, path in paths.items():
        [delivery] = receiver.wait_for(path)
        assert _signed(delivery), kind
        assert delivery.headers["idempotency-key"] == delivery.delivery_id
        assert delivery.headers["x-team"] == "t-blue"  # the configured header, its template filled
        payload = delivery.payload
        assert payload["status"] == "success" and payload["error"] is None
        assert {"run_started_at", "run_ended_at", "webhook_sent_at", "created_at", "kwargs"} <= payload.keys()
        assert payload["values"]["messages"][-1]["type"] == "ai"
        if kind != "stateless":
            run = runs[payload["run_id"]]
            assert (payload["thread_id"], payload["assistant_id"]) == (thread, run["assistant_id"])
            assert payload["multitask_strategy"] == run["multitask_strategy"]
    assert receiver.at(paths["pinned"])[0].headers["host"] == f"localhost:{receiver.port}"
    assert receiver.wait_for(paths["wait"])[0].payload["metadata"] == {"k": 1}
    # Delivered once each: the receiver failed none, so none was sent again.
    assert {kind: len(receiver.at(path)) for kind, path in paths.items()} == dict.fromkeys(paths, 1)


def test_a_receiver_that_failed_first_gets_the_same_delivery_later(served: SdkServer, receiver: Receiver) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    path = _path("flaky")
    receiver.fail(path, 2)
    run = client.runs.wait(None, "lead_agent", input=HUMAN, webhook=receiver.url + path)
    assert run["messages"]
    [delivered] = receiver.wait_for(path)
    attempts = receiver.at(path)
    assert [a.answered for a in attempts] == [500, 500, 200]
    assert {a.delivery_id for a in attempts} == {delivered.delivery_id}  # one idempotency key throughout
    assert all(_signed(a) for a in attempts)
    listed = httpx.get(f"{served.url}/webhooks", params={"run_id": delivered.payload["run_id"]}).json()
    [row] = listed["deliveries"]
    assert (row["status"], row["attempts"], row["last_status_code"]) == ("delivered", 3, 200)


def test_a_receiver_failing_every_attempt_leaves_the_delivery_failed_and_listed(
    served: SdkServer, receiver: Receiver
) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    path = _path("down")
    receiver.fail(path, 1000)
    thread = client.threads.create()["thread_id"]
    run = client.runs.create(thread, "lead_agent", input=HUMAN, webhook=receiver.url + path)
    deadline = time.monotonic() + 30
    while True:
        listed = httpx.get(f"{served.url}/webhooks", params={"run_id": run["run_id"]}).json()["deliveries"]
        if listed and listed[0]["status"] == "failed":
            break
        assert time.monotonic() < deadline, listed
        time.sleep(0.05)
    assert listed[0]["attempts"] == 3 and listed[0]["last_error"] == "the receiver answered 500"
    assert len(receiver.at(path)) == 3  # max_attempts, then no more
    metrics = httpx.get(served.url.removesuffix("/api") + "/metrics").text
    assert 'deerflow_webhook_deliveries_total{result="failed"}' in metrics


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://10.1.2.3/hook", "disable_private_ips"),
        ("http://169.254.169.254/latest/meta-data", "disable_private_ips"),
        ("ftp://127.0.0.1/hook", "scheme"),
        ("/hook", "relative URL"),
        ("http://127.0.0.1/" + "x" * 300, "max_url_length"),
        ("http://user:pw@127.0.0.1/hook", "credentials"),
    ],
)
def test_a_url_the_policy_refuses_is_a_422_and_starts_no_run(served: SdkServer, url: str, says: str) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    thread = client.threads.create()["thread_id"]
    with pytest.raises(UnprocessableEntityError) as refused:
        client.runs.create(thread, "lead_agent", input=HUMAN, webhook=url)
    assert says in str(refused.value)
    assert client.runs.list(thread) == []
    answer = httpx.post(f"{served.url}/runs/crons", json={"schedule": "0 9 * * *", "webhook": url, "input": HUMAN})
    assert answer.status_code == 422 and says in answer.json()["detail"]


def test_a_crons_runs_each_deliver_their_webhook(served: SdkServer, receiver: Receiver) -> None:
    client = get_sync_client(url=served.url, api_key=None)
    path = _path("cron")
    cron = client.crons.create("lead_agent", schedule="* * * * *", input=HUMAN, webhook=receiver.url + path)
    try:
        deliveries = receiver.wait_for(path, 2)
    finally:
        client.crons.delete(cron["cron_id"])
    assert all(_signed(d) for d in deliveries)
    ticks = [d.payload["metadata"]["cron_tick"] for d in deliveries]
    assert all(d.payload["metadata"]["cron_id"] == cron["cron_id"] for d in deliveries)
    assert len(set(ticks)) == len(ticks)  # one delivery per tick's run


def test_a_delivery_owed_when_the_gateway_stopped_is_sent_by_the_next_one(
    tmp_path: Path, receiver: Receiver, environment: None
) -> None:
    database = f"sqlite+aiosqlite:///{tmp_path / 'restart.db'}"
    path = _path("restart")
    receiver.fail(path, 1000)
    with sdk_server(tmp_path / "first", database_url=database, sections=sections(max_attempts=50)) as server:
        client = get_sync_client(url=server.url, api_key=None)
        client.runs.wait(None, "lead_agent", input=HUMAN, webhook=receiver.url + path)
        deadline = time.monotonic() + 30
        while not receiver.at(path):
            assert time.monotonic() < deadline
            time.sleep(0.05)
    receiver.fail(path, 0)  # the receiver recovers while no Gateway runs
    failed_before = len(receiver.at(path))
    with sdk_server(tmp_path / "second", database_url=database, sections=sections(max_attempts=50)):
        [delivered] = receiver.wait_for(path)
    assert _signed(delivered)
    assert len(receiver.at(path)) > failed_before  # sent by the second Gateway
    assert Counter(d.delivery_id for d in receiver.delivered(path)) == {delivered.delivery_id: 1}
