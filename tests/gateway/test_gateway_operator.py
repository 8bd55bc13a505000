"""The operator's views over a real uvicorn: ``/api/extensions``, ``/health`` degraded, ``/metrics``.

Extensions are loaded by the real loader from a config file; the runs are real lead runs on
the embedded model, so the metrics count hooks that really ran.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import live_server, read_sse
from deerflow_ext.config.loading import load_app_config
from deerflow_ext.extensions.operator_view import hook_metrics
from deerflow_ext.gateway import create_app

ME = "gateway.operator_fixtures"


CONFIG = f"""\
plugins:
  - name: metered
    use: {ME}:install_metered
    table_prefix: metered_
  - name: off
    use: {ME}:install_metered
    enabled: false
  - name: broken
    use: {ME}:install_raises
  - name: absent
    use: no_such_package_xyz:install
"""


def _app(settings_for: Any, tmp_path: Path, text: str) -> Any:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return create_app(settings_for(config=path), config=load_app_config(path))


async def _stream_run(client: Any, text: str = "hello") -> tuple[str, list[Any]]:
    """A new thread and one streamed run on it: ``(thread_id, events)``."""
    thread = (await client.post("/api/threads", json={})).json()["thread_id"]
    body = {"input": {"messages": [{"role": "user", "content": text}]}}
    async with client.stream("POST", f"/api/threads/{thread}/runs/stream", json=body) as response:
        return thread, await read_sse(response)


def _counter(text: str, name: str, **labels: str) -> float:
    """One sample of ``name`` in a Prometheus exposition (0 when absent)."""
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_extensions_lists_every_entry_with_status_package_contributions_and_diagnostics(
    settings_for: Any, tmp_path: Path
) -> None:
    app = _app(settings_for, tmp_path, CONFIG)
    async with live_server(app) as server, server.client() as client:
        body = (await client.get("/api/extensions")).json()
    assert body["summary"] == f"Extensions loaded: 1/4 ({ME}:install_metered); 1 loaded, 1 disabled, 2 failed"
    by_name = {e["name"]: e for e in body["extensions"]}
    assert [e["name"] for e in body["extensions"]] == ["metered", "off", "broken", "absent"]
    assert {n: e["status"] for n, e in by_name.items()} == {
        "metered": "loaded",
        "off": "disabled",
        "broken": "failed",
        "absent": "not installed",
    }
    assert by_name["metered"]["contributions"] == {"middlewares": 1, "task_lifecycle": 1}
    assert by_name["metered"]["table_prefix"] == "metered_"
    assert by_name["metered"]["extension"] == f"{ME}:install_metered"
    (diagnostic,) = by_name["broken"]["diagnostics"]
    assert diagnostic["phase"] == "load" and "install() failed: ValueError: bad threshold" in diagnostic["message"]
    assert by_name["absent"]["installed"] is False and by_name["absent"]["diagnostics"]
    assert by_name["off"]["installed"] is True and by_name["off"]["contributions"] == {}


async def test_health_is_degraded_but_200_when_an_extension_or_a_service_failed(
    settings_for: Any, tmp_path: Path
) -> None:
    text = CONFIG + f"  - name: svc\n    use: {ME}:install_broken_service\n"
    app = _app(settings_for, tmp_path, text)
    async with live_server(app) as server, server.client() as client:
        response = await client.get("/health")
    assert response.status_code == 200
    assert response.json() == {
        "status": "degraded",
        "reasons": [
            f"extension broken ({ME}:install_raises) failed",
            "extension absent (no_such_package_xyz:install) not installed",
            f"service of extension svc ({ME}:install_broken_service) failed to start",
        ],
    }


async def test_health_is_ok_when_everything_enabled_loaded(settings_for: Any, tmp_path: Path) -> None:
    app = _app(settings_for, tmp_path, f"plugins:\n  - name: metered\n    use: {ME}:install_metered\n")
    async with live_server(app) as server, server.client() as client:
        assert (await client.get("/health")).json() == {"status": "ok"}


async def test_metrics_count_runs_and_each_extensions_hooks(settings_for: Any, tmp_path: Path) -> None:
    app = _app(settings_for, tmp_path, f"plugins:\n  - name: metered\n    use: {ME}:install_metered\n")
    ext = f"{ME}:install_metered"
    async with live_server(app) as server, server.client() as client:
        before = (await client.get("/metrics")).text
        for _ in range(2):
            _, events = await _stream_run(client)
            assert events[-1][0] == "end"
        response = await client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    after = response.text

    def delta(name: str, **labels: str) -> float:
        return _counter(after, name, **labels) - _counter(before, name, **labels)

    assert delta("deerflow_runs_total", outcome="completed") == 2
    assert delta("deerflow_run_duration_seconds_count", outcome="completed") == 2
    for hook in ("on_task_start", "on_task_stop"):
        assert delta("deerflow_extension_hook_calls_total", extension=ext, hook=hook) == 2
        assert delta("deerflow_extension_hook_failures_total", extension=ext, hook=hook) == 0
    assert delta("deerflow_extension_hook_calls_total", extension=ext, hook="wrap_model_call") == 2
    assert delta("deerflow_extension_hook_seconds_total", extension=ext, hook="wrap_model_call") > 0
    assert delta("deerflow_extension_hook_calls_total", extension=ext, hook="contribute_middlewares") == 2


async def test_metrics_switched_off_is_404(settings_for: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hook_metrics, "_enabled", False)
    app = _app(settings_for, tmp_path, "plugins: []\n")
    async with live_server(app) as server, server.client() as client:
        assert (await client.get("/metrics")).status_code == 404


async def test_a_failing_provider_fails_the_run_with_its_reason_and_one_log_line_per_call(
    settings_for: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from fake_openai import FakeOpenAI

    with FakeOpenAI() as fake:
        fake.fail_next(3, status=502, message="bad gateway upstream")
        text = (
            "retry:\n  backoff_seconds: 0\n"
            "models:\n  - name: gpt\n    use: langchain_openai:ChatOpenAI\n    model: gpt-x\n"
            f"    api_key: k\n    base_url: {fake.base_url}\n"
        )
        app = _app(settings_for, tmp_path, text)
        caplog.set_level(logging.INFO)
        async with live_server(app) as server, server.client() as client:
            thread, events = await _stream_run(client)
            run_id = events[0][1]["run_id"]
            run = (await client.get(f"/api/threads/{thread}/runs/{run_id}")).json()
            assert (await client.get("/health")).json() == {"status": "ok"}  # the Gateway stays up
        assert len(fake.completions()) == 3
    (error,) = [data for name, data, _ in events if name == "error"]
    assert "bad gateway upstream" in error["message"]
    assert run["status"] == "error" and "bad gateway upstream" in run["error"]
    failures = [r for r in caplog.records if "model call failed" in r.getMessage()]
    runs = [r for r in caplog.records if r.getMessage().startswith(f"run {run_id} failed: ")]
    assert len(failures) == 3 and len(runs) == 1
    assert all(r.exc_info is None for r in [*failures, *runs]), "tracebacks are for DEBUG"


async def test_a_title_call_that_fails_after_the_answer_leaves_the_run_successful(
    settings_for: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The provider goes away right after the answer (only the title request is dropped)."""
    from deerflow_ext.agents.prompts import TITLE_MARKER
    from fake_openai import DROP, FakeOpenAI

    def drop_title(messages: list[dict[str, Any]]) -> int | None:
        return DROP if any(TITLE_MARKER in str(m.get("content")) for m in messages) else None

    with FakeOpenAI(fail_when=drop_title) as fake:
        text = (
            "memory:\n  enabled: false\n"
            "models:\n  - name: gpt\n    use: langchain_openai:ChatOpenAI\n    model: gpt-x\n"
            f"    api_key: k\n    base_url: {fake.base_url}\n"
        )
        app = _app(settings_for, tmp_path, text)
        caplog.set_level(logging.INFO)
        async with live_server(app) as server, server.client() as client:
            thread, events = await _stream_run(client)
            run_id = events[0][1]["run_id"]
            run = (await client.get(f"/api/threads/{thread}/runs/{run_id}")).json()
            stored = (await client.get(f"/api/threads/{thread}")).json()
    assert [name for name, _, _ in events if name == "error"] == []
    assert events[-1][0] == "end"
    assert run["status"] == "success"
    assert stored["values"]["messages"][-1]["content"] == "Echo: hello"
    assert "title" not in stored["values"] or not stored["values"]["title"]
    (line,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert line.startswith("the host's title call on model gpt-x failed (")
