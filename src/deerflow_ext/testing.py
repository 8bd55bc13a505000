"""The extension author's test kit: a pytest plugin that runs your extension in a real host.

Installed with ``deerflow-ext`` and registered as the ``pytest11`` entry point
``deerflow_ext``, so its fixtures are available in any test suite of an environment where
DeerFlow is installed — no ``conftest.py`` needed.

Why a real host rather than mocks: the contract's promises (when hooks run, which store a
middleware sees, what a fingerprint covers, how a failure is attributed) are made by the
host, so the only test that can fail for the right reasons is one that runs it. Every
fixture here builds the Gateway with :func:`deerflow_ext.gateway.create_app` on a
temporary SQLite database and drives it through its HTTP API on the embedded, offline
model, exactly as an operator's deployment would, only in-process.

Fixtures
--------

``deerflow_host`` — a factory::

    def test_counts(deerflow_host):
        host = deerflow_host(my_pkg.install, {"threshold": 3})      # or deerflow_host("my_entry_point")
        outcome = host.run("delegate: summarise the plan")           # a lead run with a subagent
        assert outcome.status == "success"
        assert host.app_store.get(MyTotals).tasks == 2
        assert host.client.get("/api/ext/mine/totals").json()["tasks"] == 2
        assert not host.diagnostics                                  # nothing attributed to you failed

    ``deerflow_host(install_or_name, config=None, *, name=None, required=False,
    table_prefix=None, app_config=None)`` loads one ``plugins:`` entry — an install
    function (any callable, even one defined inside the test) or an entry-point name /
    ``"module:attr"`` string — and returns a started :class:`HostHarness`. ``app_config``
    adds other ``config.yaml`` sections (``{"summarization": {"trigger_messages": 4}}``).
    Hosts are shut down (services stopped, runs drained) when the test ends; call
    ``harness.close()`` to shut one down earlier and observe what ``stop()`` did.

``extension_loader`` — a factory with the same first five arguments that only runs the
host's loader (no Gateway, no database) and returns :class:`LoadResult` (``extensions``,
``diagnostics``): the cheap way to test that ``install`` registers what you expect and
that a bad config is refused with a useful message.

:class:`HostHarness`
    ``run(prompt, *, thread_id=None, goal=None) -> RunOutcome`` streams one lead run over
    SSE (``POST /api/threads/{id}/runs/stream``) and returns after the stream's ``end``
    event — i.e. after every ``on_task_stop`` returned. A prompt ``delegate: <task>`` makes
    the embedded model delegate ``<task>`` to a subagent. ``client`` is a
    ``fastapi.testclient.TestClient`` (an ``httpx.Client``) with the app's lifespan entered,
    for your routers. ``diagnostics`` is the live list of attributed diagnostics,
    ``extensions`` the frozen ``LoadedExtensions`` snapshot, ``app_store`` the process
    app store, ``database_url`` the temporary database.

Helpers: :func:`install_reference` (how an install function is named in ``use:``),
:func:`parse_sse`, :func:`wait_for` (poll until a service's background work shows up).

This module imports nothing from the host at import time: pytest loads it in every
session of an environment where DeerFlow is installed, and it must never be the reason a
test session fails to start.
"""

from __future__ import annotations

import importlib
import itertools
import json
import sys
import time
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "HostHarness",
    "LoadResult",
    "RunOutcome",
    "SseEvent",
    "deerflow_host",
    "extension_loader",
    "install_reference",
    "parse_sse",
    "wait_for",
]

_INLINE_MODULE = "deerflow_ext._testing_inline"
_inline_counter = itertools.count(1)


# ---------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One server-sent event: its ``event:`` name and its ``data:`` (JSON-decoded when it is JSON)."""

    event: str
    data: Any


@dataclass(frozen=True)
class RunOutcome:
    """What one streamed lead run produced.

    ``run`` is the Gateway's own record of it (``GET /api/threads/{thread_id}/runs/{run_id}``),
    so status, outcome and token usage are what the host persisted, not what the kit saw.
    """

    thread_id: str
    run_id: str
    events: tuple[SseEvent, ...]
    run: Mapping[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> str | None:
        return self.run.get("status")

    @property
    def outcome(self) -> str | None:
        return self.run.get("outcome")

    @property
    def event_names(self) -> tuple[str, ...]:
        return tuple(e.event for e in self.events)

    @property
    def answer(self) -> str | None:
        """The last assistant message's text found in the stream, or the run record's ``answer``."""
        if isinstance(self.run.get("answer"), str):
            return self.run["answer"]
        for event in reversed(self.events):
            text = _last_ai_text(event.data)
            if text is not None:
                return text
        return None


def _last_ai_text(data: Any) -> str | None:
    messages: Any = None
    if isinstance(data, Mapping):
        messages = data.get("messages")
    elif isinstance(data, list):
        messages = data
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("type", message.get("role")) in ("ai", "assistant"):
            content = message.get("content")
            if isinstance(content, str) and content:
                return content
    return None


@dataclass(frozen=True)
class LoadResult:
    """What the host's loader made of one ``plugins:`` entry (no Gateway involved)."""

    extensions: Any
    diagnostics: Any

    @property
    def loaded(self) -> tuple[str, ...]:
        return tuple(self.extensions.loaded)


# ---------------------------------------------------------------------------- helpers


def install_reference(install: str | Callable[..., Any]) -> str:
    """The ``use:`` value that makes the host's loader import *install*.

    A string is returned unchanged (an entry-point name or ``module:attr``). A function
    reachable as ``module.qualname`` is referenced that way, so attribution in log lines
    and diagnostics reads like production. Anything else (a closure, a lambda, a function
    defined inside a test) is published on a private module so the real import path,
    version gate and attribution still run.
    """
    if isinstance(install, str):
        return install
    if not callable(install):
        raise TypeError(f"expected an install function or a use string, got {type(install).__name__}")
    module_name = getattr(install, "__module__", None)
    qualname = getattr(install, "__qualname__", "")
    if module_name and qualname and "<" not in qualname:
        try:
            target: Any = importlib.import_module(module_name)
            for part in qualname.split("."):
                target = getattr(target, part)
        except (ImportError, AttributeError):
            target = None
        if target is install:
            return f"{module_name}:{qualname}"
    module = sys.modules.get(_INLINE_MODULE)
    if module is None:
        module = types.ModuleType(_INLINE_MODULE, "install functions published by deerflow_ext.testing")
        sys.modules[_INLINE_MODULE] = module
    attr = f"install_{next(_inline_counter)}"
    setattr(module, attr, install)
    return f"{_INLINE_MODULE}:{attr}"


def _plugin_entry(
    install: str | Callable[..., Any],
    config: Mapping[str, Any] | None,
    *,
    name: str | None,
    required: bool,
    table_prefix: str | None,
) -> dict[str, Any]:
    use = install_reference(install)
    label = name or getattr(install, "__deerflow_name__", None) or use.split(":")[0].rsplit(".", 1)[-1]
    entry: dict[str, Any] = {"name": label, "use": use, "required": required, "config": dict(config or {})}
    if table_prefix is not None:
        entry["table_prefix"] = table_prefix
    return entry


def parse_sse(text: str) -> tuple[SseEvent, ...]:
    """Split an SSE body into events; ``data:`` lines are joined and JSON-decoded when possible."""
    events: list[SseEvent] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name = "message"
        data_lines: list[str] = []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            key, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if key == "event":
                name = value
            elif key == "data":
                data_lines.append(value)
        if not data_lines and name == "message":
            continue
        raw = "\n".join(data_lines)
        try:
            data: Any = json.loads(raw) if raw else None
        except ValueError:
            data = raw
        events.append(SseEvent(name, data))
    return tuple(events)


def wait_for(predicate: Callable[[], Any], *, timeout: float = 5.0, interval: float = 0.02) -> Any:
    """Poll *predicate* until it returns something truthy and return it; fail the test on timeout.

    For effects a service produces in the background (a writer flushing its buffer):
    a fixed sleep is either flaky or slow.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"condition not met within {timeout}s: {getattr(predicate, '__name__', predicate)!r}")
        time.sleep(interval)


# ---------------------------------------------------------------------------- the host


def _create_app(config: Any, config_path: Path, database_url: str) -> Any:
    """The Gateway exactly as ``deerflow-ext serve`` builds it, on this test's file and database."""
    from deerflow_ext.config.settings import Settings
    from deerflow_ext.gateway import create_app

    return create_app(Settings(config=config_path, database_url=database_url), config=config)


class HostHarness:
    """A started Gateway (lifespan entered) with one extension loaded; see the module docstring."""

    def __init__(self, app: Any, client: Any, config_path: Path, database_url: str) -> None:
        self.app = app
        self.client = client
        self.config_path = config_path
        self.database_url = database_url
        self._closed = False

    # What the host recorded -------------------------------------------------
    @property
    def extensions(self) -> Any:
        return self.app.state.extensions

    @property
    def diagnostics(self) -> Any:
        return self.app.state.extension_diagnostics

    @property
    def app_store(self) -> Any:
        return self.extensions.app_store

    # Driving it -------------------------------------------------------------
    def new_thread(self) -> str:
        response = self.client.post("/api/threads", json={})
        response.raise_for_status()
        return str(response.json()["thread_id"])

    def run(self, prompt: str, *, thread_id: str | None = None, goal: str | None = None) -> RunOutcome:
        """Stream one lead run to its ``end`` event and fetch the persisted run record."""
        thread = thread_id or self.new_thread()
        body = {"input": {"messages": [{"role": "user", "content": prompt}]}, "goal": goal}
        with self.client.stream("POST", f"/api/threads/{thread}/runs/stream", json=body) as response:
            if response.status_code >= 400:
                response.read()
                raise AssertionError(f"run stream refused: {response.status_code} {response.text}")
            text = "".join(response.iter_text())
        events = parse_sse(text)
        run_id = next(
            (str(e.data["run_id"]) for e in events if isinstance(e.data, Mapping) and "run_id" in e.data),
            None,
        )
        if run_id is None:
            raise AssertionError(f"the stream carried no run_id; events: {[e.event for e in events]}")
        record = self.client.get(f"/api/threads/{thread}/runs/{run_id}")
        run = record.json() if record.status_code == 200 else {}
        return RunOutcome(thread_id=thread, run_id=run_id, events=events, run=run)

    def close(self) -> None:
        """Shut the Gateway down: drain runs, stop services, dispose the engine."""
        if not self._closed:
            self._closed = True
            self.client.__exit__(None, None, None)

    def __enter__(self) -> HostHarness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _write_config(
    directory: Path, plugins: list[dict[str, Any]], app_config: Mapping[str, Any] | None
) -> Path:
    # JSON is YAML: the file reads exactly like an operator's config.yaml to the host's loader.
    document = {**dict(app_config or {}), "plugins": plugins}
    path = directory / "config.yaml"
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


@pytest.fixture
def deerflow_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., HostHarness]]:
    """Factory: ``deerflow_host(install_or_name, config=None, *, name=None, required=False,
    table_prefix=None, app_config=None) -> HostHarness`` (a started Gateway)."""
    from deerflow_ext.config.loading import load_app_config
    from deerflow_ext.extensions.diagnostics import get_diagnostics, set_diagnostics
    from deerflow_ext.extensions.snapshot import get_loaded_extensions, set_loaded_extensions

    # create_app publishes process-wide state; put it back so one test's host never
    # leaks into the next test.
    previous, previous_diagnostics = get_loaded_extensions(), get_diagnostics()
    harnesses: list[HostHarness] = []
    counter = itertools.count(1)

    def start(
        install: str | Callable[..., Any],
        config: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        required: bool = False,
        table_prefix: str | None = None,
        app_config: Mapping[str, Any] | None = None,
    ) -> HostHarness:
        from fastapi.testclient import TestClient

        directory = tmp_path / f"deerflow-host-{next(counter)}"
        directory.mkdir()
        entry = _plugin_entry(install, config, name=name, required=required, table_prefix=table_prefix)
        config_path = _write_config(directory, [entry], app_config)
        database_url = f"sqlite+aiosqlite:///{(directory / 'deerflow.db').as_posix()}"
        monkeypatch.setenv("DEERFLOW_CONFIG", str(config_path))
        monkeypatch.setenv("DEERFLOW_DATABASE_URL", database_url)
        monkeypatch.chdir(directory)
        app = _create_app(load_app_config(config_path), config_path, database_url)
        client = TestClient(app, raise_server_exceptions=True)
        client.__enter__()
        harness = HostHarness(app, client, config_path, database_url)
        harnesses.append(harness)
        return harness

    yield start
    try:
        for harness in reversed(harnesses):
            harness.close()
    finally:
        set_loaded_extensions(previous)
        set_diagnostics(previous_diagnostics)


@pytest.fixture
def extension_loader() -> Callable[..., LoadResult]:
    """Factory: ``extension_loader(install_or_name, config=None, *, name=None, required=False,
    table_prefix=None) -> LoadResult`` — the host's loader only, no Gateway."""

    def load(
        install: str | Callable[..., Any],
        config: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        required: bool = False,
        table_prefix: str | None = None,
    ) -> LoadResult:
        from deerflow_ext.config.schema import AppConfig
        from deerflow_ext.extensions.diagnostics import DiagnosticsList
        from deerflow_ext.extensions.loader import load_extensions

        entry = _plugin_entry(install, config, name=name, required=required, table_prefix=table_prefix)
        diagnostics = DiagnosticsList()
        extensions = load_extensions(AppConfig.model_validate({"plugins": [entry]}), diagnostics=diagnostics)
        return LoadResult(extensions=extensions, diagnostics=diagnostics)

    return load
