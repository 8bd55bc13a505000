"""Fault injection at each install step: import (2.3), marker (2.4), install half-way (2.5).

A failing non-required entry is skipped with a diagnostic naming it, whatever it registered
is rolled back positionally, the entries after it still load, and the Gateway serves. A
``CancelledError`` raised by the extension's code while loading is such a failure: nothing is
cancelling the host during synchronous loading, so it can only be the extension's own.
KeyboardInterrupt propagates out of loading (spec, Cancellation): ``create_app`` raises it
and there is no Gateway to serve — the documented behaviour, as for Ctrl-C during startup.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import faulty_ext
import pytest

from conftest import live_server, make_settings, new_thread, stream_run

GOOD = {"name": "good", "use": "faulty_ext:install", "config": {"kind": "", "mode": "none"}}

STEPS = {
    "import-raise": ({"use": "faulty_import_raise:install"}, "faulty_import_raise:install", "cannot import"),
    "import-cancel": ({"use": "faulty_import_cancel:install"}, "faulty_import_cancel:install", "cannot import"),
    "marker": ({"use": "faulty_ext:wrong_api"}, "faulty_ext:wrong_api", "Install a matching version"),
    "install-halfway-raise": (
        {"use": "faulty_ext:install", "config": {"kind": "install_halfway", "mode": "raise"}},
        "faulty_ext:install",
        "install() failed: InjectedFault",
    ),
    "install-halfway-cancel": (
        {"use": "faulty_ext:install", "config": {"kind": "install_halfway", "mode": "cancel"}},
        "faulty_ext:install",
        "install() failed: CancelledError",
    ),
}
def _app(tmp_path: Path, entry: dict[str, Any]) -> Any:
    from deerflow_ext.gateway import create_app

    return create_app(make_settings(tmp_path, [{"name": "bad", **entry}, GOOD]))


@pytest.mark.parametrize("step", list(STEPS))
async def test_failing_install_step_is_skipped_and_named(tmp_path: Path, step: str) -> None:
    entry, culprit, text = STEPS[step]
    faulty_ext.CALLS.clear()
    app = _app(tmp_path, entry)
    ext = app.state.extensions
    assert ext.total == 2 and ext.loaded == ("faulty_ext:install",), ext.summary
    # Rolled back: only the good entry's contributions (one of each it registers) remain.
    assert [c.label for c in ext.task_lifecycle] == ["good"]
    assert [c.label for c in ext.services] == ["good"]
    messages = [d.message for d in app.state.extension_diagnostics if d.extension == culprit]
    assert any(text in m for m in messages), list(app.state.extension_diagnostics)
    async with live_server(app) as live, live.client() as client:
        events = await asyncio.wait_for(stream_run(client, await new_thread(client), "hello"), 20)
        assert events[-1] == ("end", events[-1][1]) and events[-1][1]["status"] == "success"
    assert ("service_start", "halfway") not in faulty_ext.CALLS


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param({"use": "faulty_import_interrupt:install"}, id="import"),
        pytest.param(
            {"use": "faulty_ext:install", "config": {"kind": "install_halfway", "mode": "interrupt"}},
            id="install-halfway",
        ),
    ],
)
def test_keyboard_interrupt_while_loading_propagates(tmp_path: Path, entry: dict[str, Any]) -> None:
    from deerflow_ext.extensions.snapshot import get_loaded_extensions

    before = get_loaded_extensions()
    with pytest.raises(KeyboardInterrupt):
        _app(tmp_path, entry)
    assert get_loaded_extensions() is before  # nothing half-loaded was published


def test_required_extension_failure_stops_startup(tmp_path: Path) -> None:
    from deerflow_ext.extensions.loader import ExtensionLoadError
    from deerflow_ext.gateway import create_app

    settings = make_settings(tmp_path, [{"name": "bad", "use": "faulty_import_raise:install", "required": True}])
    with pytest.raises(ExtensionLoadError, match="required extension faulty_import_raise:install failed"):
        create_app(settings)
