"""The kit's pure helpers: how install functions are referenced and how SSE is parsed."""

from __future__ import annotations

import asyncio
import importlib

import pytest

from deerflow_ext.testing import SseEvent, install_reference, parse_sse, wait_for, wait_until
from testing import kit_extension


def test_a_module_level_install_is_referenced_by_its_import_path() -> None:
    assert install_reference(kit_extension.install) == "testing.kit_extension:install"


def test_a_string_is_used_as_given() -> None:
    assert install_reference("observers") == "observers"
    assert install_reference("pkg.mod:install") == "pkg.mod:install"


def test_an_inline_install_is_published_where_the_loader_can_import_it() -> None:
    def install(registry: object, config: object) -> None: ...

    reference = install_reference(install)
    module_name, _, attr = reference.partition(":")
    assert getattr(importlib.import_module(module_name), attr) is install
    assert install_reference(install) != reference  # every call publishes a fresh name


def test_a_non_callable_is_refused() -> None:
    with pytest.raises(TypeError):
        install_reference(42)  # type: ignore[arg-type]


def test_parse_sse_decodes_json_and_keeps_order() -> None:
    body = (
        'event: metadata\r\ndata: {"run_id": "r1", "thread_id": "t1"}\r\n\r\n'
        ": a comment line\n\n"
        "event: messages\ndata: [1,\ndata: 2]\n\n"
        "event: end\ndata: not json\n\n"
    )
    assert parse_sse(body) == (
        SseEvent("metadata", {"run_id": "r1", "thread_id": "t1"}),
        SseEvent("messages", [1, 2]),
        SseEvent("end", "not json"),
    )


def test_wait_for_returns_the_first_truthy_value_and_fails_on_timeout() -> None:
    calls = iter([0, None, "done"])
    assert wait_for(lambda: next(calls), timeout=1.0, interval=0.0) == "done"
    with pytest.raises(AssertionError, match="not met"):
        wait_for(lambda: False, timeout=0.05)


async def test_wait_until_lets_the_loop_run_the_awaited_work_and_fails_on_timeout() -> None:
    reached: list[str] = []

    async def work() -> None:
        await asyncio.sleep(0)
        reached.append("there")

    task = asyncio.create_task(work())
    assert await wait_until(lambda: reached, timeout=1.0) == ["there"]
    await task
    with pytest.raises(AssertionError, match=r"not met within 0\.05s"):
        await wait_until(lambda: None, timeout=0.05)
