from __future__ import annotations

from deerflow_extension_api import collect_release_policies


class ToolTimer:
    def __init__(self, slow_ms: float) -> None:
        self.slow_ms = slow_ms

    def release_policy_parameters(self) -> dict[str, object]:
        return {"slow_ms": self.slow_ms}


class Broken:
    def release_policy_parameters(self) -> dict[str, object]:
        raise KeyError("boom")


class Silent:
    pass


class NotCallable:
    release_policy_parameters = {"x": 1}


class WrongShape:
    def release_policy_parameters(self) -> object:
        return ["not", "a", "dict"]


def test_keyed_by_class_name_with_repeats_numbered() -> None:
    policies = collect_release_policies([ToolTimer(100), Silent(), ToolTimer(200), ToolTimer(300)])
    assert policies == {
        "ToolTimer": {"slow_ms": 100},
        "ToolTimer#2": {"slow_ms": 200},
        "ToolTimer#3": {"slow_ms": 300},
    }
    assert list(policies) == ["ToolTimer", "ToolTimer#2", "ToolTimer#3"]


def test_raising_declaration_is_recorded() -> None:
    assert collect_release_policies([Broken(), ToolTimer(1)]) == {
        "Broken": {"error": "KeyError"},
        "ToolTimer": {"slow_ms": 1},
    }


def test_undeclared_and_non_callable_are_skipped() -> None:
    assert collect_release_policies([Silent(), NotCallable()]) == {}
    assert collect_release_policies([]) == {}


def test_non_mapping_declaration_is_an_error() -> None:
    assert collect_release_policies([WrongShape()]) == {"WrongShape": {"error": "TypeError"}}


def test_result_is_a_copy() -> None:
    shared = {"a": 1}

    class Declares:
        def release_policy_parameters(self) -> dict[str, object]:
            return shared

    policies = collect_release_policies([Declares()])
    shared["a"] = 2
    assert policies == {"Declares": {"a": 1}}
