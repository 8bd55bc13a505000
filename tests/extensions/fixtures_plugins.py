"""Test extensions referenced from config entries as ``extensions.fixtures_plugins:<name>``.

Contributors carry a ``tag`` so tests can tell exactly which entry and which registration
call produced each contribution in a snapshot.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deerflow_extension_api import extension

MODULE = "extensions.fixtures_plugins"


@dataclass(frozen=True)
class Observer:
    """An agent-assembly observer (synchronous, no task store)."""

    tag: tuple[Any, ...]

    def on_agent_assembled(self, app_store: Any, descriptor: Any) -> None:
        return None


@dataclass(frozen=True)
class Lifecycle:
    tag: tuple[Any, ...]

    async def on_task_start(self, app_store: Any, task_store: Any, info: Any) -> None:
        return None

    async def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any) -> None:
        return None


@dataclass(frozen=True)
class Service:
    tag: tuple[Any, ...]

    async def start(self, deps: Any) -> None:
        return None

    async def stop(self) -> None:
        return None


class HalfwayFailure(RuntimeError):
    pass


def _register(registry: Any, kind: str, tag: tuple[Any, ...]) -> None:
    if kind == "observer":
        registry.agent_assembly_observer(Observer(tag))
    elif kind == "lifecycle":
        registry.task_lifecycle(Lifecycle(tag))
    else:
        registry.service(Service(tag))


def configurable(registry: Any, config: Mapping[str, Any]) -> None:
    """Registers ``config["kinds"]`` in order, tagged ``(config["tag"], i)``; may fail half-way."""
    fail_after = config.get("fail_after")
    for i, kind in enumerate(config.get("kinds", ())):
        if fail_after is not None and i == fail_after:
            raise HalfwayFailure(f"failed after {i} registrations")
        _register(registry, kind, (config["tag"], i))
    if fail_after is not None:
        raise HalfwayFailure("failed at the end")


@extension(api="0.2.1")
def good(registry: Any, config: Mapping[str, Any]) -> None:
    registry.agent_assembly_observer(Observer(("good", config.get("tag"))))


@extension(api="0.2.0")
def older_patch(registry: Any, config: Mapping[str, Any]) -> None:
    registry.agent_assembly_observer(Observer(("older_patch",)))


@extension(api="0.2.6")
def deerflow_current(registry: Any, config: Mapping[str, Any]) -> None:
    """Marked as an extension written against DeerFlow's newest contract is."""
    registry.agent_assembly_observer(Observer(("deerflow_current",)))


@extension(api="0.2.7")
def newer_patch(registry: Any, config: Mapping[str, Any]) -> None:
    registry.agent_assembly_observer(Observer(("newer_patch",)))


def unmarked(registry: Any, config: Mapping[str, Any]) -> None:
    registry.agent_assembly_observer(Observer(("unmarked",)))


def malformed_marker(registry: Any, config: Mapping[str, Any]) -> None:
    registry.agent_assembly_observer(Observer(("malformed",)))


malformed_marker.__deerflow_api__ = "zero.two"  # type: ignore[attr-defined]


def unsupported_method(registry: Any, config: Mapping[str, Any]) -> None:
    registry.agent_assembly_observer(Observer(("before-tools",)))
    registry.tools([object()])


def mutates_config(registry: Any, config: dict[str, Any]) -> None:
    config["touched"] = True
    config["nested"]["seen"] = True
    registry.agent_assembly_observer(Observer(("mutates",)))


def interrupts(registry: Any, config: Mapping[str, Any]) -> None:
    registry.agent_assembly_observer(Observer(("interrupts",)))
    raise KeyboardInterrupt


def exits(registry: Any, config: Mapping[str, Any]) -> None:
    registry.agent_assembly_observer(Observer(("exits",)))
    sys.exit(7)


def signals_itself(registry: Any, config: Mapping[str, Any]) -> None:
    """A real SIGINT arrives while install() runs, as an operator's Ctrl-C would."""
    registry.agent_assembly_observer(Observer(("signals",)))
    # raise_signal delivers it to this (the main) thread and runs the Python handler before
    # returning; os.kill may hand a process-directed signal to another thread of the process.
    signal.raise_signal(signal.SIGINT)
    time.sleep(5)  # not reached: the handler raised KeyboardInterrupt above


async def async_install(registry: Any, config: Mapping[str, Any]) -> None:
    registry.agent_assembly_observer(Observer(("async",)))


_kept: list[Any] = []


def keeps_registry(registry: Any, config: Mapping[str, Any]) -> None:
    _kept.append(registry)
    registry.agent_assembly_observer(Observer(("keeps",)))


def kept_registry() -> Any:
    return _kept[-1]


not_callable = 42
