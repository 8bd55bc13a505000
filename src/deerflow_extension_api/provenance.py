"""Who produced a message the model sees, when a user did not write it.

Middleware that injects or rewrites a message (a date reminder, recalled memory, an
activated skill's body) stamps it with these keys in ``additional_kwargs``, because a
message's origin cannot be inferred later. Values are plain strings, so a producer this
release does not know still round-trips. The host treats the keys as its own: it strips
them from client input and from thread-state updates, so a caller cannot forge them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "MESSAGE_CONTENT_KIND_KEY",
    "MESSAGE_PRODUCER_ENTITY_ID_KEY",
    "MESSAGE_PRODUCER_KIND_KEY",
    "PROVENANCE_KEYS",
    "ContentKind",
    "MessageProvenance",
    "provenance_kwargs",
    "read_provenance",
]

MESSAGE_CONTENT_KIND_KEY = "deerflow_content_kind"
MESSAGE_PRODUCER_KIND_KEY = "deerflow_producer_kind"
MESSAGE_PRODUCER_ENTITY_ID_KEY = "deerflow_producer_entity_id"

PROVENANCE_KEYS: frozenset[str] = frozenset(
    {MESSAGE_CONTENT_KIND_KEY, MESSAGE_PRODUCER_KIND_KEY, MESSAGE_PRODUCER_ENTITY_ID_KEY}
)


class ContentKind(StrEnum):
    """What kind of content a stamped message carries."""

    MIDDLEWARE_INJECTION = "middleware_injection"
    MEMORY = "memory"
    DURABLE_CONTEXT = "durable_context"
    SKILL_BODY = "skill_body"
    IMAGE_PAYLOAD = "image_payload"


@dataclass(frozen=True, slots=True)
class MessageProvenance:
    """A message's stamp, read back by :func:`read_provenance`."""

    content_kind: str
    producer_kind: str
    producer_entity_id: str | None = None


def provenance_kwargs(
    content_kind: str, producer_kind: str, *, producer_entity_id: str | None = None
) -> dict[str, str]:
    """The ``additional_kwargs`` entries that stamp a message; the entity key only when given."""
    stamp = {MESSAGE_CONTENT_KIND_KEY: str(content_kind), MESSAGE_PRODUCER_KIND_KEY: str(producer_kind)}
    if producer_entity_id is not None:
        stamp[MESSAGE_PRODUCER_ENTITY_ID_KEY] = str(producer_entity_id)
    return stamp


def read_provenance(message: object) -> MessageProvenance | None:
    """The stamp on ``message``, or ``None`` when it carries no complete, well-typed one.

    A half stamp (one key of the pair) or a non-string value counts as no stamp: the
    reader never guesses.
    """
    extra = getattr(message, "additional_kwargs", None)
    if not isinstance(extra, dict):
        return None
    content_kind = extra.get(MESSAGE_CONTENT_KIND_KEY)
    producer_kind = extra.get(MESSAGE_PRODUCER_KIND_KEY)
    if not isinstance(content_kind, str) or not isinstance(producer_kind, str):
        return None
    entity = extra.get(MESSAGE_PRODUCER_ENTITY_ID_KEY)
    return MessageProvenance(content_kind, producer_kind, entity if isinstance(entity, str) else None)
