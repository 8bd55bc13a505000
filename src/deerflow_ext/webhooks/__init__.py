"""Webhooks: the ``webhook`` URL a run (or a cron's runs) is called back on when it ends.

This package owns the whole way from a submitted URL to a delivered request:

- applying the URL policy (``deerflow_ext.url_policy``: ``langgraph.json``'s ``webhooks.url``,
  shared with MCP servers' URLs) to a webhook: checked when the URL is submitted, a refusal
  being a 422, and again at each delivery, connecting to the one address it checked;
- the outbox row a run's end owes (``order``: LangGraph's payload), which the host store
  writes in the run's end transaction (``persistence.webhook_table``), and the outbox's other
  reads and writes (``outbox``: claims with ``FOR UPDATE SKIP LOCKED``, settling, listing);
- the delivery worker (``delivery``: httpx, exponential backoff, a bounded number of
  attempts, then ``failed``), the signature (``signing``: Standard Webhooks' HMAC-SHA256
  headers, timestamped against replay, the delivery id as idempotency key), the configured
  headers (``headers``: ``${{ env.VAR }}`` templates) and the counters ``/metrics`` shows.

It does not know how runs are made: the Gateway checks the URL and hands the run a
:class:`WebhookOrder`; the run's worker turns it into the row. Delivery is at-least-once
(docs/RELIABILITY.md, "Webhooks").
"""

from ..url_policy import Target, UrlPolicy
from .delivery import Courier, DeliverySettings
from .headers import WebhookConfigError, filled_headers
from .metrics import WebhookCollector
from .order import WebhookOrder
from .outbox import DELIVERED, FAILED, Claimed, Outbox
from .service import DISABLED, WebhookService, WebhookUrlError
from .signing import secret_bytes, sign, verify

__all__ = [
    "DELIVERED",
    "DISABLED",
    "FAILED",
    "Claimed",
    "Courier",
    "DeliverySettings",
    "Outbox",
    "Target",
    "UrlPolicy",
    "WebhookCollector",
    "WebhookConfigError",
    "WebhookOrder",
    "WebhookService",
    "WebhookUrlError",
    "filled_headers",
    "secret_bytes",
    "sign",
    "verify",
]
