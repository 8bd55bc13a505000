"""Raises a CancelledError while being imported (no loop is cancelling anything)."""

import asyncio

raise asyncio.CancelledError("faulty_import_cancel")
