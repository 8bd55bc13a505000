"""LangSmith's async-to-thread step runs inline only when the call is not traced."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from typing import Any

import langsmith
import pytest
from langsmith._runtime_overrides import get_runtime_overrides

from deerflow_ext.agents import tracing


@pytest.fixture
def fresh_install(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Install from scratch, and put back whatever override the process had."""
    before = get_runtime_overrides().aio_to_thread
    monkeypatch.setattr(tracing, "_installed", False)
    langsmith.set_runtime_overrides()
    yield
    langsmith.set_runtime_overrides(aio_to_thread=before)


class Default:
    """Stands in for langsmith's default: records that the step was sent to it."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, ctx: contextvars.Context, func: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return ctx.run(func, *args, **kwargs)


def _context(*, enabled: bool | None) -> contextvars.Context:
    with langsmith.tracing_context(enabled=enabled):
        return contextvars.copy_context()


def _thread_and_args(*args: Any, **kwargs: Any) -> tuple[int, tuple[Any, ...], dict[str, Any]]:
    return threading.get_ident(), args, kwargs


@pytest.mark.usefixtures("fresh_install")
async def test_an_untraced_step_runs_inline_in_langsmiths_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LANGSMITH_TRACING", raising=False)
    monkeypatch.delenv("LANGCHAIN_TRACING_V2", raising=False)
    assert tracing.install_inline_untraced_bookkeeping()
    override = get_runtime_overrides().aio_to_thread
    assert override is not None
    default = Default()
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="caller")
    ctx = _context(enabled=False)
    ctx.run(marker.set, "langsmith's")

    ident, args, kwargs = await override(default, ctx, _thread_and_args, 1, key="v")
    seen = await override(default, ctx, marker.get)

    assert (ident, args, kwargs) == (threading.get_ident(), (1,), {"key": "v"})
    assert seen == "langsmith's"  # run inside the context langsmith reads back
    assert default.calls == 0


@pytest.mark.usefixtures("fresh_install")
async def test_a_traced_step_keeps_langsmiths_default() -> None:
    tracing.install_inline_untraced_bookkeeping()
    override = get_runtime_overrides().aio_to_thread
    assert override is not None
    default = Default()
    await override(default, _context(enabled=True), _thread_and_args)
    assert default.calls == 1


@pytest.mark.usefixtures("fresh_install")
async def test_an_override_installed_before_the_hosts_still_handles_traced_steps() -> None:
    theirs = Default()

    async def previous(default: Any, ctx: contextvars.Context, func: Any, /, *args: Any, **kwargs: Any) -> Any:
        return await theirs(ctx, func, *args, **kwargs)

    langsmith.set_runtime_overrides(aio_to_thread=previous)
    tracing.install_inline_untraced_bookkeeping()
    override = get_runtime_overrides().aio_to_thread
    assert override is not None and override is not previous
    langsmiths = Default()
    await override(langsmiths, _context(enabled=True), _thread_and_args)
    await override(langsmiths, _context(enabled=False), _thread_and_args)
    assert (theirs.calls, langsmiths.calls) == (1, 0)


@pytest.mark.usefixtures("fresh_install")
def test_installing_twice_installs_once() -> None:
    assert tracing.install_inline_untraced_bookkeeping()
    first = get_runtime_overrides().aio_to_thread
    assert tracing.install_inline_untraced_bookkeeping()
    assert get_runtime_overrides().aio_to_thread is first


@pytest.mark.usefixtures("fresh_install")
def test_every_agent_construction_makes_sure_it_is_installed() -> None:
    from deerflow_ext.agents.lead import make_lead_agent
    from deerflow_ext.config.schema import AppConfig
    from deerflow_ext.extensions.contract.snapshot import LoadedExtensions

    assert get_runtime_overrides().aio_to_thread is None
    make_lead_agent(AppConfig(), extensions=LoadedExtensions.empty())
    assert get_runtime_overrides().aio_to_thread is not None
