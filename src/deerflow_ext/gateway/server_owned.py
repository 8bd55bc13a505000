"""Message metadata only the host writes, removed from whatever a client sends.

The provenance keys (``deerflow_extension_api.PROVENANCE_KEYS``) say which host component
produced a message the model sees; a middleware or an extension may trust them, so a client
must not be able to forge them. They are stripped from a message's ``additional_kwargs``
wherever client data becomes messages: a run's input messages, a run command's ``update``,
and ``POST /threads/{id}/state``. Everything else a client put there is kept, and channels
that hold no messages are left as they are.
"""

from __future__ import annotations

from typing import Any

from deerflow_extension_api import PROVENANCE_KEYS

__all__ = ["SERVER_OWNED_MESSAGE_KEYS", "strip_server_owned", "strip_server_owned_message"]

SERVER_OWNED_MESSAGE_KEYS: frozenset[str] = PROVENANCE_KEYS


def strip_server_owned_message(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` without server-owned ``additional_kwargs`` keys (a copy when any is there)."""
    extra = message.get("additional_kwargs")
    if not isinstance(extra, dict) or not SERVER_OWNED_MESSAGE_KEYS & extra.keys():
        return message
    kept = {key: value for key, value in extra.items() if key not in SERVER_OWNED_MESSAGE_KEYS}
    return {**message, "additional_kwargs": kept}


def strip_server_owned(value: Any) -> Any:
    """``value`` (state values, a command's update) with every message dict in it stripped."""
    if isinstance(value, dict):
        if "content" in value and ("type" in value or "role" in value):
            value = strip_server_owned_message(value)
        return {key: strip_server_owned(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(strip_server_owned(item) for item in value)
    return value
