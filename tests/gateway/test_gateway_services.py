"""start_services / stop_services: order, shared deps, attribution, per-stop timeout, cancellation."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import pytest
from gw_fixtures import extensions_with

from deerflow_ext.extensions.diagnostics import DiagnosticsList
from deerflow_ext.extensions.gateway import start_services, stop_services
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
    # The hung service never claimed to be running, so it is not stopped.
    assert log == ["start:hung", "start:b", "stop:b"]
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
    assert log == ["start:a", "start:b", "start:c", "start:d", "stop:d", "stop:c", "stop:b"]
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

    services = (Hanging("hanging", log), Service("never", log))
    task = asyncio.create_task(start_services(extensions_with(services=services), ExtensionRuntimeDeps()))
    await gate.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log == ["start:hanging"]
