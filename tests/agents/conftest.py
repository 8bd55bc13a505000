"""Fixtures for the agent-host tests; the helpers live in ``agent_helpers`` (importable by name)."""

from __future__ import annotations

from agent_helpers import notify_loop, rec_ext, recorder, restore_process_extensions

__all__ = ["notify_loop", "rec_ext", "recorder", "restore_process_extensions"]
