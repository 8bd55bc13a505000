"""The names DeerFlow's contract added from 0.2.2 to 0.2.6, checked field by field.

An extension written for DeerFlow constructs these values positionally and by keyword,
reads their defaults, and catches their error types; each test pins one of those promises
(digest of DeerFlow's contract, ``shared/upstream/contract-0.2.x.md`` §2).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Any

import pytest

import deerflow_extension_api as api
from deerflow_extension_api.settings import FrontendBinding, SettingsContribution

# DeerFlow's 0.2.6 ``__all__`` minus the names of our 0.2.1 release.
NEW_IN_0_2_6 = {
    "ActionContext", "BackendAction", "BrowserAssets", "BrowserModule", "ModelTool", "PluginContribution",
    "ToolContext", "SettingsField", "EXTENSION_PLUGIN_AUTHZ_RESOLVER_ASYNC_KEY",
    "EXTENSION_PLUGIN_AUTHZ_RESOLVER_KEY", "EXTENSION_PRINCIPAL_RESOLVER_KEY", "ExtensionPrincipal",
    "resolve_principal", "require_admin", "require_plugin_management", "arequire_plugin_management",
    "MESSAGE_CONTENT_KIND_KEY", "MESSAGE_PRODUCER_ENTITY_ID_KEY", "MESSAGE_PRODUCER_KIND_KEY", "PROVENANCE_KEYS",
    "ContentKind", "MessageProvenance", "provenance_kwargs", "read_provenance", "ReleasePolicyProvider",
    "InvalidRunEvidenceCursor", "RunEvidenceReader", "RUN_EVIDENCE_READER_RESOLVER_KEY", "RunEventPage",
    "RunEventView", "RunPage", "RunStatusView", "require_run_evidence_reader", "resolve_run_evidence_reader",
    "ModelInvocationError", "ModelInvocationFailed", "ModelInvocationRequest", "ModelInvocationResult",
    "ModelInvocationUnauthorized", "ModelInvocationUnavailable", "ModelInvoker", "ModelMessage",
    "ModelOutputValidationError", "ModelUsage", "AGENT_RUNS_CONTEXT_KEY", "AGENT_RUNS_RESOLVER_KEY", "AgentRun",
    "AgentRunError", "AgentRuns", "require_agent_runs", "resolve_agent_runs", "BATCH_RESULTS_RESOLVER_KEY",
    "BatchResultError", "BatchResultReader", "require_batch_results", "resolve_batch_results",
}  # fmt: skip


def _defaults(cls: type) -> dict[str, object]:
    found: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            found[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            found[f.name] = f.default_factory()
    return found


def _kw_only(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls) if f.kw_only}


async def _handler(payload: Any, context: Any) -> Any:
    return {"ok": True}


def _request(**state: object) -> SimpleNamespace:
    return SimpleNamespace(app=SimpleNamespace(state=SimpleNamespace(**state)))


# -- names ------------------------------------------------------------------------------------
def test_every_name_deerflow_added_through_0_2_6_is_exported() -> None:
    assert len(NEW_IN_0_2_6) == 56
    assert NEW_IN_0_2_6 <= set(api.__all__)
    assert api.API_VERSION == "0.2.6"


def test_new_names_live_in_the_contract_modules_deerflow_imports_them_from() -> None:
    homes = {
        "plugins": {"ActionContext", "BackendAction", "BrowserAssets", "BrowserModule", "ModelTool", "ToolContext"},
        "settings": {"SettingsField"},
        "auth": {"ExtensionPrincipal", "resolve_principal", "require_admin", "require_plugin_management"},
        "provenance": {"ContentKind", "MessageProvenance", "read_provenance"},
        "release": {"ReleasePolicyProvider"},
        "run_evidence": {"RunEvidenceReader", "RunPage", "InvalidRunEvidenceCursor"},
        "agent_runs": {"AgentRuns", "AgentRun", "AgentRunError"},
        "batch_results": {"BatchResultReader", "BatchResultError"},
        "model_invocation": {"ModelInvoker", "ModelInvocationRequest", "ModelOutputValidationError"},
    }
    for module, names in homes.items():
        for name in names:
            assert getattr(api, name).__module__ == f"deerflow_extension_api.{module}", name


# -- plugins ------------------------------------------------------------------------------------
def test_action_and_tool_context_stay_positional_with_keyword_only_additions() -> None:
    principal = api.ExtensionPrincipal("user-1")
    action = api.ActionContext(principal, {})
    tool = api.ToolContext(principal, {}, "thread-1")
    assert (action.agent_runs, action.batch_results) == (None, None)
    assert (tool.thread_id, tool.agent_runs, tool.batch_results) == ("thread-1", None, None)
    assert _kw_only(api.ActionContext) == {"agent_runs", "batch_results"}
    assert [f.name for f in dataclasses.fields(api.ToolContext) if not f.kw_only] == [
        "principal",
        "settings",
        "thread_id",
    ]
    with pytest.raises(TypeError):
        api.ActionContext(principal, {}, None)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        api.ToolContext(principal, {})  # type: ignore[call-arg]  # thread_id has no default
    assert isinstance(tool, api.ActionContext)


def test_plugin_value_defaults_are_deerflows() -> None:
    assert _defaults(api.PluginContribution) == {
        "description": "",
        "enabled": False,
        "fields": (),
        "frontend": None,
        "backend": (),
        "api_version": 1,
        "tools": (),
    }
    assert [f.name for f in dataclasses.fields(api.PluginContribution)] == [
        "namespace", "title", "description", "enabled", "fields", "frontend", "backend", "api_version", "tools",
    ]  # fmt: skip
    assert _defaults(api.ModelTool) == {"group": "extensions"}
    assert _defaults(api.BrowserModule) == {"public_fields": ()}
    assert _defaults(api.BrowserAssets) == {"manifest": "ui_manifest.json", "public_fields": ()}
    assert _defaults(api.BackendAction) == {}
    assert _defaults(api.SettingsField) == {"description": "", "minimum": None, "maximum": None, "max_length": 256}
    assert _defaults(api.ExtensionPrincipal) == {"is_admin": False, "is_internal": False, "roles": ()}


def test_sequences_are_coerced_to_tuples() -> None:
    action = api.BackendAction("go", _handler)
    tool = api.ModelTool("t", "d", {"type": "object"}, _handler)
    field = api.SettingsField("limit", "Limit", "integer", 3)
    plugin = api.PluginContribution("acme.x", "X", fields=[field], backend=[action], tools=[tool])  # type: ignore[arg-type]
    assert (plugin.fields, plugin.backend, plugin.tools) == ((field,), (action,), (tool,))
    assert api.BrowserModule("m", "c", ["a"]).public_fields == ("a",)  # type: ignore[arg-type]
    assert api.BrowserAssets("m", Path("/x"), public_fields=["a"]).public_fields == ("a",)  # type: ignore[arg-type]
    assert FrontendBinding("m", ["enabled"]).public_fields == ("enabled",)  # type: ignore[arg-type]
    assert SettingsContribution("n", "t", [field]).fields == (field,)  # type: ignore[arg-type]
    request = api.ModelInvocationRequest([api.ModelMessage("user", "hi")])
    assert isinstance(request.messages, tuple)


@pytest.mark.parametrize(
    ("backend", "tools", "frontend", "applies"),
    [
        (True, False, False, "next-request"),
        (False, True, False, "next-request"),
        (False, False, True, "page-load"),
        (True, False, True, "request-and-page-load"),
        (False, True, True, "request-and-page-load"),
    ],
)
def test_settings_contribution_puts_enabled_first_and_derives_when_it_applies(
    backend: bool, tools: bool, frontend: bool, applies: str
) -> None:
    limit = api.SettingsField("limit", "Limit", "integer", 3, minimum=1, maximum=9)
    plugin = api.PluginContribution(
        "acme.x",
        "X",
        description="about",
        enabled=True,
        fields=(limit,),
        backend=(api.BackendAction("go", _handler),) if backend else (),
        tools=(api.ModelTool("t", "d", {"type": "object"}, _handler),) if tools else (),
        frontend=api.BrowserModule("acme.x", "export default {}", ("limit",)) if frontend else None,
    )
    settings = plugin.settings_contribution()
    assert (settings.namespace, settings.title, settings.description) == ("acme.x", "X", "about")
    assert [f.key for f in settings.fields] == ["enabled", "limit"]
    enabled = settings.fields[0]
    assert (enabled.kind, enabled.default) == ("boolean", True)
    assert settings.applies == applies and settings.scope == "deployment"
    if frontend:
        assert settings.frontend == FrontendBinding("acme.x", ("enabled", "limit"))
    else:
        assert settings.frontend is None


def test_settings_contribution_defaults() -> None:
    assert _defaults(SettingsContribution) == {
        "description": "",
        "scope": "deployment",
        "applies": "next-run",
        "frontend": None,
    }


# -- auth ----------------------------------------------------------------------------------------
def test_principal_resolution_reads_the_hosts_resolver_and_fails_closed(caplog: pytest.LogCaptureFixture) -> None:
    admin = api.ExtensionPrincipal("u1", is_admin=True, roles=("admin",))
    assert api.resolve_principal(_request(**{api.EXTENSION_PRINCIPAL_RESOLVER_KEY: lambda request: admin})) is admin
    assert api.resolve_principal(object()) is None
    assert api.resolve_principal(_request(**{api.EXTENSION_PRINCIPAL_RESOLVER_KEY: "not callable"})) is None
    assert api.resolve_principal(_request(**{api.EXTENSION_PRINCIPAL_RESOLVER_KEY: lambda request: "u1"})) is None

    def broken(request: object) -> api.ExtensionPrincipal:
        raise RuntimeError("secret-token-123")

    with caplog.at_level(logging.WARNING):
        assert api.resolve_principal(_request(**{api.EXTENSION_PRINCIPAL_RESOLVER_KEY: broken})) is None
    assert "RuntimeError" in caplog.text and "secret-token-123" not in caplog.text


def test_require_admin() -> None:
    admin = api.ExtensionPrincipal("u1", is_admin=True)
    user = api.ExtensionPrincipal("u2")
    assert api.require_admin(_request(**{api.EXTENSION_PRINCIPAL_RESOLVER_KEY: lambda r: admin})) is admin
    for request in (_request(**{api.EXTENSION_PRINCIPAL_RESOLVER_KEY: lambda r: user}), _request()):
        with pytest.raises(PermissionError, match="administrator"):
            api.require_admin(request)


def test_plugin_management_checks_arguments_then_identity_then_policy() -> None:
    user = api.ExtensionPrincipal("u2")
    seen: list[tuple[object, ...]] = []

    def policy(request: object, namespace: str, scope: str) -> object:
        seen.append((namespace, scope))
        return namespace == "acme.ok" and scope == "read"

    request = _request(
        **{api.EXTENSION_PRINCIPAL_RESOLVER_KEY: lambda r: user, api.EXTENSION_PLUGIN_AUTHZ_RESOLVER_KEY: policy}
    )
    with pytest.raises(ValueError, match="scope must be 'read' or 'write'"):
        api.require_plugin_management(request, "acme.ok", scope="admin")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid plugin namespace"):
        api.require_plugin_management(request, "Acme")
    with pytest.raises(ValueError, match="invalid plugin namespace"):
        api.require_plugin_management(request, "a" * 97)
    assert api.require_plugin_management(request, "acme.ok") is user
    everyone = _request(
        **{
            api.EXTENSION_PRINCIPAL_RESOLVER_KEY: lambda r: user,
            api.EXTENSION_PLUGIN_AUTHZ_RESOLVER_KEY: lambda *a: True,
        }
    )
    assert api.require_plugin_management(everyone, "a" * 96) is user  # the longest namespace
    with pytest.raises(PermissionError, match=r"plugin management \(write\) is not permitted for acme.ok"):
        api.require_plugin_management(request, "acme.ok", scope="write")
    with pytest.raises(PermissionError, match="authenticated account"):
        api.require_plugin_management(_request(**{api.EXTENSION_PLUGIN_AUTHZ_RESOLVER_KEY: policy}), "acme.ok")
    truthy = _request(
        **{api.EXTENSION_PRINCIPAL_RESOLVER_KEY: lambda r: user, api.EXTENSION_PLUGIN_AUTHZ_RESOLVER_KEY: lambda *a: 1}
    )
    with pytest.raises(PermissionError):  # only a literal True permits
        api.require_plugin_management(truthy, "acme.ok")
    assert seen == [("acme.ok", "read"), ("acme.ok", "write")]


def test_async_plugin_management_reads_only_the_async_resolver() -> None:
    user = api.ExtensionPrincipal("u2")

    async def allow(request: object, namespace: str, scope: str) -> bool:
        return True

    both = _request(
        **{
            api.EXTENSION_PRINCIPAL_RESOLVER_KEY: lambda r: user,
            api.EXTENSION_PLUGIN_AUTHZ_RESOLVER_ASYNC_KEY: allow,
        }
    )
    assert asyncio.run(api.arequire_plugin_management(both, "acme.ok", scope="write")) is user
    sync_only = _request(
        **{
            api.EXTENSION_PRINCIPAL_RESOLVER_KEY: lambda r: user,
            api.EXTENSION_PLUGIN_AUTHZ_RESOLVER_KEY: lambda *a: True,
        }
    )
    with pytest.raises(PermissionError, match="not permitted"):
        asyncio.run(api.arequire_plugin_management(sync_only, "acme.ok"))
    sync_in_async_slot = _request(
        **{
            api.EXTENSION_PRINCIPAL_RESOLVER_KEY: lambda r: user,
            api.EXTENSION_PLUGIN_AUTHZ_RESOLVER_ASYNC_KEY: lambda *a: True,
        }
    )
    with pytest.raises(PermissionError, match="not permitted"):
        asyncio.run(api.arequire_plugin_management(sync_in_async_slot, "acme.ok"))
    with pytest.raises(ValueError, match="scope"):
        asyncio.run(api.arequire_plugin_management(both, "acme.ok", scope="x"))  # type: ignore[arg-type]


def test_resolver_keys_are_deerflows() -> None:
    assert api.EXTENSION_PRINCIPAL_RESOLVER_KEY == "deerflow_extension_principal_resolver"
    assert api.EXTENSION_PLUGIN_AUTHZ_RESOLVER_KEY == "deerflow_extension_plugin_authz_resolver"
    assert api.EXTENSION_PLUGIN_AUTHZ_RESOLVER_ASYNC_KEY == "deerflow_extension_plugin_authz_resolver_async"
    assert api.RUN_EVIDENCE_READER_RESOLVER_KEY == "deerflow_extension_run_evidence_reader_resolver"
    assert api.AGENT_RUNS_RESOLVER_KEY == "deerflow_agent_runs_resolver"
    assert api.AGENT_RUNS_CONTEXT_KEY == "__deerflow_extension_agent_runs"
    assert api.BATCH_RESULTS_RESOLVER_KEY == "deerflow_extension_batch_results_resolver"


# -- provenance -----------------------------------------------------------------------------------
class Message:
    def __init__(self, additional_kwargs: object) -> None:
        self.additional_kwargs = additional_kwargs


def test_provenance_round_trips_and_omits_an_absent_entity() -> None:
    stamp = api.provenance_kwargs(api.ContentKind.MEMORY, "dynamic_context_memory")
    assert stamp == {"deerflow_content_kind": "memory", "deerflow_producer_kind": "dynamic_context_memory"}
    assert type(stamp["deerflow_content_kind"]) is str
    assert api.read_provenance(Message(stamp)) == api.MessageProvenance("memory", "dynamic_context_memory")
    with_entity = api.provenance_kwargs("skill_body", "skill_activation", producer_entity_id="pdf")
    assert api.read_provenance(Message(with_entity)) == api.MessageProvenance("skill_body", "skill_activation", "pdf")
    assert api.PROVENANCE_KEYS == frozenset(
        {"deerflow_content_kind", "deerflow_producer_kind", "deerflow_producer_entity_id"}
    )
    assert [k.value for k in api.ContentKind] == [
        "middleware_injection", "memory", "durable_context", "skill_body", "image_payload",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"deerflow_content_kind": "memory"},
        {"deerflow_producer_kind": "x"},
        {"deerflow_content_kind": 1, "deerflow_producer_kind": "x"},
        "not a dict",
        None,
    ],
)
def test_incomplete_or_mistyped_provenance_reads_as_none(extra: object) -> None:
    assert api.read_provenance(Message(extra)) is None


def test_a_non_string_entity_is_dropped() -> None:
    extra = {"deerflow_content_kind": "memory", "deerflow_producer_kind": "x", "deerflow_producer_entity_id": 3}
    assert api.read_provenance(Message(extra)) == api.MessageProvenance("memory", "x", None)
    assert api.read_provenance(object()) is None


# -- release ---------------------------------------------------------------------------------------
def test_release_policy_provider_is_runtime_checkable_and_declares_nothing_by_default() -> None:
    class Declares:
        def release_policy_parameters(self) -> dict[str, object]:
            return {"cap": 3}

    class Inherits(api.ReleasePolicyProvider):
        pass

    assert isinstance(Declares(), api.ReleasePolicyProvider)
    assert not isinstance(object(), api.ReleasePolicyProvider)
    assert Inherits().release_policy_parameters() is None
    assert api.collect_release_policies([Declares()]) == {"Declares": {"cap": 3}}


# -- protocol defaults of the readers and invokers ---------------------------------------------------
def _bare(protocol: type) -> Any:
    """A subclass implementing nothing (mypy calls these protocols' methods abstract)."""
    return type(f"Bare{protocol.__name__}", (protocol,), {})


Runs, Batches, Evidence = _bare(api.AgentRuns), _bare(api.BatchResultReader), _bare(api.RunEvidenceReader)


class Invoker(api.ModelInvoker):
    pass


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: Runs().create_thread(), NotImplementedError),
        (lambda: Runs().start(thread_id="t", input={}), NotImplementedError),
        (lambda: Runs().resume(thread_id="t", resume=None), NotImplementedError),
        (lambda: Runs().get(thread_id="t", run_id="r"), NotImplementedError),
        (lambda: Runs().get_state(thread_id="t"), NotImplementedError),
        (lambda: Runs().wait(thread_id="t", run_id="r"), NotImplementedError),
        (lambda: Runs().cancel(thread_id="t", run_id="r"), NotImplementedError),
        (lambda: Batches().list_batches(thread_id="t"), NotImplementedError),
        (lambda: Batches().list_items(thread_id="t", batch_id="b"), NotImplementedError),
        (lambda: Batches().read_item(thread_id="t", batch_id="b", position=0), NotImplementedError),
        (lambda: Evidence().list_changed_runs(cursor=None, limit=1), NotImplementedError),
        (lambda: Evidence().list_run_events(thread_id="t", run_id="r", after_seq=None, limit=1), NotImplementedError),
        (lambda: Evidence().get_run_status(thread_id="t", run_id="r"), NotImplementedError),
        (lambda: Invoker().invoke(api.ModelInvocationRequest(())), api.ModelInvocationUnavailable),
    ],
)
def test_capability_protocol_defaults_say_the_host_cannot(call: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        asyncio.run(call())


def test_unsupported_host_resolves_none_and_require_names_what_is_missing() -> None:
    bare = _request()
    assert api.resolve_agent_runs(bare) is None
    assert api.resolve_batch_results(bare) is None
    assert api.resolve_run_evidence_reader(bare) is None
    with pytest.raises(NotImplementedError, match="host-bound Agent run control is unavailable"):
        api.require_agent_runs(bare)
    with pytest.raises(NotImplementedError, match="request-scoped run evidence is unavailable"):
        api.require_run_evidence_reader(bare)
    with pytest.raises(api.BatchResultError, match="Durable batch storage is unavailable") as raised:
        api.require_batch_results(bare)
    assert raised.value.status_code == 503


def test_resolvers_pass_the_request_and_let_refusals_propagate() -> None:
    runs, batches, evidence = Runs(), Batches(), Evidence()
    seen: list[object] = []

    def give(value: object) -> Any:
        def resolver(request: object) -> object:
            seen.append(request)
            return value

        return resolver

    request = _request(
        **{
            api.AGENT_RUNS_RESOLVER_KEY: give(runs),
            api.BATCH_RESULTS_RESOLVER_KEY: give(batches),
            api.RUN_EVIDENCE_READER_RESOLVER_KEY: give(evidence),
        }
    )
    assert api.require_agent_runs(request) is runs
    assert api.require_batch_results(request) is batches
    assert api.require_run_evidence_reader(request) is evidence
    assert seen == [request, request, request]

    def deny(request: object) -> None:
        raise PermissionError("revoked")

    refused = _request(**{api.AGENT_RUNS_RESOLVER_KEY: deny, api.RUN_EVIDENCE_READER_RESOLVER_KEY: deny})
    with pytest.raises(PermissionError):
        api.resolve_agent_runs(refused)
    with pytest.raises(PermissionError):
        api.resolve_run_evidence_reader(refused)


def test_error_types_and_statuses() -> None:
    error = api.AgentRunError(409, "a run is active")
    assert (error.status_code, str(error)) == (409, "a run is active")
    batch = api.BatchResultError(404, "no such batch")
    assert (batch.status_code, str(batch)) == (404, "no such batch")
    assert issubclass(api.InvalidRunEvidenceCursor, ValueError)
    assert issubclass(api.ModelInvocationError, RuntimeError)
    for sub in (api.ModelInvocationUnavailable, api.ModelInvocationUnauthorized, api.ModelInvocationFailed):
        assert sub.__bases__ == (api.ModelInvocationError,)
    assert api.ModelOutputValidationError.__bases__ == (api.ModelInvocationFailed,)


def test_model_invocation_values() -> None:
    assert _defaults(api.ModelInvocationRequest) == {
        "model_role": None,
        "purpose": None,
        "response_schema": None,
        "timeout_seconds": None,
    }
    assert _defaults(api.ModelUsage) == {"input_tokens": None, "output_tokens": None, "total_tokens": None}
    assert _defaults(api.ModelInvocationResult) == {"structured_output": None, "resolved_model": None, "usage": None}
    assert _defaults(api.AgentRun) == {"assistant_id": None, "stop_reason": None}


def test_run_evidence_views_default_to_empty() -> None:
    assert api.RunStatusView() == api.RunStatusView("", "", "", "", "", None, None)
    event = api.RunEventView()
    assert (event.seq, event.content, event.metadata) == (0, None, {})
    assert api.RunEventView().metadata is not event.metadata
    assert (api.RunPage().items, api.RunPage().next_cursor, api.RunPage().has_more) == ((), None, False)
    assert api.RunEventPage() == api.RunEventPage((), None, False)


def test_runtime_deps_carry_the_reader_and_invoker_fields_unset() -> None:
    deps = api.ExtensionRuntimeDeps()
    assert (deps.run_evidence_reader, deps.model_invoker) == (None, None)
    invoker = Invoker()
    assert api.ExtensionRuntimeDeps(model_invoker=invoker).model_invoker is invoker


def test_settings_handed_to_a_handler_can_be_read_only() -> None:
    context = api.ActionContext(api.ExtensionPrincipal("u"), MappingProxyType({"enabled": True}))
    with pytest.raises(TypeError):
        context.settings["enabled"] = False  # type: ignore[index]


# -- the registry ----------------------------------------------------------------------------------
class EightMethods:
    """A registry double with DeerFlow's eight registration methods (its example's tests keep one)."""

    def plugin(self, contribution: Any) -> bool:
        return True

    def middlewares(self, contributor: Any) -> None: ...

    def task_lifecycle(self, contributor: Any) -> None: ...

    def system_model_observer(self, observer: Any) -> None: ...

    def agent_assembly_observer(self, observer: Any) -> None: ...

    def context_compaction_observer(self, observer: Any) -> None: ...

    def service(self, service: Any) -> None: ...

    def routers(self, routers: Any) -> None: ...


def test_plugin_is_a_registry_method_whose_default_is_false() -> None:
    class Old(api.ExtensionRegistry):
        pass

    assert Old().plugin(api.PluginContribution("acme.x", "X")) is False
    assert isinstance(EightMethods(), api.ExtensionRegistry)
    assert "plugin" in vars(api.ExtensionRegistry)
