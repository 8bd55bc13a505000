"""DeerFlow tasks, system model calls and assembly fingerprints as OpenTelemetry spans.

Spans follow the OpenTelemetry GenAI semantic conventions where they apply
(``invoke_agent {agent}`` and ``chat {model}`` with ``gen_ai.*`` attributes) and add
``deerflow.*`` attributes where they do not. The task span carries the agent's assembly
fingerprint (``deerflow.agent.fingerprint``), so a trace says not only what an agent did
but whether it was the *same* agent as yesterday's::

    plugins:
      - name: otel
        use: otel
        config: {exporter: console}      # or "memory": spans kept in-process, see finished_spans()
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deerflow_extension_api import ExtensionRegistry, extension

from .exporting import OtelSettings, TracerHandle, clear_spans, finished_spans, span_to_dict
from .observers import FingerprintStamper, LatestFingerprints, SystemCallSpans, TaskSpans
from .routes import make_router

__all__ = [
    "FingerprintStamper",
    "LatestFingerprints",
    "OtelSettings",
    "SystemCallSpans",
    "TaskSpans",
    "TracerHandle",
    "clear_spans",
    "finished_spans",
    "install",
    "make_router",
    "span_to_dict",
]


@extension(api="0.2.0", name="otel")
def install(registry: ExtensionRegistry, config: Mapping[str, Any]) -> None:
    """Register the span-producing observers, the provider's flush service and the spans router."""
    settings = OtelSettings.from_config(config)
    handle = TracerHandle(settings)
    tracer = handle.tracer
    registry.agent_assembly_observer(FingerprintStamper())
    registry.task_lifecycle(TaskSpans(tracer))
    registry.system_model_observer(SystemCallSpans(tracer))
    registry.service(handle)
    registry.routers([make_router(settings)])
