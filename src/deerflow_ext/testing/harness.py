"""A real Gateway (or only the host's loader) on a ``plugins:`` list, outside any test framework.

The pytest fixtures (``plugin.py``), the property checks (``properties.py``) and the
operator's ``extensions check`` all start hosts through :func:`start_host`, so each of them
runs the same thing an operator's deployment runs: ``create_app`` on a real
``config.yaml``, a temporary SQLite database and the embedded, offline model, driven over
its HTTP API. A host changes process-wide state while it runs (the published extension
snapshot, the ``DEERFLOW_*`` variables, the working directory, and the notification budget
when one is given); :meth:`HostHarness.close` puts every piece back, so
hosts can be started one after another in one process, as a property check does.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Unpack

from .entries import EntryOptions, Plugin, PluginLike, plugin_records

if TYPE_CHECKING:  # for annotations only: the kit imports the host when a host is started
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from deerflow_ext.extensions.boundary.diagnostics import DiagnosticsList
    from deerflow_ext.extensions.contract.snapshot import LoadedExtensions
    from deerflow_extension_api import ExtensionData

__all__ = [
    "HostFactory",
    "HostHarness",
    "HostOptions",
    "LoadResult",
    "LoaderFactory",
    "RunOutcome",
    "SseEvent",
    "load_plugins",
    "notification_budget",
    "parse_sse",
    "start_host",
    "wait_for",
    "wait_until",
]


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
        answer = self.run.get("answer")
        if isinstance(answer, str):
            return answer
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
    """What the host's loader made of a ``plugins:`` list (no Gateway involved)."""

    extensions: LoadedExtensions
    diagnostics: DiagnosticsList
    plugins: tuple[Plugin, ...] = ()

    @property
    def loaded(self) -> tuple[str, ...]:
        return tuple(self.extensions.loaded)


class HostOptions(EntryOptions, total=False):
    """The entry's options, and the started host's own (both default to ``None``)."""

    app_config: Mapping[str, Any] | None
    notify_budget: float | None


class HostFactory(Protocol):
    """The ``deerflow_host`` fixture: annotate a test's argument with it for completion and
    type checks (``def test_counts(deerflow_host: HostFactory) -> None``)."""

    def __call__(
        self,
        install_or_plugins: PluginLike | Sequence[PluginLike],
        config: Mapping[str, Any] | None = None,
        **options: Unpack[HostOptions],
    ) -> HostHarness: ...


class LoaderFactory(Protocol):
    """The ``extension_loader`` fixture (the loader only, no Gateway)."""

    def __call__(
        self,
        install_or_plugins: PluginLike | Sequence[PluginLike],
        config: Mapping[str, Any] | None = None,
        **options: Unpack[EntryOptions],
    ) -> LoadResult: ...


# ---------------------------------------------------------------------------- helpers


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


class _Poll:
    """One condition and its deadline: the rule :func:`wait_for` and :func:`wait_until` share."""

    def __init__(self, predicate: Callable[[], Any], timeout: float) -> None:
        self.predicate = predicate
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout

    def __call__(self) -> Any:
        """The predicate's value when truthy, else ``None``; ``AssertionError`` past the deadline."""
        value = self.predicate()
        if value:
            return value
        if time.monotonic() >= self.deadline:
            name = getattr(self.predicate, "__name__", self.predicate)
            raise AssertionError(f"condition not met within {self.timeout}s: {name!r}")
        return None


def wait_for(predicate: Callable[[], Any], *, timeout: float = 5.0, interval: float = 0.02) -> Any:
    """Poll *predicate* until it returns something truthy and return it; ``AssertionError`` on timeout.

    For effects a service produces in the background (a writer flushing its buffer):
    a fixed sleep is either flaky or slow. An ``AssertionError`` fails a pytest test and is
    a counterexample to a property check alike. In a coroutine use :func:`wait_until`, which
    lets the event loop run the work being waited for.
    """
    poll = _Poll(predicate, timeout)
    while (value := poll()) is None:
        time.sleep(interval)
    return value


async def wait_until(
    predicate: Callable[[], Any],
    *,
    timeout: float = 5.0,  # noqa: ASYNC109 - wait_for's parameter, for the same failure message
    interval: float = 0.005,
) -> Any:
    """:func:`wait_for` for async tests: the predicate is polled between turns of the event loop.

    ``await wait_until(lambda: calls == ["a"])`` returns as soon as a task started with
    ``asyncio.create_task`` got that far, however loaded the machine is, where a fixed
    ``asyncio.sleep`` only guesses how long that takes.
    """
    poll = _Poll(predicate, timeout)
    while (value := poll()) is None:  # noqa: ASYNC110 - a predicate has no Event to wait on
        await asyncio.sleep(interval)
    return value


@contextmanager
def notification_budget(seconds: float | None) -> Iterator[None]:
    """Lower (or raise) the lifecycle notification budget of every host in this process.

    The Gateway's lead runs take it from ``GatewayOptions.notify_budget`` and subagents from
    ``deerflow_ext.extensions.notifications.notify.DEFAULT_NOTIFY_BUDGET``, which the host reads at call
    time for exactly this purpose; both are set, and restored on exit. ``None`` changes nothing.
    """
    if seconds is None:
        yield
        return
    from deerflow_ext.extensions.notifications import notify

    previous = notify.DEFAULT_NOTIFY_BUDGET
    notify.DEFAULT_NOTIFY_BUDGET = seconds
    try:
        yield
    finally:
        notify.DEFAULT_NOTIFY_BUDGET = previous


@contextmanager
def _process_state(config_path: Path, database_url: str, directory: Path) -> Iterator[None]:
    """The environment a Gateway process would have, restored on exit with the published set."""
    from deerflow_ext.extensions.contract.snapshot import get_loaded_extensions, set_loaded_extensions

    previous = get_loaded_extensions()
    saved = {key: os.environ.get(key) for key in ("DEERFLOW_CONFIG", "DEERFLOW_DATABASE_URL")}
    cwd = Path.cwd()
    os.environ["DEERFLOW_CONFIG"] = str(config_path)
    os.environ["DEERFLOW_DATABASE_URL"] = database_url
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(cwd)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        set_loaded_extensions(previous)


def _write_config(directory: Path, plugins: Iterable[Plugin], app_config: Mapping[str, Any] | None) -> Path:
    # JSON is YAML: the file reads exactly like an operator's config.yaml to the host's loader.
    document = {**dict(app_config or {}), "plugins": [p.record() for p in plugins]}
    path = directory / "config.yaml"
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


def load_plugins(plugins: Iterable[PluginLike], *, app_config: Mapping[str, Any] | None = None) -> LoadResult:
    """Run the host's loader on *plugins*, in order, exactly as ``config.yaml`` would; no Gateway.

    Required entries that fail raise ``ExtensionLoadError`` here as they stop a Gateway.
    """
    from deerflow_ext.config.schema import AppConfig
    from deerflow_ext.extensions.plugin_loading.loader import load_extensions

    entries = tuple(plugin_records(plugins))
    document = {**dict(app_config or {}), "plugins": [p.record() for p in entries]}
    extensions = load_extensions(AppConfig.model_validate(document))
    return LoadResult(extensions=extensions, diagnostics=extensions.diagnostics, plugins=entries)


# ---------------------------------------------------------------------------- the host


@dataclass(eq=False, repr=False)
class HostHarness:
    """A started Gateway (lifespan entered) on a ``plugins:`` list; see :func:`start_host`.

    ``extensions``, ``diagnostics``, ``app_store``, ``database_url`` and :meth:`table_rows`
    stay readable after :meth:`close`, so what services flushed at shutdown can be checked.
    ``_cleanup`` puts back what starting the host changed (:meth:`close` runs it once).
    """

    app: FastAPI
    client: TestClient
    config_path: Path
    database_url: str
    plugins: tuple[Plugin, ...]
    _cleanup: ExitStack
    runs: list[RunOutcome] = field(default_factory=list, init=False)
    _closed: bool = field(default=False, init=False)

    # What the host recorded -------------------------------------------------
    @property
    def extensions(self) -> LoadedExtensions:
        extensions: LoadedExtensions = self.app.state.extensions
        return extensions

    @property
    def diagnostics(self) -> DiagnosticsList:
        diagnostics: DiagnosticsList = self.app.state.extension_diagnostics
        return diagnostics

    @property
    def app_store(self) -> ExtensionData:
        return self.extensions.app_store

    @property
    def closed(self) -> bool:
        return self._closed

    def table_rows(self, table: str) -> list[tuple[Any, ...]]:
        """Every row of *table* in the host's SQLite database (after :meth:`close` too)."""
        quoted = table.replace('"', '""')
        return self._query(f'SELECT * FROM "{quoted}"')

    def table_names(self, prefix: str = "") -> list[str]:
        """The tables of the host's SQLite database whose names start with *prefix*."""
        names = [str(row[0]) for row in self._query("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return sorted(n for n in names if n.startswith(prefix))

    def _query(self, sql: str) -> list[tuple[Any, ...]]:
        with closing(sqlite3.connect(self.database_url.split(":///", 1)[1])) as db:
            return [tuple(row) for row in db.execute(sql)]

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
        outcome = RunOutcome(thread_id=thread, run_id=run_id, events=events, run=run)
        self.runs.append(outcome)
        return outcome

    def close(self) -> None:
        """Shut the Gateway down (drain runs, stop services, dispose the engine), then restore
        the process state the host changed."""
        if not self._closed:
            self._closed = True
            self._cleanup.close()

    def __enter__(self) -> HostHarness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_host(
    plugins: Iterable[PluginLike],
    directory: Path,
    *,
    app_config: Mapping[str, Any] | None = None,
    notify_budget: float | None = None,
) -> HostHarness:
    """Start a Gateway on *plugins* (in order) in *directory*, which holds its config and database.

    ``app_config`` adds other ``config.yaml`` sections (``{"summarization": {...}}``);
    ``notify_budget`` replaces the 3-second lifecycle budget for this host's runs and
    subagents (see :func:`notification_budget`). Raises what ``create_app`` raises when the
    Gateway would not start (``ExtensionLoadError`` for a failing required entry), with the
    process state already restored.
    """
    from fastapi.testclient import TestClient

    from deerflow_ext.config.loading import load_app_config
    from deerflow_ext.config.settings import Settings
    from deerflow_ext.gateway import create_app
    from deerflow_ext.gateway.app import GatewayOptions

    directory.mkdir(parents=True, exist_ok=True)
    entries = tuple(plugin_records(plugins))
    config_path = _write_config(directory, entries, app_config)
    database_url = f"sqlite+aiosqlite:///{(directory / 'deerflow.db').as_posix()}"
    with ExitStack() as cleanup:
        cleanup.enter_context(_process_state(config_path, database_url, directory))
        cleanup.enter_context(notification_budget(notify_budget))
        app = create_app(
            Settings(config=config_path, database_url=database_url),
            config=load_app_config(config_path),
            options=GatewayOptions(notify_budget=notify_budget),
        )
        # A loopback name: the Gateway answers only the Host names it allows (gateway/access.py),
        # and TestClient's default ("testserver") is not one of them. A loopback caller too: with
        # no token that is the Gateway's one principal (gateway/principal.py), so a plugin's
        # /api/plugins routes and actions answer the test as they answer its author's browser.
        client = TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=True, client=("127.0.0.1", 50000))
        client.__enter__()
        cleanup.push(lambda *exc: client.__exit__(None, None, None))
        return HostHarness(app, client, config_path, database_url, entries, cleanup.pop_all())
