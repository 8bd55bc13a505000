"""The delivery worker: one background task per Gateway process that sends what the outbox owes.

It costs nothing per run: a run with a webhook wakes it after its end committed
(:meth:`Courier.wake`), a run without one never touches it. Otherwise it sleeps until the
earliest pending row is due, and at most ``recheck`` seconds: that bound is how a row left by
another process (killed, or on PostgreSQL simply busier) is picked up; at start it reads the
outbox once, so what a stopped process still owed is sent by the next one.

An attempt: the URL is checked by the policy again and its host resolved once, every address
checked, and the request sent to that address (``Host`` and TLS's SNI keep the name, so
certificates are verified against it); redirects are not followed and the environment's
proxies are not used (either would connect somewhere the policy did not check). A 2xx
answer settles the row ``delivered``; anything else (another status, a timeout, a refused
connection) is retried after ``backoff_seconds`` doubled per attempt (at most
``max_backoff_seconds``), until ``max_attempts`` have failed: the row is then ``failed``,
logged with its run, counted (``metrics``) and listed (``GET /api/webhooks``). A URL the
policy refuses at delivery (its name now resolves to a private address) fails at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx

from ..background_task import stop_task
from ..url_policy import UrlPolicy, UrlRefusedError
from . import metrics
from .outbox import Claimed, Outbox
from .signing import ID_HEADER, IDEMPOTENCY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign

__all__ = ["Courier", "DeliverySettings"]

logger = logging.getLogger("deerflow_ext.webhooks")

_RECHECK_SECONDS = 30.0
_BATCH = 32
_MIN_SLEEP_SECONDS = 0.2


@dataclass(frozen=True)
class DeliverySettings:
    policy: UrlPolicy
    headers: Mapping[str, str]
    secret: bytes | None
    allowed_fields: tuple[str, ...] | None = None
    max_attempts: int = 8
    backoff_seconds: float = 2.0
    max_backoff_seconds: float = 600.0
    timeout_seconds: float = 10.0

    @property
    def lease_seconds(self) -> float:
        """How long a claimed row is this process's: one attempt's bound and a margin."""
        return self.timeout_seconds * 2 + 5.0

    def retry_delay(self, attempts: int) -> float:
        return float(min(self.backoff_seconds * 2 ** (attempts - 1), self.max_backoff_seconds))


class Courier:
    def __init__(
        self,
        outbox: Outbox,
        settings: DeliverySettings,
        *,
        recheck: float = _RECHECK_SECONDS,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.outbox = outbox
        self.settings = settings
        self._recheck = recheck
        self._woken = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._client = httpx.AsyncClient(
            timeout=settings.timeout_seconds, follow_redirects=False, trust_env=False, transport=transport
        )

    async def start(self) -> None:
        earliest = await self.outbox.earliest()
        self._task = asyncio.get_running_loop().create_task(self._run(earliest), name="deerflow-webhook-courier")

    def wake(self) -> None:
        """A run's end wrote a row: look now."""
        self._woken.set()

    async def stop(self) -> None:
        task, self._task = self._task, None
        await stop_task(task)
        await self._client.aclose()

    async def _sleep(self, earliest: datetime | None) -> None:
        seconds = self._recheck
        if earliest is not None:
            seconds = min(seconds, max((earliest - datetime.now(UTC)).total_seconds(), 0.0))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._woken.wait(), seconds)
        self._woken.clear()

    async def _run(self, earliest: datetime | None) -> None:
        while True:
            await self._sleep(earliest)
            try:
                while True:
                    claimed = await self.outbox.claim(datetime.now(UTC), self.settings.lease_seconds, _BATCH)
                    if claimed:
                        await asyncio.gather(*(self._attempt(row) for row in claimed))
                    if len(claimed) < _BATCH:
                        break
                earliest = await self.outbox.earliest()
            except Exception:  # the database is away: look again after the recheck bound
                logger.exception("webhooks: reading the outbox failed; retrying in %.0fs", self._recheck)
                earliest = None
            if earliest is not None and earliest <= datetime.now(UTC):
                # Due but not claimed: another process is claiming it right now (skipped, not
                # waited for). Look again shortly, not in a busy loop.
                await asyncio.sleep(_MIN_SLEEP_SECONDS)

    def _body(self, row: Claimed) -> bytes:
        payload = {**row.payload, "webhook_sent_at": datetime.now(UTC).isoformat()}
        fields = self.settings.allowed_fields
        if fields is not None:
            payload = {k: v for k, v in payload.items() if k in fields}
        return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def _headers(self, row: Claimed, body: bytes) -> dict[str, str]:
        timestamp = int(time.time())
        headers = {
            **self.settings.headers,
            "Content-Type": "application/json",
            ID_HEADER: row.delivery_id,
            IDEMPOTENCY_HEADER: row.delivery_id,
            TIMESTAMP_HEADER: str(timestamp),
        }
        if self.settings.secret is not None:
            headers[SIGNATURE_HEADER] = sign(self.settings.secret, row.delivery_id, timestamp, body)
        return headers

    async def _send(self, row: Claimed) -> httpx.Response:
        """One request, to the address the policy checked (see the module)."""
        policy = self.settings.policy
        target = policy.check(row.url)
        address = await policy.resolve(target)
        url = httpx.URL(row.url)
        body = self._body(row)
        headers = self._headers(row, body)
        headers["Host"] = url.netloc.decode("ascii")
        extensions = {"sni_hostname": url.host} if target.scheme == "https" else {}
        request = self._client.build_request(
            "POST", url.copy_with(host=address), content=body, headers=headers, extensions=extensions
        )
        return await self._client.send(request)

    async def _attempt(self, row: Claimed) -> None:
        status_code: int | None = None
        try:
            response = await self._send(row)
            status_code = response.status_code
            if 200 <= status_code < 300:
                metrics.count("attempts", "ok")
                metrics.count("deliveries", "delivered")
                await self.outbox.delivered(row.delivery_id, status_code, datetime.now(UTC))
                return
            error = f"the receiver answered {status_code}"
        except UrlRefusedError as exc:
            metrics.count("attempts", "error")
            await self._give_up(row, None, str(exc))
            return
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        metrics.count("attempts", "error")
        if row.attempts >= self.settings.max_attempts:
            await self._give_up(row, status_code, error)
            return
        delay = self.settings.retry_delay(row.attempts)
        logger.info(
            "webhook %s of run %s: attempt %d failed (%s); again in %.1fs",
            row.delivery_id,
            row.run_id,
            row.attempts,
            error,
            delay,
        )
        now = datetime.now(UTC)
        await self.outbox.attempt_failed(row.delivery_id, status_code, error, now + timedelta(seconds=delay), now)

    async def _give_up(self, row: Claimed, status_code: int | None, error: str) -> None:
        metrics.count("deliveries", "failed")
        logger.warning(
            "webhook %s of run %s failed after %d attempt(s): %s", row.delivery_id, row.run_id, row.attempts, error
        )
        await self.outbox.attempt_failed(row.delivery_id, status_code, error, None, datetime.now(UTC))
