"""The Gateway's webhooks, built once from ``config.yaml`` and the environment: what the routes
ask (:meth:`WebhookService.accept`: a URL checked, or the reason it is refused), and the two
background tasks the lifespan starts and stops: the delivery worker, and the hourly pruning of
deliveries settled more than ``keep_settled_days`` ago (also once at start, so a Gateway
restarted more often than hourly still prunes)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from ..background_task import Sweeper
from ..config.webhooks_config import WebhooksConfig
from ..persistence.transactions import Transactions
from ..url_policy import UrlPolicy, UrlRefusedError
from .delivery import Courier, DeliverySettings
from .headers import filled_headers
from .order import WebhookOrder
from .outbox import Outbox
from .signing import secret_bytes

__all__ = ["DISABLED", "WebhookService", "WebhookUrlError"]

logger = logging.getLogger("deerflow_ext.webhooks")

WebhookUrlError = UrlRefusedError
"""A webhook URL refused (by the shared ``url_policy``, or because webhooks are off): the
name the Gateway's routes catch."""

PRUNE_INTERVAL_SECONDS = 3600.0

DISABLED = "webhook: webhooks are switched off on this Gateway (http.disable_webhooks); leave webhook out"


class WebhookService:
    def __init__(
        self,
        config: WebhooksConfig,
        transactions: Transactions,
        environ: Mapping[str, str],
        *,
        disabled: bool = False,
        **courier: Any,
    ) -> None:
        self.disabled = disabled
        self.policy = UrlPolicy.of(config.url)
        secret = environ.get(config.signing_secret_env) or None
        # Said once, when a first webhook is accepted: a Gateway whose clients never ask for
        # one has nothing to sign, and a warning at every start would teach operators to
        # ignore the log.
        self._unsigned_variable = config.signing_secret_env if secret is None else None
        settings = DeliverySettings(
            policy=self.policy,
            headers=filled_headers(config, environ),
            secret=None if secret is None else secret_bytes(secret),
            allowed_fields=None if config.allowed_fields is None else tuple(config.allowed_fields),
            max_attempts=config.max_attempts,
            backoff_seconds=config.backoff_seconds,
            max_backoff_seconds=config.max_backoff_seconds,
            timeout_seconds=config.timeout_seconds,
        )
        self.outbox = Outbox(transactions)
        self.courier = Courier(self.outbox, settings, **courier)
        self._keep_settled = timedelta(days=config.keep_settled_days)
        self.pruner = Sweeper("webhook outbox", self.prune_settled, PRUNE_INTERVAL_SECONDS)

    async def accept(self, url: str) -> None:
        """Check a submitted URL as a delivery would (its name resolved, every address
        checked); :class:`WebhookUrlError` saying why not."""
        if self.disabled:
            raise WebhookUrlError(DISABLED)
        await self.policy.resolve(self.policy.check(url))
        if self._unsigned_variable is not None:
            logger.warning(
                "webhooks: %s is not set; deliveries are sent unsigned (no webhook-signature header)",
                self._unsigned_variable,
            )
            self._unsigned_variable = None

    def order(
        self, url: str, *, assistant_id: str, metadata: Mapping[str, Any], kwargs: Mapping[str, Any], strategy: str
    ) -> WebhookOrder:
        return WebhookOrder(url, assistant_id, dict(metadata), dict(kwargs), strategy, wake=self.courier.wake)

    async def prune_settled(self) -> int:
        """Delete the deliveries settled more than ``keep_settled_days`` ago; how many."""
        pruned = await self.outbox.prune_settled(datetime.now(UTC) - self._keep_settled)
        if pruned:
            logger.info("webhooks: deleted %d delivery record(s) settled over %s ago", pruned, self._keep_settled)
        return pruned

    async def start(self) -> None:
        await self.courier.start()
        try:
            await self.prune_settled()
        except Exception:  # an old record outliving its time is no reason not to start
            logger.exception("webhooks: pruning settled deliveries failed; trying again in an hour")
        self.pruner.start()

    async def stop(self) -> None:
        await self.pruner.stop()
        await self.courier.stop()
