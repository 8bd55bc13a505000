from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from deerflow_extension_api import EXTENSION_TASK_STORE_KEY, ExtensionData, task_store_from_runtime


@dataclass
class Runtime:
    context: Any = None


def test_key_value_is_deerflows() -> None:
    assert EXTENSION_TASK_STORE_KEY == "__deerflow_extension_task_store"


def test_runtime_bridge_is_the_module_and_runtime_the_same_objects() -> None:
    from deerflow_extension_api import runtime, runtime_bridge

    assert runtime_bridge.EXTENSION_TASK_STORE_KEY is EXTENSION_TASK_STORE_KEY
    assert runtime_bridge.task_store_from_runtime is task_store_from_runtime
    assert runtime.task_store_from_runtime is runtime_bridge.task_store_from_runtime
    assert runtime.EXTENSION_TASK_STORE_KEY is runtime_bridge.EXTENSION_TASK_STORE_KEY


def test_dict_context() -> None:
    store = ExtensionData("t")
    assert task_store_from_runtime(Runtime({EXTENSION_TASK_STORE_KEY: store, "other": 1})) is store


def test_attribute_context() -> None:
    store = ExtensionData("t")
    context = SimpleNamespace(**{EXTENSION_TASK_STORE_KEY: store})
    assert task_store_from_runtime(Runtime(context)) is store


@pytest.mark.parametrize(
    "runtime",
    [
        None,
        Runtime(None),
        object(),
        Runtime({}),
        Runtime(SimpleNamespace()),
        Runtime("not-a-mapping"),
        Runtime({EXTENSION_TASK_STORE_KEY: None}),
        Runtime({EXTENSION_TASK_STORE_KEY: {"not": "a store"}}),
        Runtime(SimpleNamespace(**{EXTENSION_TASK_STORE_KEY: "forged"})),
    ],
    ids=[
        "none",
        "none-context",
        "no-context-attr",
        "empty-dict",
        "empty-object",
        "str-context",
        "none-value",
        "dict-value",
        "str-value",
    ],
)
def test_absent_or_foreign_values_give_none(runtime: object) -> None:
    assert task_store_from_runtime(runtime) is None
