"""One delivery attempt, seen from the wire (httpx's ``MockTransport`` in place of the network):
the request goes to the address the policy checked, the name kept in ``Host`` and TLS's SNI;
the body is the payload (``allowed_fields`` only, when set) with ``webhook_sent_at``; what the
receiver answers decides what the outbox records."""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

import httpx

from deerflow_ext.config.webhooks_config import WebhookUrlPolicyConfig
from deerflow_ext.webhooks import Claimed, Courier, DeliverySettings, UrlPolicy, secret_bytes, verify

SECRET = secret_bytes("courier-secret")


class FakeOutbox:
    def __init__(self) -> None:
        self.settled: list[tuple[str, Any]] = []

    async def delivered(self, delivery_id: str, status_code: int, now: datetime) -> None:
        self.settled.append(("delivered", status_code))

    async def attempt_failed(self, delivery_id: str, code: int | None, error: str, retry_at: Any, now: Any) -> None:
        self.settled.append(("retry" if retry_at is not None else "failed", error))


def _courier(answer: int, seen: list[httpx.Request], **settings: Any) -> tuple[Courier, FakeOutbox]:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(answer)

    outbox = FakeOutbox()
    policy = UrlPolicy.of(WebhookUrlPolicyConfig(disable_loopback=False))
    delivery = DeliverySettings(policy=policy, headers={"X-Static": "v"}, secret=SECRET, max_attempts=2, **settings)
    return Courier(outbox, delivery, transport=httpx.MockTransport(handler)), outbox  # type: ignore[arg-type]


def _row(attempts: int = 1, url: str = "https://localhost:8443/hook?x=1") -> Claimed:
    return Claimed("d-1", "r-1", url, {"run_id": "r-1", "status": "success", "values": {"a": 1}}, attempts)


async def test_the_request_goes_to_the_checked_address_under_the_name_it_was_given() -> None:
    seen: list[httpx.Request] = []
    courier, outbox = _courier(204, seen)
    await courier._attempt(_row())
    await courier.stop()
    [request] = seen
    assert request.url.host in ("127.0.0.1", "::1") and request.url.port == 8443 and request.url.query == b"x=1"
    assert request.headers["host"] == "localhost:8443"
    assert request.extensions["sni_hostname"] == "localhost"
    assert request.headers["x-static"] == "v" and request.headers["idempotency-key"] == "d-1"
    assert verify(SECRET, dict(request.headers), request.content, now=int(time.time()))
    body = json.loads(request.content)
    assert body["values"] == {"a": 1} and "webhook_sent_at" in body
    assert outbox.settled == [("delivered", 204)]


async def test_allowed_fields_send_only_those() -> None:
    seen: list[httpx.Request] = []
    courier, _ = _courier(200, seen, allowed_fields=("run_id", "status"))
    await courier._attempt(_row())
    await courier.stop()
    assert json.loads(seen[0].content) == {"run_id": "r-1", "status": "success"}


async def test_a_failed_attempt_is_retried_until_the_last_then_failed() -> None:
    seen: list[httpx.Request] = []
    courier, outbox = _courier(503, seen)
    await courier._attempt(_row(attempts=1))
    await courier._attempt(_row(attempts=2))
    await courier.stop()
    assert outbox.settled == [("retry", "the receiver answered 503"), ("failed", "the receiver answered 503")]


async def test_a_url_the_policy_now_refuses_fails_at_once_without_a_request() -> None:
    seen: list[httpx.Request] = []
    courier, outbox = _courier(200, seen)
    await courier._attempt(_row(url="https://10.0.0.8/hook"))
    await courier.stop()
    assert seen == [] and outbox.settled[0][0] == "failed" and "disable_private_ips" in outbox.settled[0][1]
