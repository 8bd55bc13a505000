"""The contract's own version.

The host compares an extension's ``@extension(api=...)`` marker against this value, so
it lives in a module of its own: importing it never drags in anything else.
"""

from __future__ import annotations

__all__ = ["API_VERSION"]

API_VERSION = "0.2.6"
