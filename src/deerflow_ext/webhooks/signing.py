"""How a receiver knows a delivery is ours, recent, and which one it is.

The headers are the Standard Webhooks ones (standardwebhooks.com), so a receiver can verify
with any library that speaks them, or by hand:

- ``webhook-id``: the delivery's id, the same on every attempt: the idempotency key a
  receiver dedupes on (also sent as ``Idempotency-Key``), since delivery is at-least-once;
- ``webhook-timestamp``: Unix seconds of this attempt; a receiver refuses one too far from its
  clock, which is what makes a captured request useless to replay later;
- ``webhook-signature``: ``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`` under the
  secret from the environment variable ``webhooks.signing_secret_env`` names
  (``DEERFLOW_WEBHOOK_SECRET``). A secret written ``whsec_<base64>`` is decoded as Standard
  Webhooks' are; any other is used as its UTF-8 bytes. No secret: no signature header.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping

__all__ = [
    "IDEMPOTENCY_HEADER",
    "ID_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "secret_bytes",
    "sign",
    "verify",
]

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"


def secret_bytes(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        try:
            return base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        except binascii.Error:
            pass
    return secret.encode("utf-8")


def sign(secret: bytes, delivery_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value of one attempt."""
    signed = f"{delivery_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def verify(secret: bytes, headers: Mapping[str, str], body: bytes, *, now: int, tolerance: int = 300) -> bool:
    """What a receiver checks: a signature of ours over this body, at most ``tolerance``
    seconds from ``now`` (the replay bound)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        timestamp = int(lowered[TIMESTAMP_HEADER])
        delivery_id = lowered[ID_HEADER]
        offered = lowered[SIGNATURE_HEADER].split()
    except (KeyError, ValueError):
        return False
    if abs(now - timestamp) > tolerance:
        return False
    expected = sign(secret, delivery_id, timestamp, body)
    return any(hmac.compare_digest(expected, candidate) for candidate in offered)
