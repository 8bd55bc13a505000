"""The one class generator: a generated class exposes exactly its hooks, as LangChain reads them."""

from __future__ import annotations

import inspect
from typing import Any

from langchain.agents.middleware import AgentMiddleware, hook_config

from deerflow_ext.extensions.composition.hook_classes import hook_class, hook_method, jump_targets
from deerflow_ext.extensions.composition.hooks import implemented_hooks


class Jumping(AgentMiddleware[Any, Any, Any]):
    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> Any:
        return None

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)


def _said(self: Any, hook: str, first: Any, second: Any) -> Any:
    return (hook, first, second)


async def _asaid(self: Any, hook: str, first: Any, second: Any) -> Any:
    return (hook, first, second)


def test_a_generated_class_has_exactly_its_hooks_with_langchains_parameters() -> None:
    hooks = implemented_hooks(Jumping)
    methods = {hook: hook_method(hook, _said if hook == "before_model" else _asaid) for hook in hooks}
    cls = hook_class(AgentMiddleware, "Made", methods, jumps=jump_targets(Jumping, hooks), attributes={"mark": 1})
    assert implemented_hooks(cls) == hooks == {"before_model", "awrap_tool_call"}
    assert cls.__name__ == cls.__qualname__ == "Made" and cls.__module__ == AgentMiddleware.__module__ and cls.mark == 1
    assert list(inspect.signature(cls.before_model).parameters) == ["self", "state", "runtime"]
    assert list(inspect.signature(cls.awrap_tool_call).parameters) == ["self", "request", "handler"]
    assert inspect.iscoroutinefunction(cls.awrap_tool_call) and not inspect.iscoroutinefunction(cls.before_model)
    assert cls.before_model.__can_jump_to__ == ["end"]
    assert not hasattr(cls.awrap_tool_call, "__can_jump_to__")


async def test_a_generated_method_forwards_its_hook_and_awaits_an_async_one() -> None:
    cls = hook_class(
        AgentMiddleware,
        "Forwarding",
        {"before_model": hook_method("before_model", _said), "aafter_model": hook_method("aafter_model", _asaid)},
    )
    made = cls()
    assert made.before_model("s", "r") == ("before_model", "s", "r")
    assert await made.aafter_model("s", "r") == ("aafter_model", "s", "r")
