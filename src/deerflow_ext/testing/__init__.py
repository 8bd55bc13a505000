"""The extension author's test kit: your extensions in a real host, and properties over their order.

Installed with ``deerflow-ext``. Its fixtures are a pytest plugin registered as the
``pytest11`` entry point ``deerflow_ext`` (module :mod:`deerflow_ext.testing.plugin`), so
they are available in any test suite of an environment where DeerFlow is installed — no
``conftest.py`` needed.

Why a real host rather than mocks: the contract's promises (when hooks run, which store a
middleware sees, what a fingerprint covers, how a failure is attributed) are made by the
host, so the only test that can fail for the right reasons is one that runs it. Every
host here is :func:`deerflow_ext.gateway.create_app` on a real ``config.yaml``, a temporary
SQLite database and the embedded, offline model, driven through its HTTP API exactly as an
operator's deployment would, only in-process.

Fixtures
--------

Annotate them for completion and type checks: ``deerflow_host: HostFactory``,
``extension_loader: LoaderFactory`` (both importable from here).

``deerflow_host`` — a factory::

    def test_counts(deerflow_host):
        host = deerflow_host(my_pkg.install, {"threshold": 3})      # or deerflow_host("my_entry_point")
        outcome = host.run("delegate: summarise the plan")           # a lead run with a subagent
        assert outcome.status == "success"
        assert host.app_store.get(MyTotals).tasks == 2
        assert host.client.get("/api/ext/mine/totals").json()["tasks"] == 2
        assert not host.diagnostics                                  # nothing attributed to you failed

    ``deerflow_host(install_or_name, config=None, *, name=None, required=False,
    table_prefix=None, app_config=None, notify_budget=None)`` loads one ``plugins:`` entry
    — an install function (any callable, even one defined inside the test) or an
    entry-point name / ``"module:attr"`` string. Give it a *list* instead to load a whole
    ``plugins:`` list, in order, exactly as ``config.yaml`` would::

        host = deerflow_host([
            Plugin(my_pkg.install, {"threshold": 3}, required=True),
            {"name": "costs", "use": "costs", "config": {"currency": "EUR"}},   # a config.yaml record
            "observers",                                                         # a use string
        ])

    ``app_config`` adds other ``config.yaml`` sections (``{"summarization":
    {"trigger_messages": 4}}``); ``notify_budget`` replaces the 3-second lifecycle budget.
    Hosts are shut down (services stopped, runs drained) when the test ends; call
    ``harness.close()`` to shut one down earlier and observe what ``stop()`` did.

``extension_loader`` — the same first arguments, but only the host's loader runs (no
Gateway, no database); it returns :class:`LoadResult` (``extensions``, ``diagnostics``):
the cheap way to test that ``install`` registers what you expect and that a bad config is
refused with a useful message.

:class:`HostHarness`
    ``run(prompt, *, thread_id=None, goal=None) -> RunOutcome`` streams one lead run over
    SSE and returns after the stream's ``end`` event — i.e. after every ``on_task_stop``
    returned. A prompt ``delegate: <task>`` makes the embedded model delegate ``<task>``
    to a subagent. ``client`` is a ``fastapi.testclient.TestClient`` with the app's
    lifespan entered, for your routers. ``diagnostics`` is the live list of attributed
    diagnostics, ``extensions`` the frozen ``LoadedExtensions`` snapshot, ``app_store``
    the process app store, ``database_url`` the temporary database, ``table_rows(name)``
    its rows (after ``close()`` too).

Properties
----------

One-line checks that run your extension under every sampled order of a ``plugins:`` list
and next to generated neighbours that fail in every way the host promises to contain;
a failure is hypothesis' shrunk counterexample, as ``plugins:`` YAML to paste into a
``config.yaml`` (see ``docs/TESTING.md``)::

    from deerflow_ext.testing import check_same_result

    def test_totals_do_not_depend_on_order():
        check_same_result([my_pkg.install, "costs"], observe=lambda host: totals(host))

:func:`check_same_result`, :func:`check_stack_ordering`, :func:`check_install_rollback`,
:func:`check_notification_budget` and :func:`check_plugins` (all four, observing what an
operator can see); the strategies :func:`orders`, :func:`neighbour_entries`,
:func:`install_failures` and :func:`plugin_lists`. They need ``hypothesis``, which is
imported on first use of one of them, so this package loads where it is absent.

Helpers: :class:`Plugin`, :func:`plugins_yaml`, :func:`install_reference` (how an install
function is named in ``use:``), :func:`parse_sse`, :func:`wait_for` (poll until a
service's background work shows up) and :func:`wait_until`, its ``await``-able twin for async
tests.
"""

from __future__ import annotations

import importlib
from typing import Any

from .entries import Plugin, install_reference, plugin_records, plugins_yaml
from .harness import (
    HostFactory,
    HostHarness,
    LoaderFactory,
    LoadResult,
    RunOutcome,
    SseEvent,
    load_plugins,
    notification_budget,
    parse_sse,
    start_host,
    wait_for,
    wait_until,
)

__all__ = [
    "CONTAINED_BEHAVIOURS",
    "HostFactory",
    "HostHarness",
    "LoadResult",
    "LoaderFactory",
    "Plugin",
    "PropertyFailed",
    "RunOutcome",
    "SseEvent",
    "check_install_rollback",
    "check_notification_budget",
    "check_plugins",
    "check_same_result",
    "check_stack_ordering",
    "install_failures",
    "install_reference",
    "load_plugins",
    "neighbour_entries",
    "notification_budget",
    "orders",
    "parse_sse",
    "plugin_lists",
    "plugin_records",
    "plugins_yaml",
    "start_host",
    "wait_for",
    "wait_until",
]

# Names that need hypothesis, and the module that defines each: imported on first access.
_LAZY = {
    "CONTAINED_BEHAVIOURS": "strategies",
    "PropertyFailed": "properties",
    "check_install_rollback": "properties",
    "check_notification_budget": "properties",
    "check_plugins": "properties",
    "check_same_result": "properties",
    "check_stack_ordering": "properties",
    "install_failures": "strategies",
    "neighbour_entries": "strategies",
    "orders": "strategies",
    "plugin_lists": "strategies",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
