"""Agent assembly: descriptors only when observed, observers fail open, fingerprints are stable."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware import AgentMiddleware
from langchain_core.tools import StructuredTool, tool

from deerflow_ext.agents.lead import make_lead_agent
from deerflow_ext.config.schema import AppConfig, ModelEntry
from deerflow_ext.extensions.boundary.diagnostics import DiagnosticsList
from deerflow_ext.extensions.composition.assembly import (
    build_info,
    describe_middleware,
    describe_tool,
    emit_agent_assembled,
)
from deerflow_ext.extensions.composition.isolation import IsolatedMiddleware
from deerflow_ext.extensions.contract.snapshot import Contribution, LoadedExtensions
from deerflow_extension_api import AgentAssemblyDescriptor, MiddlewarePlacement, Placement

SRC = Path(__file__).resolve().parents[2] / "src"


def contribution(obj: Any, name: str) -> Contribution[Any]:
    return Contribution(name, name.split(":")[0], 0, f"0:{name}#1", obj)


class Recorder:
    def __init__(self, log: list[Any] | None = None, tag: str = "") -> None:
        self.descriptors: list[AgentAssemblyDescriptor] = []
        self.stores: list[Any] = []
        self.log = log if log is not None else []
        self.tag = tag

    def on_agent_assembled(self, app_store: Any, descriptor: AgentAssemblyDescriptor) -> None:
        self.log.append(self.tag)
        self.stores.append(app_store)
        self.descriptors.append(descriptor)


class Exploding:
    def on_agent_assembled(self, app_store: Any, descriptor: Any) -> None:
        raise RuntimeError("observer bug")


class Async:
    async def on_agent_assembled(self, app_store: Any, descriptor: Any) -> None:
        raise AssertionError("never awaited")


def observed(*observers: Any, middlewares: tuple[Contribution[Any], ...] = ()) -> LoadedExtensions:
    return LoadedExtensions(
        assembly_observers=tuple(contribution(o, f"obs{n}:install") for n, o in enumerate(observers)),
        middlewares=middlewares,
    )


# -- emit_agent_assembled -----------------------------------------------------------------
def test_without_an_observer_no_descriptor_is_built() -> None:
    def build() -> AgentAssemblyDescriptor:
        raise AssertionError("built for nobody")

    emit_agent_assembled(LoadedExtensions(), build)


def test_no_observer_means_no_descriptor_during_real_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    import deerflow_ext.extensions.composition.assembly as assembly

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no hashing without an observer")

    monkeypatch.setattr(assembly, "describe_tool", forbidden)
    monkeypatch.setattr(assembly, "describe_middleware", forbidden)
    assert make_lead_agent(AppConfig(), extensions=LoadedExtensions()) is not None


def test_observers_run_in_registration_order_with_the_app_store() -> None:
    log: list[str] = []
    first, second = Recorder(log, "first"), Recorder(log, "second")
    ext = observed(first, second)
    make_lead_agent(AppConfig(), extensions=ext)
    assert log == ["first", "second"]
    assert first.stores == [ext.app_store] and first.descriptors[0] is second.descriptors[0]
    assert first.descriptors[0].agent_name == "lead"


def test_an_observer_exception_is_logged_and_construction_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    after = Recorder()
    ext = observed(Exploding(), after)
    with caplog.at_level(logging.ERROR, logger="deerflow_ext.extensions"):
        graph = make_lead_agent(AppConfig(), extensions=ext)
    assert graph is not None
    assert len(after.descriptors) == 1
    assert "Extension obs0:install: on_agent_assembled raised RuntimeError: observer bug" in caplog.messages
    assert len(ext.diagnostics) == 0  # logged, not added to the diagnostics list


def test_an_async_observer_is_reported_not_left_unawaited(caplog: pytest.LogCaptureFixture) -> None:
    descriptor = _descriptor()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an un-awaited coroutine would warn
        with caplog.at_level(logging.ERROR, logger="deerflow_ext.extensions"):
            emit_agent_assembled(observed(Async()), lambda: descriptor)
    assert any("must be synchronous" in m for m in caplog.messages)


def test_a_descriptor_that_cannot_be_built_is_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder()

    def build() -> AgentAssemblyDescriptor:
        raise TypeError("not serialisable")

    with caplog.at_level(logging.ERROR, logger="deerflow_ext.extensions"):
        emit_agent_assembled(observed(recorder), build)
    assert recorder.descriptors == []
    assert any("descriptor could not be built" in m for m in caplog.messages)


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(3)])
def test_an_observers_keyboard_interrupt_or_system_exit_is_its_failure(
    caplog: pytest.LogCaptureFixture, exc: BaseException
) -> None:
    # An extension cannot stop the Gateway (extensions/boundary/exits.py): the next observer still runs.
    class Exiting:
        def on_agent_assembled(self, app_store: Any, descriptor: Any) -> None:
            raise exc

    after = Recorder()
    with caplog.at_level(logging.ERROR, logger="deerflow_ext.extensions"):
        emit_agent_assembled(observed(Exiting(), after), _descriptor)
    assert len(after.descriptors) == 1
    text = "KeyboardInterrupt" if isinstance(exc, KeyboardInterrupt) else "SystemExit: 3"
    assert any(m == f"Extension obs0:install: on_agent_assembled raised {text}" for m in caplog.messages)


class SelfCancelling:
    def on_agent_assembled(self, app_store: Any, descriptor: Any) -> None:
        raise asyncio.CancelledError("observer's own timeout")


def test_an_observers_own_cancellation_is_contained(caplog: pytest.LogCaptureFixture) -> None:
    after = Recorder()
    with caplog.at_level(logging.ERROR, logger="deerflow_ext.extensions"):
        emit_agent_assembled(observed(SelfCancelling(), after), _descriptor)
    assert len(after.descriptors) == 1
    expected = "Extension obs0:install: on_agent_assembled raised CancelledError"
    assert any(m.startswith(expected) for m in caplog.messages)


async def test_a_host_cancellation_during_assembly_propagates() -> None:
    after = Recorder()

    async def construct() -> None:
        asyncio.current_task().cancel()  # the host task is being cancelled while it builds
        emit_agent_assembled(observed(SelfCancelling(), after), _descriptor)

    with pytest.raises(asyncio.CancelledError):
        await asyncio.create_task(construct())
    assert after.descriptors == []


def _descriptor() -> AgentAssemblyDescriptor:
    return AgentAssemblyDescriptor("ns", "a", None, "m", {}, False, None, "h", (), (), (), (), {})


# -- describe_middleware ------------------------------------------------------------------
class ToolTimer(AgentMiddleware):
    def __init__(self, slow_ms: float) -> None:
        self.slow_ms = slow_ms

    def release_policy_parameters(self) -> dict[str, object]:
        return {"slow_ms": self.slow_ms}

    def wrap_tool_call(self, request, handler):  # type: ignore[no-untyped-def]
        return handler(request)


class Probed(AgentMiddleware):
    enabled = True
    max_retries = 4
    threshold = object()  # not JSON: left out
    secret_sauce = "never probed"

    def before_model(self, state, runtime):  # type: ignore[no-untyped-def]
        return None


def test_an_isolated_middleware_is_described_by_its_inner_class() -> None:
    wrapped = IsolatedMiddleware(
        ToolTimer(200), extension="deerflow_extension_hello:install", diagnostics=DiagnosticsList()
    )
    described = describe_middleware(wrapped)
    assert described.name == "ToolTimer"
    assert described.module == __name__
    assert described.policy_parameters == {"slow_ms": 200}
    assert described.extension == "deerflow_extension_hello:install"
    assert describe_middleware(ToolTimer(200)).extension is None


def test_undeclared_policy_is_probed_from_a_fixed_attribute_set() -> None:
    assert describe_middleware(Probed()).policy_parameters == {"enabled": True, "max_retries": 4}


class _Raising(AgentMiddleware):  # type: ignore[type-arg]
    @property
    def limit(self) -> int:
        raise RuntimeError("broken property")


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        (None, True),
        ("text", True),
        (False, True),
        (7, True),
        (-(10**17), True),
        (10**30, True),  # beyond the fast path: asked of canonical_json, still JSON
        (2.5, True),
        (float("nan"), False),
        (float("inf"), False),
        ([1, "a", None], True),
        ({"k": (1, 2)}, True),
        ({1, 2}, False),
        ([object()], False),
    ],
)
def test_a_probed_value_is_kept_exactly_when_canonical_json_accepts_it(value: Any, kept: bool) -> None:
    mw = Probed()
    mw.timeout = value  # type: ignore[attr-defined]
    expected = {"enabled": True, "max_retries": 4, **({"timeout": value} if kept else {})}
    assert describe_middleware(mw).policy_parameters == expected


def test_a_probed_property_that_raises_is_skipped() -> None:
    assert describe_middleware(_Raising()).policy_parameters == {}


class _Dynamic(AgentMiddleware):  # type: ignore[type-arg]
    def __getattr__(self, name: str) -> Any:
        if name in ("limit", "enabled"):
            return 5 if name == "limit" else False
        raise AttributeError(name)


class _Slotted(AgentMiddleware):  # type: ignore[type-arg]
    __slots__ = ("threshold",)

    def __init__(self) -> None:
        self.threshold = 0.5


class _ClassLevel(AgentMiddleware):  # type: ignore[type-arg]
    max_chars = 80


def test_every_way_a_middleware_holds_a_probed_name_is_read() -> None:
    # Names the instance does not hold are answered by __getattr__, slots and class attributes.
    assert describe_middleware(_Dynamic()).policy_parameters == {"enabled": False, "limit": 5}
    assert describe_middleware(_Slotted()).policy_parameters == {"threshold": 0.5}
    assert describe_middleware(_ClassLevel()).policy_parameters == {"max_chars": 80}
    shadowed = _ClassLevel()
    shadowed.max_chars = 40  # type: ignore[misc]
    assert describe_middleware(shadowed).policy_parameters == {"max_chars": 40}


class _RaisesOnTheClass:
    def __get__(self, obj: Any, owner: Any = None) -> Any:
        raise RuntimeError("broken descriptor")


class _Odd(AgentMiddleware):  # type: ignore[type-arg]
    limit = _RaisesOnTheClass()

    def __init__(self) -> None:
        super().__init__()
        self.enabled = True


def test_a_class_whose_attribute_raises_when_asked_for_is_still_described() -> None:
    assert describe_middleware(_Odd()).policy_parameters == {"enabled": True}


def test_probed_names_keep_the_fixed_order_whatever_the_instance_set_first() -> None:
    mw = _ClassLevel()
    mw.timeout = 3  # type: ignore[attr-defined]
    mw.enabled = True  # type: ignore[attr-defined]
    assert list(describe_middleware(mw).policy_parameters) == ["enabled", "timeout", "max_chars"]


def test_a_declaration_set_on_one_instance_is_read_though_its_class_has_none() -> None:
    plain, declaring = _ClassLevel(), _ClassLevel()
    declaring.release_policy_parameters = lambda: {"mode": "strict"}  # type: ignore[attr-defined]
    assert describe_middleware(plain).policy_parameters == {"max_chars": 80}
    assert describe_middleware(declaring).policy_parameters == {"mode": "strict"}


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        (lambda: 1 / 0, {"error": "ZeroDivisionError"}),
        (lambda: ["not", "a", "mapping"], {"error": "TypeError"}),
        (lambda: {"when": object()}, {"error": "TypeError"}),
        (lambda: {"ratio": float("nan")}, {"error": "TypeError"}),
        (lambda: {"ok": 1, "nested": [{"bad": {1, 2}}]}, {"error": "TypeError"}),
        (lambda: {"ok": 1, "nested": [{"fine": (1, None)}], "big": 10**30}, None),
    ],
)
def test_declarations_are_kept_or_recorded_as_broken(declared: Any, expected: dict[str, str] | None) -> None:
    mw = Probed()
    mw.release_policy_parameters = declared  # type: ignore[attr-defined]
    # Twice: the second description may come from the memo, and must say the same.
    for _ in range(2):
        assert describe_middleware(mw).policy_parameters == (expected if expected is not None else declared())


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_declared_value_json_refuses_is_recorded_as_broken_however_often_it_is_described(value: float) -> None:
    seen = []
    for _ in range(3):
        mw = Probed()
        mw.release_policy_parameters = lambda: {"ratio": value}  # type: ignore[attr-defined]
        seen.append(describe_middleware(mw))
    assert all(d.policy_parameters == {"error": "TypeError"} for d in seen)
    fine = Probed()
    fine.release_policy_parameters = lambda: {"ratio": 0.5}  # type: ignore[attr-defined]
    assert describe_middleware(fine).policy_parameters == {"ratio": 0.5}


# -- describe_tool and build_info ---------------------------------------------------------
def _tool(description: str, **fields: type) -> StructuredTool:
    def run(**kwargs: Any) -> str:
        return "ok"

    from pydantic import create_model

    schema = create_model("Args", **{k: (v, ...) for k, v in fields.items()})  # type: ignore[call-overload]
    return StructuredTool.from_function(run, name="lookup", description=description, args_schema=schema)


def test_describe_tool_hashes_description_and_schema() -> None:
    base = describe_tool(_tool("Look it up.", q=str))
    assert base == describe_tool(_tool("Look it up.", q=str))
    assert base.name == "lookup" and base.source == "builtin"
    assert describe_tool(_tool("Look it up!", q=str)).description_hash != base.description_hash
    assert describe_tool(_tool("Look it up!", q=str)).schema_hash == base.schema_hash
    assert describe_tool(_tool("Look it up.", q=int)).schema_hash != base.schema_hash
    mcp = describe_tool(_tool("Look it up.", q=str), "mcp", mcp_server="search", mcp_transport="stdio")
    assert (mcp.source, mcp.mcp_server, mcp.mcp_transport) == ("mcp", "search", "stdio")


def test_an_unchanged_tool_keeps_its_descriptor_and_a_changed_one_is_described_anew() -> None:
    lookup = _tool("Look it up.", q=str)
    first = describe_tool(lookup)
    assert describe_tool(lookup) is first  # the agent descriptor's memo compares by identity
    lookup.description = "Look it up, carefully."
    reworded = describe_tool(lookup)
    assert reworded.description_hash != first.description_hash
    lookup.args_schema = _tool("x", q=int).args_schema
    assert describe_tool(lookup).schema_hash != reworded.schema_hash
    assert describe_tool(lookup, "mcp", mcp_server="search").mcp_server == "search"
    # A dict schema can change in place: such a tool is described anew every time.
    as_dict = StructuredTool(
        name="raw", description="Raw.", args_schema={"type": "object", "properties": {}}, func=lambda: "ok"
    )
    before = describe_tool(as_dict)
    as_dict.args_schema["properties"]["q"] = {"type": "string"}  # type: ignore[index]
    assert describe_tool(as_dict).schema_hash != before.schema_hash


def test_build_info_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEER_FLOW_IMAGE_DIGEST", raising=False)
    monkeypatch.delenv("DEER_FLOW_GIT_COMMIT", raising=False)
    info = build_info()
    assert info["image_digest"] == "unknown" and info["git_commit"] == "unknown"
    assert info["host_version"]
    monkeypatch.setenv("DEER_FLOW_IMAGE_DIGEST", "sha256:abc")
    monkeypatch.setenv("DEER_FLOW_GIT_COMMIT", "deadbeef")
    assert build_info() | {"host_version": ""} == {
        "image_digest": "sha256:abc",
        "git_commit": "deadbeef",
        "host_version": "",
    }


# -- fingerprint stability through the real lead builder -------------------------------------
class TimerContributor:
    def __init__(self, *placements: tuple[float, int]) -> None:
        self.placements = placements

    def contribute_middlewares(self, app_store: Any, ctx: Any) -> list[MiddlewarePlacement]:
        return [MiddlewarePlacement(ToolTimer(ms), Placement.TOOL_VISIBLE, order=o) for ms, o in self.placements]


@tool
def weather(city: str) -> str:
    """Weather for a city."""
    return "sunny"


@tool("weather")
def weather_v2(city: str, unit: str = "C") -> str:
    """Weather for a city."""
    return "sunny"


def _aliases() -> AppConfig:
    embedded = "deerflow_ext.agents.embedded_model:EmbeddedChatModel"
    return AppConfig(models=[ModelEntry(name="fast", use=embedded), ModelEntry(name="default", use=embedded)])


def assembled(
    *,
    timers: tuple[tuple[float, int], ...] = ((200, 0), (300, 1)),
    extra_tools: tuple[Any, ...] = (weather,),
    model_name: str | None = None,
) -> AgentAssemblyDescriptor:
    recorder = Recorder()
    ext = observed(recorder, middlewares=(contribution(TimerContributor(*timers), "timers:install"),))
    make_lead_agent(_aliases(), extensions=ext, extra_tools=list(extra_tools), model_name=model_name)
    (descriptor,) = recorder.descriptors
    return descriptor


FINGERPRINT_SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
from test_assembly import assembled
d = assembled()
print(json.dumps({{"fingerprint": d.fingerprint, "build": dict(d.build)}}))
"""


def _fingerprint_in_subprocess(**env: str) -> dict[str, Any]:
    script = FINGERPRINT_SCRIPT.format(tests=str(Path(__file__).parent))
    environ = {**os.environ, "PYTHONPATH": str(SRC), **env}
    done = subprocess.run([sys.executable, "-c", script], env=environ, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_same_configuration_same_fingerprint_across_processes() -> None:
    here = assembled()
    first = _fingerprint_in_subprocess(PYTHONHASHSEED="1")
    second = _fingerprint_in_subprocess(PYTHONHASHSEED="2", DEER_FLOW_GIT_COMMIT="0123abc")
    assert here.fingerprint == first["fingerprint"] == second["fingerprint"]
    assert second["build"]["git_commit"] == "0123abc" != first["build"]["git_commit"]


def test_the_descriptor_reports_the_contributed_middleware_in_stack_order() -> None:
    descriptor = assembled()
    contributed = [m for m in descriptor.middlewares if m.extension == "timers:install"]
    assert [(m.name, dict(m.policy_parameters)) for m in contributed] == [
        ("ToolTimer", {"slow_ms": 200}),
        ("ToolTimer", {"slow_ms": 300}),
    ]
    assert descriptor.middlewares[-1].name == "ClarificationMiddleware"
    assert any(t.name == "weather" for t in descriptor.tools)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"extra_tools": (weather_v2,)}, id="tool schema"),
        pytest.param({"extra_tools": ()}, id="tool removed"),
        pytest.param({"timers": ((250, 0), (300, 1))}, id="policy parameter"),
        pytest.param({"timers": ((200, 1), (300, 0))}, id="middleware order"),
    ],
)
def test_behavioural_changes_change_the_fingerprint(change: dict[str, Any]) -> None:
    assert assembled(**change).fingerprint != assembled().fingerprint


def test_build_info_and_requested_alias_do_not_change_the_fingerprint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = assembled(model_name="fast")
    monkeypatch.setenv("DEER_FLOW_IMAGE_DIGEST", "sha256:new-image")
    monkeypatch.setenv("DEER_FLOW_GIT_COMMIT", "feedface")
    other = assembled(model_name="default")
    assert (base.requested_model, other.requested_model) == ("fast", "default")
    assert base.effective_model == other.effective_model
    assert base.build != other.build
    assert base.fingerprint == other.fingerprint


def test_tool_schema_hash_is_cached_per_schema_class_and_follows_changes() -> None:
    @tool
    def probe(x: int) -> str:
        """Probe."""
        return str(x)

    first = describe_tool(probe)
    assert describe_tool(probe) == first
    renamed = probe.model_copy(update={"name": "probe2"})
    assert describe_tool(renamed).schema_hash == first.schema_hash  # the name is not in the schema

    @tool
    def probe_wider(x: int, y: int) -> str:
        """Probe."""
        return str(x + y)

    assert describe_tool(probe_wider).schema_hash != first.schema_hash
