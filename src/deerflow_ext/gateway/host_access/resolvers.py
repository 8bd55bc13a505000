"""The resolvers ``deerflow_extension_api`` reads from ``app.state``, and the services' reader.

A request's readers (run evidence, batch results) and agent-run handle are bound to the principal ``resolve_principal``
answers for it (never to a user id the caller names); a request with no principal is
refused (``PermissionError``). Both use the app's runtime, so before startup and after
shutdown there is none and the resolvers answer ``None`` (the extension's 503).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from deerflow_extension_api import (
    AGENT_RUNS_RESOLVER_KEY,
    BATCH_RESULTS_RESOLVER_KEY,
    RUN_EVIDENCE_READER_RESOLVER_KEY,
    AgentRuns,
    BatchResultError,
    BatchResultReader,
    ExtensionPrincipal,
    RunEvidenceReader,
    resolve_principal,
)

from ...persistence.records import HostStore
from ..scoping import request_user
from .agent_runs import GatewayAgentRuns
from .batch_results import HostBatchResultReader
from .run_evidence import DEFAULT_SETTLE_SECONDS, HostRunEvidenceReader

__all__ = ["install_host_access", "service_evidence_reader"]


def service_evidence_reader(store: HostStore, settle_seconds: float = DEFAULT_SETTLE_SECONDS) -> RunEvidenceReader:
    """The trusted services' reader (``ExtensionRuntimeDeps.run_evidence_reader``): every user's runs."""
    return HostRunEvidenceReader(store, user_id=None, settle_seconds=settle_seconds)


def install_host_access(app: FastAPI) -> None:
    """Put the request-scoped resolvers where the contract's ``resolve_*`` look for them."""

    def serving(request: object, what: str) -> tuple[Any, ExtensionPrincipal] | None:
        """The serving runtime and the request's principal; None while not serving."""
        runtime = getattr(app.state, "runtime", None)
        if runtime is None:
            return None
        principal = resolve_principal(request)
        if principal is None:
            raise PermissionError(f"{what}: an authenticated principal is required")
        return runtime, principal

    def run_evidence(request: object) -> RunEvidenceReader | None:
        found = serving(request, "run evidence")
        if found is None:
            return None
        runtime, principal = found
        settle = getattr(app.state, "run_evidence_settle_seconds", DEFAULT_SETTLE_SECONDS)
        return HostRunEvidenceReader(runtime.store, user_id=principal.user_id, settle_seconds=settle)

    keys: dict[tuple[str, str, str], str] = {}  # idempotency keys, shared by every handle of this app

    def agent_runs(request: object) -> AgentRuns | None:
        found = serving(request, "agent runs")
        if found is None:
            return None
        runtime, principal = found
        if principal.is_internal:
            return None  # DeerFlow lends internal callers no handle
        user = request_user(request)
        gate = getattr(app.state, "identity", None)
        identity = (gate, user) if user is not None and gate is not None else None
        return GatewayAgentRuns(runtime, principal, keys=keys, identity=identity)

    def batch_results(request: object) -> BatchResultReader | None:
        runtime = getattr(app.state, "runtime", None)
        if runtime is None:
            return None  # require_batch_results: 503
        principal = resolve_principal(request)
        if principal is None:
            raise BatchResultError(403, "Batch results require an authenticated account")
        return HostBatchResultReader(runtime.store, user_id=principal.user_id)

    setattr(app.state, RUN_EVIDENCE_READER_RESOLVER_KEY, run_evidence)
    setattr(app.state, BATCH_RESULTS_RESOLVER_KEY, batch_results)
    setattr(app.state, AGENT_RUNS_RESOLVER_KEY, agent_runs)
