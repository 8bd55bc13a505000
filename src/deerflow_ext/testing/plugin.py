"""The kit's pytest fixtures, registered as the ``pytest11`` entry point ``deerflow_ext``.

Every test session of an environment where DeerFlow is installed loads this module, so it
imports nothing from the host at import time: it must never be the reason a test session
fails to start. See :mod:`deerflow_ext.testing` for the fixtures' documentation.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from .entries import Plugin, PluginLike
from .harness import HostFactory, HostHarness, LoaderFactory, LoadResult, load_plugins, start_host

__all__ = ["deerflow_host", "entries_of", "extension_loader"]


def entries_of(
    install_or_plugins: PluginLike | Sequence[PluginLike],
    config: Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
    required: bool = False,
    table_prefix: str | None = None,
) -> list[PluginLike]:
    """The fixtures' two call shapes as one ``plugins:`` list.

    One entry: ``(install_or_name, config, name=, required=, table_prefix=)``. Several: a
    list whose items are :class:`~deerflow_ext.testing.Plugin`, ``config.yaml`` records
    (mappings whose ``use`` may be an install function), ``use`` strings or install
    functions; each carries its own config then, so the keyword arguments are refused.
    """
    per_entry = config is not None or name is not None or required or table_prefix is not None
    if isinstance(install_or_plugins, (Plugin, Mapping)) or (
        isinstance(install_or_plugins, Sequence) and not isinstance(install_or_plugins, str)
    ):
        if per_entry:
            raise TypeError("with Plugin entries or records, give config, name, required and table_prefix per entry")
        if isinstance(install_or_plugins, (Plugin, Mapping)):
            return [install_or_plugins]
        return list(install_or_plugins)
    return [Plugin(install_or_plugins, dict(config or {}), name, required=required, table_prefix=table_prefix)]


@pytest.fixture
def deerflow_host(tmp_path: Path) -> Iterator[HostFactory]:
    """Factory: ``deerflow_host(install_or_name_or_plugins, config=None, *, name=None,
    required=False, table_prefix=None, app_config=None, notify_budget=None) -> HostHarness``
    (:class:`HostFactory`)."""
    harnesses: list[HostHarness] = []
    counter = itertools.count(1)

    # The arguments are HostFactory's (the fixture's declared type): passed on to entries_of.
    def start(
        *entry: Any,
        app_config: Mapping[str, Any] | None = None,
        notify_budget: float | None = None,
        **options: Any,
    ) -> HostHarness:
        directory = tmp_path / f"deerflow-host-{next(counter)}"
        harness = start_host(
            entries_of(*entry, **options), directory, app_config=app_config, notify_budget=notify_budget
        )
        harnesses.append(harness)
        return harness

    yield start
    for harness in reversed(harnesses):
        harness.close()


@pytest.fixture
def extension_loader() -> LoaderFactory:
    """Factory: ``extension_loader(install_or_name_or_plugins, config=None, *, name=None,
    required=False, table_prefix=None) -> LoadResult`` — the host's loader only, no Gateway
    (:class:`LoaderFactory`)."""

    def load(*entry: Any, **options: Any) -> LoadResult:  # LoaderFactory's arguments
        return load_plugins(entries_of(*entry, **options))

    return load
