"""Run evidence readers over the host's run records and run journal (DeerFlow's §4.9 host).

A reader is bound to one owner scope when it is made: a request's reader to its
principal's ``user_id`` (``resolve_run_evidence_reader``), the services' reader to every
user (``ExtensionRuntimeDeps.run_evidence_reader``). No call takes a user id: an extension
cannot widen its scope, and a cursor issued under one scope is refused under another.

Limits as DeerFlow's: ``limit`` an ``int`` from 1 to 2000, ``after_seq`` ``None`` or an
``int`` >= 0, anything else ``ValueError``. A cursor is urlsafe base64 (unpadded) of compact
sorted JSON ``{"q": position, "r": run id, "s": scope fingerprint, "v": 1}``; ``q`` here is
the run's change position in microseconds since the epoch (``records.journal``), where
DeerFlow keeps a change counter. An empty page returns the cursor it was given.

The feed holds back changes of the last ``settle_seconds`` (default 2 s): a run's change
position is taken before its write commits, so a change could otherwise commit behind a
cursor already handed out and never be listed. Readers that must see the newest change at
once pass ``settle_seconds=0`` and accept that window.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from deerflow_extension_api import (
    InvalidRunEvidenceCursor,
    RunEventPage,
    RunEventView,
    RunPage,
    RunStatusView,
)

from ...persistence.records import HostStore

__all__ = ["DEFAULT_SETTLE_SECONDS", "MAX_LIMIT", "HostRunEvidenceReader"]

MAX_LIMIT = 2000
DEFAULT_SETTLE_SECONDS = 2.0
_VERSION = 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECRET_WORDS = ("token", "secret", "password", "authorization", "api_key", "apikey", "cookie")


def _scope(user_id: str | None) -> str:
    return hashlib.sha256((user_id if user_id is not None else "*").encode()).hexdigest()[:16]


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _micros(at: datetime) -> int:
    return (_aware(at) - _EPOCH) // timedelta(microseconds=1)


def _iso(at: datetime | None) -> str:
    return _aware(at).isoformat() if at is not None else ""


def _check_limit(limit: object) -> int:
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be an integer between 1 and {MAX_LIMIT}")
    return limit


def _redacted(metadata: object) -> dict[str, Any]:
    """Metadata without values under secret-looking keys (DeerFlow redacts them too)."""
    if not isinstance(metadata, dict):
        return {}
    return {
        key: "[redacted]" if any(word in str(key).lower() for word in _SECRET_WORDS) else copy.deepcopy(value)
        for key, value in metadata.items()
    }


class HostRunEvidenceReader:
    """``RunEvidenceReader`` over ``HostStore``, bound to ``user_id`` (``None``: every user's)."""

    def __init__(
        self, store: HostStore, *, user_id: str | None, settle_seconds: float = DEFAULT_SETTLE_SECONDS
    ) -> None:
        self._store = store
        self._user_id = user_id
        self._settle = timedelta(seconds=settle_seconds)

    def _encode(self, position: int, run_id: str) -> str:
        payload = {"q": position, "r": run_id, "s": _scope(self._user_id), "v": _VERSION}
        text = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(text).decode("ascii").rstrip("=")

    def _decode(self, cursor: str | None) -> tuple[datetime, str] | None:
        if cursor is None:
            return None
        try:
            payload = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        except (TypeError, ValueError, binascii.Error) as exc:
            raise InvalidRunEvidenceCursor("invalid run evidence cursor") from exc
        if not isinstance(payload, dict) or payload.get("v") != _VERSION:
            raise InvalidRunEvidenceCursor("unsupported run evidence cursor")
        if payload.get("s") != _scope(self._user_id):
            raise InvalidRunEvidenceCursor("run evidence cursor scope does not match this reader")
        position, run_id = payload.get("q"), payload.get("r")
        if type(position) is not int or not isinstance(run_id, str):
            raise InvalidRunEvidenceCursor("invalid run evidence cursor")
        return _EPOCH + timedelta(microseconds=position), run_id

    async def list_changed_runs(self, *, cursor: str | None, limit: int) -> RunPage:
        limit = _check_limit(limit)
        after = self._decode(cursor)
        before = datetime.now(UTC) - self._settle if self._settle else None
        rows = await self._store.changed_runs(self._user_id, after, before, limit + 1)
        page = rows[:limit]
        next_cursor = self._encode(_micros(page[-1].changed_at), page[-1].id) if page else cursor
        return RunPage(tuple(_status(row) for row in page), next_cursor, len(rows) > limit)

    async def get_run_status(self, *, thread_id: str, run_id: str) -> RunStatusView | None:
        if not isinstance(thread_id, str) or not isinstance(run_id, str):
            return None
        row = await self._store.visible_run(thread_id, run_id, self._user_id)
        return _status(row) if row is not None else None

    async def list_run_events(self, *, thread_id: str, run_id: str, after_seq: int | None, limit: int) -> RunEventPage:
        limit = _check_limit(limit)
        if after_seq is not None and (type(after_seq) is not int or after_seq < 0):
            raise ValueError("after_seq must be a non-negative integer or None")
        if await self.get_run_status(thread_id=thread_id, run_id=run_id) is None:
            return RunEventPage(next_after_seq=after_seq)  # absent and invisible look the same
        rows = await self._store.run_events(thread_id, run_id, after_seq, limit + 1)
        page = rows[:limit]
        views = tuple(
            RunEventView(
                thread_id=row.thread_id,
                run_id=row.run_id,
                seq=row.seq,
                event_type=row.event_type,
                category=row.category,
                content=copy.deepcopy(row.content),
                metadata=_redacted(row.metadata),
                created_at=_iso(row.created_at),
            )
            for row in page
        )
        return RunEventPage(views, page[-1].seq if page else after_seq, len(rows) > limit)


def _status(row: Any) -> RunStatusView:
    return RunStatusView(
        thread_id=row.thread_id,
        run_id=row.id,
        status=row.status,
        created_at=_iso(row.created_at),
        updated_at=_iso(row.changed_at),
        error=row.error if isinstance(row.error, str) else None,
        stop_reason=row.cancel_requested if isinstance(row.cancel_requested, str) else None,
    )
