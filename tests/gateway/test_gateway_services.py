"""start_services / stop_services: order, shared deps, attribution, per-stop timeout, cancellation."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import pytest
from gw_fixtures import extensions_with

from deerflow_ext.extensions.boundary.diagnostics import DiagnosticsList
from deerflow_ext.extensions.serving.services_routers import AttemptedServices, start_services, stop_services
from deerflow_extension_api import ExtensionRuntimeDeps


@dataclass
class Service:
    name: str
    log: list[str]
    start_error: BaseException | None = None
    stop_error: BaseException | None = None
    stop_delay: float = 0.0
    start_delay: float = 0.0

    async def start(self, deps: Any) -> None:
        self.log.append(f"start:{self.name}")
        if self.start_delay:
            await asyncio.sleep(self.start_delay)
        if self.start_error is not None:
            raise self.start_error

    async def stop(self) -> None:
        self.log.append(f"stop:{self.name}")
        if self.stop_delay:
            await asyncio.sleep(self.stop_delay)
        if self.stop_error is not None:
            raise self.stop_error


def _messages(diagnostics: DiagnosticsList) -> list[tuple[str, str]]:
    return [(d.extension.rsplit(":", 1)[1], d.message) for d in diagnostics]


async def test_each_stop_has_its_own_timeout_and_the_rest_still_stop() -> None:
    log: list[str] = []
    services = (Service("a", log), Service("slow_b", log, stop_delay=30), Service("slow_c", log, stop_delay=30))
    diagnostics = DiagnosticsList()
    started = await start_services(extensions_with(services=services), ExtensionRuntimeDeps(), diagnostics=diagnostics)
    began = time.monotonic()
    await stop_services(started, stop_timeout=0.2, diagnostics=diagnostics)
    elapsed = time.monotonic() - began
    assert log == ["start:a", "start:slow_b", "start:slow_c", "stop:slow_c", "stop:slow_b", "stop:a"]
    # Two hung stops cost two timeouts, not one shared one and not forever.
    assert 0.35 <= elapsed < 2.0, elapsed
    assert _messages(diagnostics) == [
        ("slow_c", "service stop timed out after 0.2s"),
        ("slow_b", "service stop timed out after 0.2s"),
    ]


async def test_a_hung_start_times_out_and_the_next_service_still_starts() -> None:
    log: list[str] = []
    services = (Service("hung", log, start_delay=30), Service("b", log))
    diagnostics = DiagnosticsList()
    began = time.monotonic()
    started = await start_services(
        extensions_with(services=services), ExtensionRuntimeDeps(), start_timeout=0.2, diagnostics=diagnostics
    )
    assert time.monotonic() - began < 2.0
    await stop_services(started, diagnostics=diagnostics)
    # The hung start may hold what it acquired before it hung: it is stopped too (DeerFlow's rule).
    assert log == ["start:hung", "start:b", "stop:b", "stop:hung"]
    assert _messages(diagnostics) == [("hung", "service start timed out after 0.2s")]


async def test_a_cancellation_a_service_raises_itself_is_contained() -> None:
    log: list[str] = []
    services = (
        Service("a", log, start_error=asyncio.CancelledError()),
        Service("b", log),
        Service("c", log, stop_error=asyncio.CancelledError()),
        Service("d", log),
    )
    diagnostics = DiagnosticsList()
    started = await start_services(extensions_with(services=services), ExtensionRuntimeDeps(), diagnostics=diagnostics)
    await stop_services(started, diagnostics=diagnostics)
    assert log == ["start:a", "start:b", "start:c", "start:d", "stop:d", "stop:c", "stop:b", "stop:a"]
    assert _messages(diagnostics) == [
        ("a", "service start failed: raised CancelledError"),
        ("c", "service stop failed: raised CancelledError"),
    ]


async def test_cancelling_the_host_task_propagates() -> None:
    log: list[str] = []
    gate = asyncio.Event()

    class Hanging(Service):
        async def start(self, deps: Any) -> None:
            log.append("start:hanging")
            gate.set()
            await asyncio.sleep(30)

    services = (Service("first", log), Hanging("hanging", log), Service("never", log))
    attempted = AttemptedServices()
    task = asyncio.create_task(
        start_services(extensions_with(services=services), ExtensionRuntimeDeps(), attempted=attempted)
    )
    await gate.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log == ["start:first", "start:hanging"]
    # What the cancelled start got to is known, the interrupted start included.
    assert [c.contributor.name for c in attempted.services] == ["first", "hanging"]


async def test_a_failed_start_is_stopped_too() -> None:
    log: list[str] = []
    services = (Service("a", log), Service("bad", log, start_error=RuntimeError("half started")), Service("c", log))
    diagnostics = DiagnosticsList()
    extensions = extensions_with(services=services)
    attempted = await start_services(extensions, ExtensionRuntimeDeps(), diagnostics=diagnostics)
    await stop_services(attempted, diagnostics=diagnostics)
    assert log == ["start:a", "start:bad", "start:c", "stop:c", "stop:bad", "stop:a"]
    assert _messages(diagnostics) == [("bad", "service start failed: RuntimeError: half started")]


async def test_cleanup_after_a_cancellation_stops_every_service_and_contains_their_own_cancels() -> None:
    """stop_services running in a task already being cancelled: that request is not a new one."""
    log: list[str] = []
    services = (Service("a", log), Service("b", log, stop_error=asyncio.CancelledError()), Service("c", log))
    attempted = await start_services(extensions_with(services=services), ExtensionRuntimeDeps())
    diagnostics = DiagnosticsList()

    async def cancelled_then_cleans_up() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            await stop_services(attempted, diagnostics=diagnostics)

    task = asyncio.create_task(cancelled_then_cleans_up())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log[3:] == ["stop:c", "stop:b", "stop:a"]
    assert _messages(diagnostics) == [("b", "service stop failed: raised CancelledError")]


# -- the Gateway's lifespan: a startup that fails or is cancelled after services began ---------
def _gateway(settings_for: Any, services: tuple[Any, ...]) -> Any:
    from deerflow_ext.config.schema import AppConfig
    from deerflow_ext.gateway import GatewayOptions, create_app

    return create_app(
        settings_for(),
        config=AppConfig(memory={"enabled": False}),
        extensions=extensions_with(services=services),
        options=GatewayOptions(service_start_timeout=30),
    )


async def test_a_cancelled_startup_stops_every_attempted_service_in_reverse(settings_for: Any) -> None:
    log: list[str] = []
    entered = asyncio.Event()

    class Blocking(Service):
        async def start(self, deps: Any) -> None:
            log.append(f"start:{self.name}")
            entered.set()
            await asyncio.Event().wait()

    app = _gateway(settings_for, (Service("first", log), Blocking("blocking", log), Service("never", log)))

    async def startup() -> None:
        async with app.router.lifespan_context(app):
            pytest.fail("the Gateway must not serve while a service start is blocked")

    task = asyncio.create_task(startup())
    await asyncio.wait_for(entered.wait(), timeout=30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log == ["start:first", "start:blocking", "stop:blocking", "stop:first"]
    assert app.state.runtime is None


async def test_a_later_startup_step_failing_stops_every_attempted_service(
    settings_for: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deerflow_ext.gateway import app as app_module

    log: list[str] = []
    app = _gateway(settings_for, (Service("a", log, start_error=RuntimeError("start exploded")), Service("b", log)))

    def runtime_fails(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the step after the services failed")

    monkeypatch.setattr(app_module, "GatewayRuntime", runtime_fails)
    with pytest.raises(RuntimeError, match="the step after the services failed"):
        async with app.router.lifespan_context(app):
            pytest.fail("the Gateway must not serve after a failed startup")
    assert log == ["start:a", "start:b", "stop:b", "stop:a"]
    assert [(d.extension, d.message) for d in app.state.extension_diagnostics] == [
        ("gateway.gw_fixtures:a", "service start failed: RuntimeError: start exploded")
    ]


async def test_a_timeout_error_a_service_raises_itself_is_a_failure_not_a_timeout() -> None:
    """Only the host's own budget expiring is "timed out"; a service's own client giving up
    (``TimeoutError`` raised at once, long before the budget) is that service's failure."""
    log: list[str] = []
    services = (
        Service("own_start", log, start_error=TimeoutError("upstream handshake")),
        Service("own_stop", log, stop_error=TimeoutError("flush to upstream")),
        Service("slow", log, stop_delay=30),
    )
    diagnostics = DiagnosticsList()
    started = await start_services(
        extensions_with(services=services), ExtensionRuntimeDeps(), start_timeout=30.0, diagnostics=diagnostics
    )
    await stop_services(started, stop_timeout=0.2, diagnostics=diagnostics)
    assert _messages(diagnostics) == [
        ("own_start", "service start failed: TimeoutError: upstream handshake"),
        ("slow", "service stop timed out after 0.2s"),
        ("own_stop", "service stop failed: TimeoutError: flush to upstream"),
    ]
