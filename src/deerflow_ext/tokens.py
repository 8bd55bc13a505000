"""Token usage: the one triple the model reports, the run result carries and the runs table stores.

A run's usage travels from the graph state (``run_token_usage``, a dict the
``TokenUsageMiddleware`` keeps), through ``LeadRunResult`` to the ``runs`` row and the API's
``token_usage``. One frozen value and one way to read it from a mapping or an object keep
the three names and their coercion (missing or ``None`` counts as 0) in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["TOKEN_KEYS", "TokenUsage"]

#: The three counters, in the order every table and body lists them.
TOKEN_KEYS: tuple[str, str, str] = ("input_tokens", "output_tokens", "total_tokens")


@dataclass(frozen=True)
class TokenUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0

    @classmethod
    def of(cls, source: object) -> TokenUsage:
        """The counters of a mapping (``usage_metadata``, graph state) or of an object with
        the three attributes; a missing or ``None`` counter is 0."""
        if isinstance(source, Mapping):
            values = [source.get(key) for key in TOKEN_KEYS]
        else:
            values = [getattr(source, key, None) for key in TOKEN_KEYS]
        return cls(*(int(value or 0) for value in values))
