"""deerflow-tally, the example in DeerFlow's own shape, installed with pip and served for real.

The package depends on ``deerflow-extension-api>=0.2,<0.3`` and is installed *with* its
dependencies (offline: they are all here already), so this also proves the pin resolves to
the contract built from this tree. The ``config.yaml`` record is the one DeerFlow's extension
manager writes (``package:``, no ``name:``). Runs are driven to every outcome — completed
(lead and subagent), failed (the provider rejects the prompt), aborted (cancelled in flight) —
and to every kind of DeerFlow's own model calls, and ``/api/ext/tally/stats`` must count them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deerflow_ext.testing import parse_sse
from e2e.example_packages import installed_example
from e2e.served import Gateway, serve, wait

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "plugins_examples" / "tally"
USE = "deerflow_tally:install"


@pytest.fixture(scope="module")
def installed() -> Iterator[None]:
    with installed_example(PACKAGE, "deerflow-tally", "tally", USE) as requires:
        assert "deerflow-extension-api<0.3,>=0.2" in requires
        yield


@pytest.fixture(scope="module")
def gateway(installed: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    directory = tmp_path_factory.mktemp("e2e-tally")
    document = {
        "plugins": [{"package": "deerflow-tally", "use": USE, "enabled": True, "required": True, "config": {}}],
        # The operator's model entry; the provider fails or stalls on request (paced_model.py).
        "models": [{"name": "paced", "use": "paced_model:PacedChatModel"}],
        "summarization": {"trigger_messages": 4, "keep_messages": 2},
        "memory": {"debounce_seconds": 0},
    }
    config = directory / "config.yaml"
    config.write_text(json.dumps(document, indent=2), encoding="utf-8")  # JSON is YAML
    with serve(directory, config, env={"PYTHONPATH": str(Path(__file__).parent)}) as server:
        yield server


def _streamed(server: Gateway, thread_id: str, prompt: str, goal: str | None = None) -> dict[str, Any]:
    body = {"input": {"messages": [{"role": "user", "content": prompt}]}, "goal": goal}
    with server.client() as client:
        with client.stream("POST", f"/api/threads/{thread_id}/runs/stream", json=body) as response:
            assert response.status_code == 200, response.read()
            events = parse_sse("".join(response.iter_text()))
        assert events[0].event == "metadata" and events[-1].event == "end"
        run: dict[str, Any] = client.get(f"/api/threads/{thread_id}/runs/{events[0].data['run_id']}").json()
    return run


def _thread(server: Gateway) -> str:
    with server.client() as client:
        return str(client.post("/api/threads", json={}).json()["thread_id"])


def _stats(server: Gateway) -> dict[str, Any]:
    with server.client() as client:
        response = client.get("/api/ext/tally/stats")
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def driven(gateway: Gateway) -> dict[str, Any]:
    """Every outcome and every system call kind, then the stats once they all show."""
    runs: dict[str, Any] = {}
    first = _thread(gateway)
    runs["delegated"] = _streamed(gateway, first, "delegate: summarise the plan")
    runs["with goal"] = _streamed(gateway, first, "and what should happen next?", goal="after 1 turns")
    runs["rejected"] = _streamed(gateway, _thread(gateway), "fail: the provider will not take this")

    stalled = _thread(gateway)
    body = {"input": {"messages": [{"role": "user", "content": "slow: this takes minutes"}]}}
    with gateway.client() as client:
        run_id = client.post(f"/api/threads/{stalled}/runs", json=body).json()["run_id"]
        url = f"/api/threads/{stalled}/runs/{run_id}"
        assert wait(lambda: client.get(url).json()["status"] == "running", timeout=30), client.get(url).json()
        assert client.post(f"{url}/cancel").status_code == 202
        runs["cancelled"] = wait(lambda: (r := client.get(url).json())["status"] != "running" and r, timeout=60)

    def settled() -> dict[str, Any] | None:
        stats = _stats(gateway)
        kinds_seen = all(counts["calls"] for counts in stats["system_model_calls"].values())
        outcomes_seen = all(stats["tasks"].values())
        return stats if kinds_seen and outcomes_seen else None

    return {"runs": runs, "stats": wait(settled, timeout=60) or _stats(gateway)}


def test_the_record_in_deerflows_shape_loads(gateway: Gateway) -> None:
    assert f"Extensions loaded: 1/1 ({USE})" in gateway.log()


def test_the_runs_end_as_driven(driven: dict[str, Any]) -> None:
    outcomes = {name: (run["status"], run["outcome"]) for name, run in driven["runs"].items()}
    assert outcomes == {
        "delegated": ("success", "completed"),
        "with goal": ("success", "completed"),
        "rejected": ("error", "failed"),
        "cancelled": ("interrupted", "aborted"),
    }


def test_stats_count_every_task_outcome(driven: dict[str, Any]) -> None:
    stats = driven["stats"]
    assert stats["tasks"] == {"completed": 3, "failed": 1, "aborted": 1}  # two leads and a subagent completed
    assert stats["tasks_by_kind"]["subagent"] == {"completed": 1, "aborted": 0, "failed": 0}


def test_stats_count_tool_calls(driven: dict[str, Any]) -> None:
    assert driven["stats"]["tool_calls"] >= 1
    assert driven["stats"]["tool_calls_by_name"]["task"] == 1  # the delegation


def test_stats_count_every_kind_of_deerflows_own_model_calls(driven: dict[str, Any]) -> None:
    calls = driven["stats"]["system_model_calls"]
    assert sorted(calls) == ["goal", "memory", "summarization", "title"]
    assert all(counts["calls"] >= 1 for counts in calls.values()), calls
    assert driven["stats"]["scope_id"] == "app" and driven["stats"]["database"] is True


def test_no_diagnostic_names_the_extension(gateway: Gateway, driven: dict[str, Any]) -> None:
    assert not re.search(rf"Extension {re.escape(USE)}: ", gateway.log())


def test_the_packages_own_suite_passes(installed: None) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=PACKAGE,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"\d+ passed", done.stdout)
