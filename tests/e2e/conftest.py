"""The e2e suites share one installation of the example packages per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.example_packages import install_examples


@pytest.fixture(scope="session")
def installed_examples() -> Iterator[dict[str, str]]:
    """Every example package pip-installed for real, once per session: ``{entry point: use}``."""
    yield from install_examples()
