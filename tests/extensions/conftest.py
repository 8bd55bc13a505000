"""Fixtures for the extension-runtime tests (helpers live in ``isolation_helpers``)."""

from __future__ import annotations

import pytest

from deerflow_ext.extensions.boundary.diagnostics import DiagnosticsList
from extensions.isolation_helpers import tool_runs


@pytest.fixture(autouse=True)
def _reset_tool_runs() -> None:
    tool_runs.clear()


@pytest.fixture
def diagnostics() -> DiagnosticsList:
    """A fresh live list, so a test sees exactly the diagnostics it caused."""
    return DiagnosticsList()
