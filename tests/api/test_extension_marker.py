from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from deerflow_extension_api import API_VERSION, ExtensionInstall, ExtensionRegistry, extension


def test_api_version() -> None:
    assert API_VERSION == "0.2.6"


def test_marker_stamps_and_returns_same_function() -> None:
    def install(registry: ExtensionRegistry, config: Mapping[str, Any]) -> None:
        return None

    marked = extension(api="0.2.0", name="observers")(install)
    assert marked is install
    assert marked.__deerflow_api__ == "0.2.0"  # type: ignore[attr-defined]
    assert marked.__deerflow_name__ == "observers"  # type: ignore[attr-defined]
    typed: ExtensionInstall = marked
    assert callable(typed)


def test_marker_name_defaults_to_none() -> None:
    @extension(api="0.2.1")
    def install(registry: ExtensionRegistry, config: Mapping[str, Any]) -> None:
        return None

    assert install.__deerflow_name__ is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("api", ["0.2", "0.2.1", "0.2.1.0", "1", "v0.2.1", "0.2.1rc1", ""])
def test_marker_stamps_any_version_string_as_given(api: str) -> None:
    # DeerFlow's marker takes any string; judging it is the host's version gate.
    @extension(api=api, name="example")
    def install(registry: ExtensionRegistry, config: Mapping[str, Any]) -> None:
        return None

    assert install.__deerflow_api__ == api  # type: ignore[attr-defined]
    assert install.__deerflow_name__ == "example"  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad", [0.2, 21, None, b"0.2"])
def test_marker_refuses_a_non_string_at_import(bad: object) -> None:
    with pytest.raises(TypeError, match="version string"):
        extension(api=bad)  # type: ignore[arg-type]


def test_marker_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        extension("0.2.1")  # type: ignore[call-arg]
