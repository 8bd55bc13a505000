"""An exception as the host's log lines, diagnostics and run errors show it: one rule.

``ValueError: bad port`` — the type and the message — or just ``ValueError`` when the message
is empty, so no line ends in a dangling colon. Provider errors embed whole JSON bodies across
many lines; ``one_line`` collapses the whitespace and ``limit`` bounds the message.
"""

from __future__ import annotations

__all__ = ["exception_text"]


def exception_text(exc: BaseException, *, one_line: bool = False, limit: int | None = None) -> str:
    """``TypeName: message``, or ``TypeName`` when the message is empty."""
    text = " ".join(str(exc).split()) if one_line else str(exc)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
