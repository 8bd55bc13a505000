from __future__ import annotations

import pytest

from deerflow_extension_api import (
    SystemModelRequest,
    SystemModelResult,
    SystemOperationKind,
)


def test_bare_string_is_one_message() -> None:
    request = SystemModelRequest("abc")
    assert request.messages == ("abc",)
    assert len(request.messages) == 1


def test_list_is_copied_into_a_tuple() -> None:
    live = [{"role": "user", "content": "hi"}]
    request = SystemModelRequest(live, model_name="m")
    live.append({"role": "user", "content": "later"})
    assert request.messages == ({"role": "user", "content": "hi"},)
    assert isinstance(request.messages, tuple)


def test_anything_but_a_sequence_is_one_message() -> None:
    # DeerFlow's rule: a single message dict must not become its keys, nor None vanish.
    message = {"role": "user", "content": "hi"}
    assert SystemModelRequest(message).messages == (message,)  # type: ignore[arg-type]
    assert SystemModelRequest(messages=None).messages == (None,)  # type: ignore[arg-type]
    generator = (m for m in ("a", "b"))
    assert SystemModelRequest(generator).messages == (generator,)  # type: ignore[arg-type]
    assert SystemModelRequest(b"raw").messages == (b"raw",)
    assert SystemModelRequest().messages == ()


def test_tuple_kept() -> None:
    messages = ("a", "b")
    assert SystemModelRequest(messages).messages is messages


def test_defaults() -> None:
    request = SystemModelRequest()
    assert (request.model_name, request.invoke_config) == (None, None)
    result = SystemModelResult()
    assert (result.response, result.error, result.duration_ms) == (None, None, None)


def test_operation_kinds_are_strings() -> None:
    assert [k.value for k in SystemOperationKind] == ["goal", "memory", "title", "summarization"]
    assert SystemOperationKind.TITLE == "title"


def test_request_is_frozen() -> None:
    with pytest.raises(AttributeError):
        SystemModelRequest().messages = ()  # type: ignore[misc]
