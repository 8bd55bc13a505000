"""DeerMem: debounce, flush, callbacks on every terminal path, vendorability."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from deerflow_ext.memory import engine as engine_module
from deerflow_ext.memory.engine import MemoryEngine, parse_facts

ENGINE_PATH = Path(__file__).resolve().parents[2] / "src" / "deerflow_ext" / "memory" / "engine.py"


class Extractor:
    """A synchronous 'model call' that records what it saw and on which thread."""

    def __init__(self, reply: Any = None) -> None:
        self.reply = reply
        self.calls: list[list[Any]] = []
        self.threads: list[threading.Thread] = []
        self.called = threading.Event()

    def __call__(self, messages: list[Any]) -> str:
        self.calls.append(messages)
        self.threads.append(threading.current_thread())
        self.called.set()
        if isinstance(self.reply, BaseException):
            raise self.reply
        if self.reply is not None:
            return str(self.reply)
        return json.dumps([f"fact from {m['content']}" for m in messages])


class Recorder:
    def __init__(self, fail_with: BaseException | None = None) -> None:
        self.results: list[dict[str, Any]] = []
        self.fail_with = fail_with

    def on_memory_llm_result(self, **kwargs: Any) -> None:
        self.results.append(kwargs)
        if self.fail_with is not None:
            raise self.fail_with


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_a_burst_of_schedules_costs_one_extraction_of_the_latest_messages() -> None:
    extract = Extractor()
    engine = MemoryEngine(extract, debounce_seconds=0.05)
    for n in range(5):
        engine.schedule("t1", [user(f"turn {n}")])

    assert extract.called.wait(5)
    time.sleep(0.15)  # any stale timer would have fired by now
    assert extract.calls == [[user("turn 4")]]
    assert engine.facts("t1") == ["fact from turn 4"]
    assert extract.threads[0] is not threading.main_thread()


def test_threads_are_debounced_independently() -> None:
    extract = Extractor()
    engine = MemoryEngine(extract, debounce_seconds=30)
    engine.schedule("a", [user("x")])
    engine.schedule("b", [user("y")])
    engine.schedule("a", [user("z")])
    engine.flush()
    assert sorted(m[0]["content"] for m in extract.calls) == ["y", "z"]
    assert engine.facts("a") == ["fact from z"] and engine.facts("b") == ["fact from y"]


def test_flush_runs_pending_work_now_on_a_worker_thread() -> None:
    extract = Extractor()
    engine = MemoryEngine(extract, debounce_seconds=60)
    engine.schedule("t", [user("hello")])
    assert extract.calls == []

    engine.flush()

    assert engine.facts("t") == ["fact from hello"]
    assert extract.threads == [extract.threads[0]] and extract.threads[0] is not threading.current_thread()
    engine.flush()  # nothing pending: no second extraction
    assert len(extract.calls) == 1


def test_flush_waits_for_an_extraction_already_running() -> None:
    release = threading.Event()
    started = threading.Event()

    def slow(messages: list[Any]) -> str:
        started.set()
        release.wait(5)
        return '["slow fact"]'

    engine = MemoryEngine(slow, debounce_seconds=0)
    engine.schedule("t", [user("x")])
    assert started.wait(5)
    threading.Timer(0.1, release.set).start()
    engine.flush()
    assert engine.facts("t") == ["slow fact"]


def test_the_schedulers_list_is_copied() -> None:
    extract = Extractor()
    engine = MemoryEngine(extract, debounce_seconds=60)
    live = [user("before")]
    engine.schedule("t", live)
    live.append(user("after"))
    engine.flush()
    assert extract.calls == [[user("before")]]


def test_facts_accumulate_without_duplicates_and_stay_bounded() -> None:
    replies = iter(['["a", "b"]', '```json\n["b", "c"]\n```', "not json at all"])
    engine = MemoryEngine(lambda _m: next(replies), debounce_seconds=60, max_facts=2)
    for _ in range(3):
        engine.schedule("t", [user("x")])
        engine.flush()
    assert engine.facts("t") == ["b", "c"]
    assert engine.facts("unknown") == []


def test_parse_facts() -> None:
    assert parse_facts('Sure: ["x", " y ", "", 3]') == ["x", "y"]
    with pytest.raises(ValueError):
        parse_facts('{"x": 1}')


def test_callbacks_hear_success() -> None:
    recorder = Recorder()
    engine = MemoryEngine(Extractor('["f"]'), recorder, debounce_seconds=60, model_name="tiny")
    engine.schedule("t", [user("hi")])
    engine.flush()
    (result,) = recorder.results
    assert result["messages"] == (user("hi"),)
    assert result["response"] == '["f"]'
    assert result["error"] is None
    assert result["model_name"] == "tiny"
    assert result["duration_ms"] >= 0


class ProviderAbort(BaseException):
    """A provider SDK that raises outside the Exception hierarchy."""


@pytest.mark.parametrize("failure", [RuntimeError("provider down"), ProviderAbort("aborted")])
def test_callbacks_hear_every_failure_and_the_worker_survives(failure: BaseException) -> None:
    recorder = Recorder()
    engine = MemoryEngine(Extractor(failure), recorder, debounce_seconds=60)
    engine.schedule("t", [user("hi")])
    engine.flush()
    (result,) = recorder.results
    assert result["error"] is failure and result["response"] is None
    assert engine.facts("t") == []
    # The engine still works afterwards.
    engine._extract = Extractor('["later"]')  # type: ignore[method-assign]
    engine.schedule("t", [user("again")])
    engine.flush()
    assert engine.facts("t") == ["later"]


def test_a_failing_callback_is_not_fatal() -> None:
    engine = MemoryEngine(Extractor('["kept"]'), Recorder(fail_with=ValueError("hook bug")), debounce_seconds=60)
    engine.schedule("t", [user("hi")])
    engine.flush()
    assert engine.facts("t") == ["kept"]


def test_the_callback_wrapper_does_not_swallow_keyboard_interrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    escaped: list[type[BaseException]] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: escaped.append(args.exc_type))
    engine = MemoryEngine(Extractor('["f"]'), Recorder(fail_with=KeyboardInterrupt()), debounce_seconds=60)
    engine.schedule("t", [user("hi")])
    engine.flush()
    assert escaped == [KeyboardInterrupt]


def test_per_schedule_callbacks_replace_the_engine_wide_ones() -> None:
    default, specific = Recorder(), Recorder()
    engine = MemoryEngine(Extractor('["f"]'), default, debounce_seconds=60)
    engine.schedule("t", [user("1")], callbacks=specific)
    engine.flush()
    engine.schedule("t", [user("2")])
    engine.flush()
    assert len(specific.results) == 1 and len(default.results) == 1


def test_shutdown_flushes_then_refuses_new_work() -> None:
    extract = Extractor()
    engine = MemoryEngine(extract, debounce_seconds=60)
    engine.schedule("t", [user("last words")])
    engine.shutdown()
    assert engine.facts("t") == ["fact from last words"]
    engine.schedule("t", [user("too late")])
    engine.flush()
    assert len(extract.calls) == 1


def test_negative_debounce_is_rejected() -> None:
    with pytest.raises(ValueError):
        MemoryEngine(Extractor(), debounce_seconds=-1)
    with pytest.raises(ValueError, match="max_workers"):
        MemoryEngine(Extractor(), max_workers=0)


def test_many_threads_requests_run_on_a_few_kept_workers_not_a_thread_each() -> None:
    extract = Extractor()
    engine = MemoryEngine(extract, debounce_seconds=0.01, max_workers=2)
    for n in range(40):
        engine.schedule(f"t{n}", [user(f"turn {n}")])
    deadline = time.monotonic() + 10
    while len(extract.calls) < 40 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(engine.facts(f"t{n}")[0] for n in range(40)) == sorted(f"fact from turn {n}" for n in range(40))
    workers = set(extract.threads)
    assert 1 <= len(workers) <= 2 and all(t.name == "deermem-worker" for t in workers)
    engine.shutdown(5)
    for thread in workers:
        thread.join(5)
    assert not any(t.is_alive() for t in workers)


def test_idle_workers_and_the_timer_thread_end_by_themselves(monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine nobody shuts down (a test, a script) is not kept alive by its threads."""
    monkeypatch.setattr(engine_module, "IDLE_SECONDS", 0.05)
    before = set(threading.enumerate())
    extract = Extractor()
    engine = MemoryEngine(extract, debounce_seconds=0.01)
    engine.schedule("t", [user("x")])
    assert extract.called.wait(5)
    started = [t for t in set(threading.enumerate()) - before if t.name.startswith("deermem-")]
    for thread in started:
        thread.join(5)
    assert started and not any(t.is_alive() for t in started)
    engine.schedule("t", [user("again")])  # both start again when needed
    deadline = time.monotonic() + 5
    while engine.facts("t") != ["fact from x", "fact from again"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.facts("t") == ["fact from x", "fact from again"]


def test_flush_waits_for_extractions_queued_behind_a_busy_worker() -> None:
    release = threading.Event()

    def slow(messages: list[Any]) -> str:
        release.wait(5)
        return json.dumps([messages[0]["content"]])

    engine = MemoryEngine(slow, debounce_seconds=0, max_workers=1)
    for n in range(3):
        engine.schedule(f"t{n}", [user(f"f{n}")])
    time.sleep(0.1)  # all three due: one running, two waiting for the worker
    threading.Timer(0.1, release.set).start()
    engine.flush(5)
    assert [engine.facts(f"t{n}") for n in range(3)] == [["f0"], ["f1"], ["f2"]]


def test_a_worker_ended_by_an_escaping_interrupt_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    escaped: list[type[BaseException]] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: escaped.append(args.exc_type))
    interrupting = Recorder(fail_with=KeyboardInterrupt())
    extract = Extractor()
    engine = MemoryEngine(extract, debounce_seconds=0.01, max_workers=1)
    engine.schedule("a", [user("x")], callbacks=interrupting)
    deadline = time.monotonic() + 5
    while not escaped and time.monotonic() < deadline:
        time.sleep(0.01)
    assert escaped == [KeyboardInterrupt]
    engine.schedule("b", [user("y")])
    deadline = time.monotonic() + 5
    while not engine.facts("b") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.facts("b") == ["fact from y"]
    assert extract.threads[0] is not extract.threads[1]  # a new worker took over


# -- vendorability ------------------------------------------------------------------------
def test_engine_source_imports_only_the_standard_library() -> None:
    tree = ast.parse(ENGINE_PATH.read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import ties the engine to this package"
            imported.add((node.module or "").split(".")[0])
    assert imported - {"__future__"} <= set(sys.stdlib_module_names), imported


def test_engine_runs_as_a_copied_standalone_file(tmp_path: Path) -> None:
    copy = tmp_path / "deermem.py"
    copy.write_text(ENGINE_PATH.read_text())
    script = (
        "import sys, deermem\n"
        "e = deermem.MemoryEngine(lambda m: '[\"ok\"]', debounce_seconds=60)\n"
        "e.schedule('t', [{'role': 'user', 'content': 'x'}]); e.flush()\n"
        "assert e.facts('t') == ['ok'], e.facts('t')\n"
        "bad = [m for m in sys.modules if m.startswith(('deerflow', 'langchain', 'pydantic'))]\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
