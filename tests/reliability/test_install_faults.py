"""Fault injection at each install step: import (2.3), marker (2.4), install half-way (2.5).

A failing non-required entry is skipped with a diagnostic naming it, whatever it registered
is rolled back positionally, the entries after it still load, and the Gateway serves. A
``CancelledError`` raised by the extension's code while loading is such a failure: nothing is
cancelling the host during synchronous loading, so it can only be the extension's own. So are
a ``KeyboardInterrupt`` and a ``SystemExit`` the extension raises itself
(``sys.exit(7)`` in ``install()`` used to end ``serve`` with exit code 7 and no output); only
an operator's real Ctrl-C propagates (``tests/extensions/test_loader.py``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import faulty_ext
import pytest

from conftest import (
    GatewayProcess,
    live_server,
    make_settings,
    new_thread,
    run_cli,
    start_gateway_process,
    stream_run,
    write_config,
)
from deerflow_ext.exitcodes import EXIT_STARTUP

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
    "import-interrupt": (
        {"use": "faulty_import_interrupt:install"},
        "faulty_import_interrupt:install",
        "cannot import faulty_import_interrupt:install: KeyboardInterrupt: faulty_import_interrupt",
    ),
    "import-exit": (
        {"use": "faulty_import_exit:install"},
        "faulty_import_exit:install",
        "cannot import faulty_import_exit:install: SystemExit: 7",
    ),
    "install-halfway-interrupt": (
        {"use": "faulty_ext:install", "config": {"kind": "install_halfway", "mode": "interrupt"}},
        "faulty_ext:install",
        "install() failed: KeyboardInterrupt: injected interrupt in install",
    ),
    "install-halfway-exit": (
        {"use": "faulty_ext:install", "config": {"kind": "install_halfway", "mode": "exit"}},
        "faulty_ext:install",
        "install() failed: SystemExit: 7",
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


def test_required_extension_failure_stops_startup(tmp_path: Path) -> None:
    from deerflow_ext.extensions.plugin_loading.loader import ExtensionLoadError
    from deerflow_ext.gateway import create_app

    settings = make_settings(tmp_path, [{"name": "bad", "use": "faulty_import_raise:install", "required": True}])
    with pytest.raises(ExtensionLoadError, match="required extension faulty_import_raise:install failed"):
        create_app(settings)


# -- the operator's commands: doctor and serve ---------------------------

EXITS = {"name": "bad", "use": "faulty_ext:install", "config": {"kind": "install_halfway", "mode": "exit"}}


@pytest.mark.parametrize("required", [False, True])
def test_doctor_reports_sys_exit_in_install_as_that_entrys_failure(tmp_path: Path, required: bool) -> None:
    write_config(tmp_path / "config.yaml", [{**EXITS, "required": required}, GOOD])
    done = run_cli(tmp_path, "extensions", "doctor")
    assert done.returncode == (1 if required else 0), done
    assert "Extension faulty_ext:install: install() failed: SystemExit: 7" in done.stdout, done
    assert "Traceback" not in done.stdout + done.stderr
    verdict = "The Gateway would not start." if required else "The Gateway would start."
    assert done.stdout.rstrip().endswith(verdict), done.stdout


def test_serve_starts_without_an_optional_entry_whose_install_calls_sys_exit(
    tmp_path: Path, gateway_processes: list[GatewayProcess]
) -> None:
    write_config(tmp_path / "config.yaml", [EXITS, GOOD])
    gw = start_gateway_process(tmp_path)  # raises when the process exits instead of serving
    gateway_processes.append(gw)
    assert "Extension faulty_ext:install: install() failed: SystemExit: 7" in gw.output()
    assert "Extensions loaded: 1/2 (faulty_ext:install)" in gw.output()


def test_serve_refuses_a_required_entry_whose_install_calls_sys_exit(tmp_path: Path) -> None:
    write_config(tmp_path / "config.yaml", [{**EXITS, "required": True}, GOOD])
    done = run_cli(tmp_path, "serve", "--port", "0")
    assert done.returncode == EXIT_STARTUP, done
    assert "error: required extension faulty_ext:install failed to install" in done.stderr, done
    assert "Traceback" not in done.stderr
