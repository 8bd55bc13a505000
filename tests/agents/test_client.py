"""DeerFlowClient: sync, async and streaming runs, lifecycle around them, and the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import Recorder, make_config, recording_extensions

from deerflow_ext.client import DeerFlowClient
from deerflow_ext.extensions.contract.snapshot import Contribution, LoadedExtensions, set_loaded_extensions
from deerflow_ext.run_console import run_command
from deerflow_extension_api import TaskInfo


def test_sync_run_uses_the_process_wide_set_and_notifies_the_lead_task(
    recorder: Recorder, restore_process_extensions: None
) -> None:
    set_loaded_extensions(recording_extensions(recorder, kinds=("lifecycle", "assembly")))
    client = DeerFlowClient(make_config(memory={"enabled": False}))
    result = client.run("hello there", thread_id="t-1")
    assert result.answer == "Here is my answer to: hello there" and result.title == "Hello there"
    assert [e[:2] for e in recorder.events] == [("start", "lead"), ("assembled", "lead"), ("stop", "lead")]
    assert recorder.events[-1][3] == "completed"
    (info,) = recorder.infos
    assert info.kind == "lead" and info.thread_id == "t-1" and info.task_id == info.run_id
    assert info.agent_name == recorder.descriptors[0].agent_name == "lead"


async def test_async_run_keeps_the_thread(recorder: Recorder) -> None:
    client = DeerFlowClient(make_config(memory={"enabled": False}), extensions=recording_extensions(recorder))
    first = await client.arun("first message", thread_id="t")
    second = await client.arun("second message", thread_id="t")
    assert second.title == first.title == "First message"
    state = await client.host.make_lead_agent(extensions=client.extensions).aget_state(
        {"configurable": {"thread_id": "t"}}
    )
    assert len(state.values["messages"]) == 4


async def test_astream_yields_metadata_first_and_the_result_last() -> None:
    client = DeerFlowClient(make_config(memory={"enabled": False}))
    events = [event async for event in client.astream('use calculator {"expression": "2 + 2"}')]
    assert events[0][0] == "metadata" and set(events[0][1]) == {"run_id", "thread_id"}
    assert events[-1][0] == "result" and events[-1][1].answer == "Done. calculator returned: 4"
    assert {"updates", "messages", "values"} <= {e[0] for e in events}


async def test_failed_run_stops_with_failed_outcome(recorder: Recorder) -> None:
    def broken(name: str | None) -> Any:
        raise RuntimeError("model unavailable")

    client = DeerFlowClient(
        make_config(memory={"enabled": False}),
        extensions=recording_extensions(recorder),
        model_factory=broken,
    )
    with pytest.raises(RuntimeError, match="model unavailable"):
        await client.arun("hi")
    assert [(e[0], e[-1]) for e in recorder.events if e[0] in ("start", "stop")] == [
        ("start", recorder.infos[0].task_id),
        ("stop", "failed"),
    ]


def _write_config(tmp_path: Path, text: str) -> Path:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    return config


@pytest.fixture(autouse=True)
def _database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `run` stores threads in the Gateway's database; keep it out of the working directory.
    monkeypatch.setenv("DEERFLOW_DATABASE_URL", f"sqlite:///{tmp_path / 'deerflow.db'}")


def test_run_command_prints_a_line_per_step_and_the_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], restore_process_extensions: None
) -> None:
    config = _write_config(tmp_path, "memory:\n  enabled: false\n")
    assert run_command(["delegate: add numbers", "--config", str(config)]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "Done. task returned: Here is my answer to: add numbers"
    lines = err.splitlines()
    assert lines[0].endswith("INFO deerflow_ext.extensions: Extensions loaded: 0/0 (none)")
    assert re.fullmatch(r"… run [0-9a-f-]{36} on thread [0-9a-f-]{36}", lines[1])
    assert lines[2:] == ["… model call", "… subagent: add numbers", "… subagent done", "… model call"]


def test_run_command_reports_only_real_steps_when_summarization_rewrites_the_thread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], restore_process_extensions: None
) -> None:
    # Summarization re-emits the messages it keeps (AI tool calls, tool results included):
    # those are not steps and must not be printed again.
    config = _write_config(
        tmp_path, "memory:\n  enabled: false\nsummarization:\n  trigger_messages: 4\n  keep_messages: 2\n"
    )
    assert run_command(['use calculator {"expression": "1 + 1"}', "--config", str(config)]) == 0
    first_out, first_err = capsys.readouterr()
    thread = _thread_of(first_err)
    assert run_command(['use calculator {"expression": "2 * 3"}', "--config", str(config), "--thread", thread]) == 0
    out, err = capsys.readouterr()
    out, err = first_out + out, first_err + err
    assert out.splitlines() == ["Done. calculator returned: 2", "Done. calculator returned: 6"]
    steps = [line for line in err.splitlines() if line.startswith("… ") and not line.startswith("… run ")]
    one_run = ["… model call", '… tool call: calculator {"expression": "%s"}', "… tool calculator done", "… model call"]
    assert steps == [s.replace("%s", "1 + 1") for s in one_run] + [s.replace("%s", "2 * 3") for s in one_run]


def _thread_of(err: str) -> str:
    """The thread id ``run`` names on stderr (``… run RUN on thread THREAD``)."""
    (thread,) = re.findall(r"^… run \S+ on thread (\S+)$", err, re.MULTILINE)
    return thread


def test_run_command_continues_a_stored_thread_and_refuses_an_unknown_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], restore_process_extensions: None
) -> None:
    config = _write_config(tmp_path, "memory:\n  enabled: false\n")
    assert run_command(["delegate: add numbers", "--config", str(config), "--thread", "does-not-exist"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "error: --thread does-not-exist: no stored thread has this id in sqlite" in err
    assert not [line for line in err.splitlines() if line.startswith("… ")], "nothing ran"
    assert run_command(["first", "--config", str(config)]) == 0
    thread = _thread_of(capsys.readouterr().err)
    assert run_command(["second", "--config", str(config), "--thread", thread]) == 0
    assert _thread_of(capsys.readouterr().err) == thread


def test_run_command_exits_1_on_an_invalid_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _write_config(tmp_path, "memory: [not, a, mapping]\n")
    assert run_command(["hi", "--config", str(config)]) == 1
    out, err = capsys.readouterr()
    (line,) = err.splitlines()
    assert line.startswith(f"error: {config}") and "memory" in line
    assert out == ""


async def test_lead_hooks_bracket_construction_and_the_persisted_run(recorder: Recorder) -> None:
    """Start before the graph exists; stop once the thread's final state (answer, title) is saved."""
    seen: dict[str, Any] = {}

    class Probe:
        async def on_task_start(self, app_store: Any, task_store: Any, info: TaskInfo) -> None:
            seen["built_at_start"] = len(recorder.descriptors)

        async def on_task_stop(self, app_store: Any, task_store: Any, info: TaskInfo, outcome: Any) -> None:
            saved = await client.host.checkpointer.aget_tuple({"configurable": {"thread_id": info.thread_id}})
            values = saved.checkpoint["channel_values"]
            seen["at_stop"] = (values.get("title"), values["messages"][-1].text)

    ext = LoadedExtensions(
        task_lifecycle=(Contribution("probe:install", "probe", 0, "0:probe#0", Probe()),),
        assembly_observers=recording_extensions(recorder, kinds=("assembly",)).assembly_observers,
    )
    client = DeerFlowClient(make_config(memory={"enabled": False}), extensions=ext)
    result = await client.arun("hello there", thread_id="t-stop")
    assert seen == {"built_at_start": 0, "at_stop": ("Hello there", result.answer)}
    (descriptor,) = recorder.descriptors
    assert descriptor.agent_name == "lead"  # the name TaskInfo carries, so observers can join them


def _openai_config(tmp_path: Path, fake: Any, **extra: Any) -> Path:
    lines = [
        "memory:\n  enabled: false\n",
        "retry:\n  backoff_seconds: 0\n",
        "models:\n  - name: gpt\n    use: langchain_openai:ChatOpenAI\n    model: gpt-test\n",
        f"    api_key: k\n    base_url: {fake.base_url}\n",
        *(f"    {k}: {v}\n" for k, v in extra.items()),
    ]
    return _write_config(tmp_path, "".join(lines))


def test_run_streams_the_answers_tokens_and_continues_a_stored_thread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], restore_process_extensions: None
) -> None:
    from fake_openai import FakeOpenAI

    with FakeOpenAI() as fake:
        config = _openai_config(tmp_path, fake, streaming="true")
        assert run_command(["first question", "--config", str(config)]) == 0
        first_out, first_err = capsys.readouterr()
        assert run_command(["second question", "--config", str(config), "--thread", _thread_of(first_err)]) == 0
        bodies = fake.completions()
    out, err = capsys.readouterr()
    out, err = first_out + out, first_err + err
    assert out.splitlines() == ["Echo: first question", "Echo: second question"]
    assert all(body["stream"] for body in bodies)
    # The second run's model call saw the first exchange: the thread was stored and continued.
    lead_calls = [b for b in bodies if "deerflow:title" not in json.dumps(b)]
    seen = [m.get("content") for m in lead_calls[-1]["messages"] if m["role"] in ("user", "assistant")]
    assert seen == ["first question", "Echo: first question", "second question"]
    assert "Traceback" not in err


def test_run_shows_progress_for_a_long_step(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    restore_process_extensions: None,
) -> None:
    from deerflow_ext import run_console
    from fake_openai import FakeOpenAI

    monkeypatch.setattr(run_console, "_SLOW_AFTER", 0.1)
    monkeypatch.setattr(run_console, "_NOTE_EVERY", 0.5)
    with FakeOpenAI(delay=2.5) as fake:
        config = _openai_config(tmp_path, fake)
        config.write_text(config.read_text() + "title:\n  enabled: false\n")
        assert run_command(["slow one", "--config", str(config)]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "Echo: slow one"
    assert any(line.startswith("… still running: model call (") for line in err.splitlines()), err


def test_run_returns_once_the_answer_is_printed_not_after_the_hosts_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], restore_process_extensions: None
) -> None:
    """A title model that hangs costs the bound (3 s), memory extraction is not asked for."""
    import time

    from deerflow_ext.agents.prompts import MEMORY_MARKER, TITLE_MARKER
    from fake_openai import FakeOpenAI

    def stall(messages: list[dict[str, Any]]) -> float:
        return 60.0 if any(TITLE_MARKER in str(m.get("content")) for m in messages) else 0.0

    with FakeOpenAI(stall_when=stall) as fake:
        config = _openai_config(tmp_path, fake)
        config.write_text(config.read_text().replace("memory:\n  enabled: false\n", "memory:\n  enabled: true\n"))
        started = time.monotonic()
        assert run_command(["hello", "--config", str(config)]) == 0
        took = time.monotonic() - started
        bodies = [json.dumps(body) for body in fake.completions()]
    out, err = capsys.readouterr()
    assert out.strip() == "Echo: hello"
    assert took < 30, f"run took {took:.1f} s with a title model that hangs for 60"
    assert [TITLE_MARKER in b for b in bodies] == [False, True] and not any(MEMORY_MARKER in b for b in bodies)
    (warning,) = [line for line in err.splitlines() if " WARNING " in line]
    assert warning.endswith(
        "the host's title call on model gpt-test failed (TimeoutError: no reply within 3 s); "
        "the run keeps its answer, the thread no title yet"
    )


def test_a_failing_provider_fails_the_run_with_one_line_and_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], restore_process_extensions: None
) -> None:
    from fake_openai import FakeOpenAI

    with FakeOpenAI() as fake:
        fake.fail_next(5, status=503, message="try later")
        config = _openai_config(tmp_path, fake)
        assert run_command(["hello", "--config", str(config)]) == 3
        assert len(fake.completions()) == 3
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[-1].startswith("error: run failed: ") and "try later" in err.splitlines()[-1]
    assert "Traceback" not in err
    assert len([line for line in err.splitlines() if "model call failed" in line]) == 3


def test_run_logs_observer_lines_and_hook_tracing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    restore_process_extensions: None,
) -> None:
    from deerflow_ext.extensions.notifications import notify

    monkeypatch.setattr(notify, "TRACE_EXTENSIONS", True)
    use = "agents.run_fixtures:install_logging_timer"
    config = _write_config(tmp_path, f"memory:\n  enabled: false\nplugins:\n  - name: timer\n    use: {use}\n")
    assert run_command(["hello", "--config", str(config)]) == 0
    err = capsys.readouterr().err
    assert re.search(r" INFO acme\.timer: task lead started$", err, re.MULTILINE), err
    assert f"INFO deerflow_ext.extensions: Extension {use}: calling on_task_start for task " in err
