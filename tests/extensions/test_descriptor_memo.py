"""A construction that describes its agent exactly as the last one did gets that descriptor again;
any difference the fingerprint would see (a type, a sign, a nested value) gets a new one."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langchain.agents.middleware import AgentMiddleware

from deerflow_ext.agents.lead import make_lead_agent
from deerflow_ext.config.schema import AppConfig
from deerflow_ext.extensions.composition.assembly import describe_middleware
from deerflow_ext.extensions.contract.snapshot import Contribution, LoadedExtensions
from deerflow_ext.memo import DescriptorMemo, scalar_key
from deerflow_extension_api import AgentAssemblyDescriptor, MiddlewarePlacement, Placement


class Declared(AgentMiddleware):  # type: ignore[type-arg]
    def __init__(self, value: Any) -> None:
        self.value = value

    def release_policy_parameters(self) -> dict[str, object]:
        return {"value": self.value}

    async def awrap_tool_call(self, request, handler):  # type: ignore[no-untyped-def]
        return await handler(request)


class Contributor:
    def __init__(self, value: Any) -> None:
        self.value = value

    def contribute_middlewares(self, app_store: Any, ctx: Any) -> list[MiddlewarePlacement]:
        return [MiddlewarePlacement(Declared(self.value), Placement.STANDARD)]  # a new instance each time


class Recorder:
    def __init__(self) -> None:
        self.descriptors: list[AgentAssemblyDescriptor] = []

    def on_agent_assembled(self, app_store: Any, descriptor: AgentAssemblyDescriptor) -> None:
        self.descriptors.append(descriptor)


def _extensions(recorder: Recorder, contributor: Contributor) -> LoadedExtensions:
    return LoadedExtensions(
        assembly_observers=(Contribution("obs:install", "obs", 0, "0:obs:install#1", recorder),),
        middlewares=(Contribution("declared:install", "declared", 1, "1:declared:install#1", contributor),),
    )


def _descriptors(config: AppConfig, *values: Any) -> list[AgentAssemblyDescriptor]:
    """One lead construction per value, in order, each observed."""
    recorder, contributor = Recorder(), Contributor(None)
    ext = _extensions(recorder, contributor)
    for value in values:
        contributor.value = value
        make_lead_agent(config, extensions=ext)
    return recorder.descriptors


def _policy(descriptor: AgentAssemblyDescriptor) -> Any:
    (mine,) = [m for m in descriptor.middlewares if m.extension == "declared:install"]
    return mine.policy_parameters["value"]


def test_an_unchanged_construction_gets_the_last_descriptor_again() -> None:
    first, second = _descriptors(AppConfig(), 200, 200)
    assert second is first


@pytest.mark.parametrize(
    ("before", "after"),
    [(1, True), (1, 1.0), (True, 1.0), (0.0, -0.0), (200, 201), ("a", "b"), (None, 0)],
    ids=["int-bool", "int-float", "bool-float", "zero-sign", "int", "str", "none-zero"],
)
def test_a_value_equal_in_python_but_not_in_json_gets_a_new_descriptor(before: Any, after: Any) -> None:
    first, second = _descriptors(AppConfig(), before, after)
    assert second is not first
    assert second.fingerprint != first.fingerprint
    value = _policy(second)
    assert (type(value), repr(value)) == (type(after), repr(after))


def test_a_nested_value_is_never_compared_so_each_construction_describes_it_anew() -> None:
    first, second, changed = _descriptors(AppConfig(), [1, {"a": 2}], [1, {"a": 2}], [1, {"a": True}])
    assert second is not first and second.fingerprint == first.fingerprint
    assert changed.fingerprint != first.fingerprint


def test_another_config_object_is_described_anew_even_when_equal() -> None:
    (first,) = _descriptors(AppConfig(), 5)
    (second,) = _descriptors(AppConfig(), 5)
    assert second is not first and second.fingerprint == first.fingerprint


def test_a_changed_build_environment_is_described_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    config = AppConfig()
    (first,) = _descriptors(config, 5)
    monkeypatch.setenv("DEER_FLOW_GIT_COMMIT", "c0ffee")
    (second,) = _descriptors(config, 5)
    assert second is not first
    assert second.build["git_commit"] == "c0ffee" and second.fingerprint == first.fingerprint


def test_middleware_descriptors_are_shared_only_for_exactly_equal_scalars() -> None:
    assert describe_middleware(Declared(3)) is describe_middleware(Declared(3))
    assert describe_middleware(Declared(3)) is not describe_middleware(Declared(3.0))
    assert describe_middleware(Declared([3])) is not describe_middleware(Declared([3]))


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ({"x": 1}, {"x": 1}, True),
        ({"x": 1}, {"x": True}, False),
        ({"x": 0.0}, {"x": -0.0}, False),
        ({"x": 1, "y": 2}, {"y": 2, "x": 1}, False),  # the order an observer iterates
    ],
)
def test_scalar_key_is_equal_only_for_the_same_json_and_order(a: dict[str, Any], b: dict[str, Any], same: bool) -> None:
    assert (scalar_key(a) == scalar_key(b)) is same


@pytest.mark.parametrize("value", [[1], (1,), {"k": 1}, {1}, object()])
def test_scalar_key_refuses_what_is_not_a_plain_scalar(value: Any) -> None:
    assert scalar_key({"x": value}) is None


def test_memo_compares_the_identity_of_what_it_holds() -> None:
    memo, source = DescriptorMemo(), object()
    built: list[AgentAssemblyDescriptor] = []

    def build() -> AgentAssemblyDescriptor:
        built.append(AgentAssemblyDescriptor("ns", "a", None, "m", {}, False, None, "h", (), (), (), (), {}))
        return built[-1]

    first = memo.descriptor("a", same=(source,), inputs=("x",), build=build)
    assert memo.descriptor("a", same=(source,), inputs=("x",), build=build) is first
    assert memo.descriptor("a", same=(object(),), inputs=("x",), build=build) is not first
    assert len(built) == 2


def test_concurrent_constructions_each_get_a_correct_descriptor() -> None:
    config = AppConfig()
    results: list[tuple[int, AgentAssemblyDescriptor]] = []
    lock = threading.Lock()

    def construct(value: int) -> None:
        for _ in range(5):
            (descriptor,) = _descriptors(config, value)
            with lock:
                results.append((value, descriptor))

    threads = [threading.Thread(target=construct, args=(v,)) for v in (1, 2, 3, 4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 20
    assert all(_policy(descriptor) == value for value, descriptor in results)
