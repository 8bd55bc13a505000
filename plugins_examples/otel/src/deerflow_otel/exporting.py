"""Where spans go: an in-memory exporter (tests, the e2e router) or the console.

Each install builds its own ``TracerProvider`` instead of setting the global one: the
host process may already have a global provider configured by the operator, and an
extension must not take it over. The in-memory exporter is one per process so a test
can read what any host in it produced through :func:`finished_spans`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from threading import Lock
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from deerflow_extension_api import ExtensionRuntimeDeps

__all__ = ["EXPORTERS", "OtelSettings", "TracerHandle", "clear_spans", "finished_spans", "span_to_dict"]

EXPORTERS = ("console", "memory")
INSTRUMENTATION_NAME = "deerflow_otel"

_memory_lock = Lock()
_memory: InMemorySpanExporter | None = None


def _memory_exporter() -> InMemorySpanExporter:
    global _memory
    with _memory_lock:
        if _memory is None:
            _memory = InMemorySpanExporter()
        return _memory


class _SharedMemory(SpanExporter):
    """Forwards to the process-wide in-memory exporter but never shuts it down.

    A provider's shutdown shuts its exporters down, and a stopped ``InMemorySpanExporter``
    silently drops every later span: without this shim the first Gateway to stop would
    blind every later host in the process (the next test, a restarted app).
    """

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return _memory_exporter().export(spans)

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def finished_spans() -> tuple[ReadableSpan, ...]:
    """Every span ended so far by a host using the ``memory`` exporter in this process."""
    return tuple(_memory_exporter().get_finished_spans())


def clear_spans() -> None:
    """Forget the in-memory spans (between tests)."""
    _memory_exporter().clear()


@dataclass(frozen=True, slots=True)
class OtelSettings:
    """The entry's ``config:`` block: ``exporter`` (``console`` by default) and ``service_name``."""

    exporter: str = "console"
    service_name: str = "deerflow"

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> OtelSettings:
        unknown = set(config) - {"exporter", "service_name"}
        if unknown:
            raise ValueError(f"unknown otel config key(s): {', '.join(sorted(unknown))}")
        exporter = str(config.get("exporter", "console"))
        if exporter not in EXPORTERS:
            raise ValueError(f"otel exporter must be one of {', '.join(EXPORTERS)}, got {exporter!r}")
        return cls(exporter=exporter, service_name=str(config.get("service_name", "deerflow")))


class TracerHandle:
    """Owns this install's ``TracerProvider``; as a service it flushes and shuts it down.

    The console exporter sits behind a batch processor so a span's export (terminal
    I/O) never runs inside a lifecycle hook; the memory exporter is synchronous so a
    span is readable the moment it ends.
    """

    def __init__(self, settings: OtelSettings) -> None:
        self.settings = settings
        self.provider = TracerProvider(resource=Resource.create({"service.name": settings.service_name}))
        if settings.exporter == "memory":
            self.provider.add_span_processor(SimpleSpanProcessor(_SharedMemory()))
        else:
            self.provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        self.tracer: Tracer = self.provider.get_tracer(INSTRUMENTATION_NAME)

    async def start(self, deps: ExtensionRuntimeDeps) -> None:
        return None

    async def stop(self) -> None:
        self.provider.force_flush()
        self.provider.shutdown()


def span_to_dict(span: ReadableSpan) -> dict[str, Any]:
    """A JSON-ready view of a finished span (ids as hex, times in ns since the epoch)."""
    ctx = span.context
    parent = span.parent
    return {
        "name": span.name,
        "trace_id": format(ctx.trace_id, "032x") if ctx else None,
        "span_id": format(ctx.span_id, "016x") if ctx else None,
        "parent_span_id": format(parent.span_id, "016x") if parent else None,
        "kind": span.kind.name,
        "start_time": span.start_time,
        "end_time": span.end_time,
        "status": span.status.status_code.name,
        "attributes": dict(span.attributes or {}),
    }
