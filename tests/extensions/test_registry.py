"""HostRegistry: registration only inside install, unsupported methods fail, positional rollback."""

from __future__ import annotations

import re
from typing import Any

import pytest

from deerflow_ext.extensions.contract.registry import HostRegistry, RegistrationError
from deerflow_extension_api import ExtensionRegistry
from extensions.fixtures_plugins import Lifecycle, Observer, Service


def test_satisfies_the_public_protocol() -> None:
    assert isinstance(HostRegistry(), ExtensionRegistry)


def test_registering_before_any_install_raises() -> None:
    with pytest.raises(RegistrationError, match="only while their install"):
        HostRegistry().agent_assembly_observer(Observer(("early",)))


def test_registering_after_end_raises() -> None:
    registry = HostRegistry()
    registry.begin(0, "a", "a:install")
    registry.agent_assembly_observer(Observer(("in",)))
    registry.end()
    with pytest.raises(RegistrationError):
        registry.agent_assembly_observer(Observer(("late",)))


def test_unsupported_method_is_an_error_not_a_no_op() -> None:
    registry = HostRegistry()
    registry.begin(0, "a", "a:install")
    with pytest.raises(AttributeError, match="no 'tools'"):
        registry.tools([object()])


def test_rollback_removes_only_registrations_since_begin() -> None:
    registry = HostRegistry()
    registry.begin(0, "first", "x:install")
    registry.agent_assembly_observer(Observer(("first", 0)))
    registry.service(Service(("first", 1)))
    registry.end()
    mark = registry.begin(1, "second", "x:install")
    registry.agent_assembly_observer(Observer(("second", 0)))
    registry.task_lifecycle(Lifecycle(("second", 1)))
    registry.rollback(mark)
    ext = registry.freeze(loaded=["x:install"], total=2)
    assert [c.contributor.tag for c in ext.assembly_observers] == [("first", 0)]
    assert [c.contributor.tag for c in ext.services] == [("first", 1)]
    assert ext.task_lifecycle == ()
    assert not ext.needs_task_store


def test_freeze_keeps_registration_order_and_attribution() -> None:
    registry = HostRegistry()
    for position in range(3):
        registry.begin(position, f"e{position}", "x:install")
        registry.agent_assembly_observer(Observer((position, 0)))
        registry.agent_assembly_observer(Observer((position, 1)))
        registry.end()
    ext = registry.freeze(total=3)
    assert [c.contributor.tag for c in ext.assembly_observers] == [(p, n) for p in range(3) for n in range(2)]
    assert [c.plugin_name for c in ext.assembly_observers][:2] == ["0:x:install#1", "0:x:install#2"]


class WrongSignature:
    def on_agent_assembled(self, descriptor: Any) -> None:
        return None


def test_wrong_signature_is_rejected_at_registration() -> None:
    registry = HostRegistry()
    registry.begin(0, "a", "a:install")
    with pytest.raises(
        RegistrationError,
        match=r"WrongSignature\.on_agent_assembled cannot be called with the contract's arguments "
        r"\(app_store, descriptor\): too many positional arguments",
    ):
        registry.agent_assembly_observer(WrongSignature())


def test_object_without_the_method_is_rejected() -> None:
    registry = HostRegistry()
    registry.begin(0, "a", "a:install")
    with pytest.raises(RegistrationError, match="needs an object with"):
        registry.task_lifecycle(object())


def test_routers_must_be_a_sequence_of_routers() -> None:
    registry = HostRegistry()
    registry.begin(0, "a", "a:install")
    with pytest.raises(RegistrationError):
        registry.routers("not a list")
    with pytest.raises(RegistrationError):
        registry.routers([object()])


class OwnNames:
    async def on_task_start(self, app: Any, store: Any, task: Any) -> None:
        return None

    async def on_task_stop(self, app: Any, store: Any, task: Any, how: Any) -> None:
        return None


class OutcomeDefaulted:
    async def on_task_stop(self, app_store: Any, task_store: Any, info: Any, outcome: Any = None) -> None:
        return None


class TakesStar:
    async def on_system_model_call(self, *args: Any) -> None:
        return None


@pytest.mark.parametrize("contributor", [OwnNames(), OutcomeDefaulted(), TakesStar()], ids=lambda c: type(c).__name__)
def test_any_hook_the_contracts_arguments_bind_to_positionally_is_accepted(contributor: Any) -> None:
    # DeerFlow's rule: the host calls hooks positionally, so parameter names and extra
    # defaulted parameters are the author's business.
    registry = HostRegistry()
    registry.begin(0, "a", "a:install")
    if isinstance(contributor, TakesStar):
        registry.system_model_observer(contributor)
    else:
        registry.task_lifecycle(contributor)
    registry.end()
    frozen = registry.freeze()
    assert [c.contributor for c in (*frozen.task_lifecycle, *frozen.system_model_observers)] == [contributor]


class NeedsMore:
    async def on_task_start(self, app_store: Any, task_store: Any, info: Any, extra: Any) -> None:
        return None


class NeedsKeyword:
    async def on_task_start(self, app_store: Any, task_store: Any, info: Any, *, mode: str) -> None:
        return None


class TakesLess:
    async def on_task_stop(self, app_store: Any, task_store: Any, info: Any) -> None:
        return None


@pytest.mark.parametrize(
    ("contributor", "problem"),
    [
        (NeedsMore(), r"missing a required argument: 'extra'"),
        # inspect's wording: Python 3.12 says which kind of argument is missing.
        (NeedsKeyword(), r"missing a required (keyword-only )?argument: 'mode'"),
        (TakesLess(), r"too many positional arguments"),
    ],
    ids=lambda value: type(value).__name__,
)
def test_a_hook_the_contracts_arguments_cannot_bind_to_is_refused_and_leaves_nothing(
    contributor: Any, problem: str
) -> None:
    registry = HostRegistry()
    registry.begin(0, "a", "a:install")
    with pytest.raises(RegistrationError, match=rf"{type(contributor).__name__}\.on_task_\w+ cannot be called") as info:
        registry.task_lifecycle(contributor)
    assert re.search(rf"{problem}$", str(info.value))
    registry.end()
    assert registry.plugin_manager.get_plugins() == set()
    assert registry.freeze().task_lifecycle == ()


class OptionalExtra:
    def on_agent_assembled(self, app_store: Any, descriptor: Any, verbose: bool = False) -> None:
        return None


def test_an_extra_parameter_with_a_default_is_accepted() -> None:
    registry = HostRegistry()
    registry.begin(0, "a", "a:install")
    registry.agent_assembly_observer(OptionalExtra())
    registry.end()
    assert len(registry.freeze().assembly_observers) == 1
