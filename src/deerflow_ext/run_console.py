"""``deerflow-ext run PROMPT``: one lead run in this process, shown as it happens.

stdout carries only what the model says — its tokens as they stream (a whole reply at once
from a model that does not stream) — so ``deerflow-ext run ... > answer.txt`` keeps the
answer. stderr carries the rest: the extension summary and every other log line (hook
tracing with ``DEERFLOW_TRACE_EXTENSIONS=1``, observer lines), and one line per step *as it
starts* (a model call, a tool call, a subagent), with its end for tools and subagents. A
step still running after a few seconds gets a progress indicator: an updating elapsed time
on a terminal, a "still running" line every ``_NOTE_EVERY`` seconds otherwise.

Threads are stored in the Gateway's own database (``DEERFLOW_DATABASE_URL``), so
``--thread ID`` continues a thread a previous ``run`` — or a Gateway run — left there; an id
with nothing stored is refused (exit 2), never silently made a new thread. Startup refusals
are the same lines and exit codes as ``serve`` (:mod:`deerflow_ext.preflight`).

The command returns when the answer is printed, not after the host's own calls
(:func:`one_run_config`): memory extraction is skipped, because its facts live in the
process's memory and this process ends with the answer; the title call is awaited, bounded
at :data:`TITLE_SECONDS` unless ``title.timeout_seconds`` says otherwise, so a slow or
failing title model costs at most that (one warning line, the thread untitled).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from langchain_core.messages import AIMessage, ToolMessage

from .exitcodes import EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_FAILED, EXIT_STARTUP, EXIT_USAGE

__all__ = ["TITLE_SECONDS", "StepConsole", "UnknownThread", "one_run_config", "run_command"]

TITLE_SECONDS = 3.0
"""How long ``run`` waits for the title once the answer is printed (``title.timeout_seconds`` wins)."""

_MODEL_NODE = "model"
_TOOLS_NODE = "tools"
_TASK_TOOL = "task"
_SLOW_AFTER = 2.0  # seconds before a step gets a progress indicator
_NOTE_EVERY = 10.0  # seconds between "still running" lines when stderr is not a terminal
_RUN_MODES = ("updates", "messages", "values", "tasks")


def _tool_calls(task_input: Any) -> list[dict[str, Any]]:
    """The tool calls a ``tools`` task runs (LangGraph's task stream shows them as a list)."""
    items = task_input if isinstance(task_input, list) else [task_input]
    calls: list[dict[str, Any]] = []
    for item in items:
        call = item.get("tool_call", item) if isinstance(item, dict) else getattr(item, "tool_call", None)
        if isinstance(call, dict) and "name" in call:
            calls.append(call)
    return calls


class StepConsole:
    """Renders one run's stream: tokens to ``out``, step lines and progress to ``err``."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self.tty = err.isatty()
        self.printed_answer = False
        self._open_line = False  # tokens printed on stdout without a newline yet
        self._step: str | None = None
        self._step_started = 0.0
        self._noted = 0.0  # elapsed time of the last "still running" line of this step
        self._spinning = False

    # -- stream events --------------------------------------------------------------------
    def handle(self, event: str, data: Any) -> None:
        if event == "metadata":
            self._line(f"… run {data['run_id']} on thread {data['thread_id']}")
        elif event == "tasks" and isinstance(data, dict):
            self._task(data)
        elif event == "messages" and isinstance(data, tuple) and len(data) == 2:
            self._token(*data)

    def _task(self, task: dict[str, Any]) -> None:
        name = task.get("name")
        finished = "result" in task or "error" in task
        if name == _MODEL_NODE:
            if finished:
                self._end_answer_line()
                self._step = None
            else:
                self._start("model call")
        elif name == _TOOLS_NODE:
            if not finished:
                for call in _tool_calls(task.get("input")):
                    args = call.get("args") or {}
                    if call["name"] == _TASK_TOOL:
                        self._start(f"subagent: {args.get('description', '')}")
                    else:
                        self._start(f"tool call: {call['name']} {json.dumps(args, default=str)}")
                return
            self._step = None
            result = task.get("result")
            messages = result.get("messages") if isinstance(result, dict) else None
            for message in messages or ():
                if isinstance(message, ToolMessage):
                    what = "subagent" if message.name == _TASK_TOOL else f"tool {message.name}"
                    self._line(f"… {what} {'failed' if message.status == 'error' else 'done'}")

    def _token(self, message: Any, metadata: dict[str, Any]) -> None:
        if metadata.get("langgraph_node") != _MODEL_NODE or not isinstance(message, AIMessage):
            return
        text = message.text
        if not text:
            return
        self._clear_progress()
        self.out.write(str(text))
        self.out.flush()
        self._open_line = True
        self.printed_answer = True

    # -- lines ----------------------------------------------------------------------------
    def _start(self, what: str) -> None:
        self._end_answer_line()
        self._step, self._step_started, self._noted = what, time.monotonic(), 0.0
        self._line(f"… {what}")

    def _line(self, text: str) -> None:
        self._clear_progress()
        print(text, file=self.err, flush=True)

    def _end_answer_line(self) -> None:
        if self._open_line:
            self.out.write("\n")
            self.out.flush()
            self._open_line = False

    def _clear_progress(self) -> None:
        if self._spinning:
            self.err.write("\r\033[K")
            self._spinning = False

    def tick(self) -> None:
        """Called about once a second: a progress indicator for a step that runs long."""
        if self._step is None:
            return
        elapsed = time.monotonic() - self._step_started
        if elapsed < _SLOW_AFTER:
            return
        if self.tty:
            self.err.write(f"\r\033[K… {self._step} ({elapsed:.0f}s)")
            self.err.flush()
            self._spinning = True
        elif elapsed - self._noted >= _NOTE_EVERY:
            self._noted = elapsed
            print(f"… still running: {self._step} ({elapsed:.0f}s)", file=self.err, flush=True)

    def finish(self) -> None:
        self._clear_progress()
        self._end_answer_line()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="deerflow-ext run", description="Run the lead agent once, in-process.")
    parser.add_argument("prompt")
    parser.add_argument("--config", default=None, help="path of config.yaml (default: $DEERFLOW_CONFIG)")
    parser.add_argument(
        "--thread", default=None, help="id of a stored thread to continue (an unknown id is refused, exit 2)"
    )
    return parser


async def _run(client: Any, console: StepConsole, prompt: str, thread: str | None) -> Any:
    async def ticker() -> None:
        while True:
            await asyncio.sleep(1.0)
            console.tick()

    ticking = asyncio.create_task(ticker())
    result = None
    try:
        async for event, data in client.astream(prompt, thread, stream_modes=_RUN_MODES):
            if event == "result":
                result = data
            else:
                console.handle(event, data)
    finally:
        ticking.cancel()
        console.finish()
    return result


class UnknownThread(LookupError):
    """``--thread ID`` names nothing stored: refused, not made a new thread of that id."""


def one_run_config(config: Any) -> Any:
    """``config`` as one ``run`` uses it: no memory extraction, a bounded title call (module doc)."""
    title = config.title
    if title.timeout_seconds is None:
        title = title.model_copy(update={"timeout_seconds": TITLE_SECONDS})
    memory = config.memory.model_copy(update={"enabled": False})
    return config.model_copy(update={"title": title, "memory": memory})


async def _run_stored(config: Any, extensions: Any, settings: Any, console: StepConsole, args: Any) -> Any:
    from .client import DeerFlowClient
    from .gateway.routes.extensions_config import EXTENSIONS_CONFIG_FILE
    from .persistence import open_checkpointer
    from .skills import SkillShelf

    async with open_checkpointer(settings.async_database_url, settings.database_durability) as checkpointer:
        if args.thread is not None:
            stored = await checkpointer.aget_tuple({"configurable": {"thread_id": args.thread, "checkpoint_ns": ""}})
            if stored is None:
                raise UnknownThread(args.thread)
        folder = Path(settings.config).parent  # the skills the Gateway would list, beside config.yaml
        skills = SkillShelf(folder / config.skills.path, folder / EXTENSIONS_CONFIG_FILE)
        client = DeerFlowClient(one_run_config(config), extensions=extensions, checkpointer=checkpointer, skills=skills)
        try:
            return await _run(client, console, args.prompt, args.thread)
        finally:
            await client.aclose()


def run_command(argv: Sequence[str] | None = None) -> int:
    """``deerflow-ext run PROMPT [--config PATH] [--thread ID]``; exit codes of :mod:`deerflow_ext.exitcodes`."""
    args = _parser().parse_args(argv)
    from .agents.middlewares.errors import describe_failure
    from .config.settings import load_settings
    from .extensions.operator_view.hook_metrics import set_metrics_enabled
    from .extensions.plugin_loading.loader import load_extensions
    from .logs import configure_logging
    from .preflight import check_database, error_line, load_startup_config, redacted_url, refusals

    try:
        settings = load_settings(**({"config": args.config} if args.config is not None else {}))
        configure_logging(settings.log_level, settings.log_format)
        set_metrics_enabled(settings.metrics)
        config = load_startup_config(settings, config_path=args.config)
        check_database(settings.database_url)
        extensions = load_extensions(config, config_file=str(args.config or settings.config))  # logs the summary line
    except refusals() as exc:  # SettingsError among them
        print(error_line(exc), file=sys.stderr)
        return EXIT_STARTUP

    console = StepConsole(sys.stdout, sys.stderr)
    try:
        result = asyncio.run(_run_stored(config, extensions, settings, console, args))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except UnknownThread as exc:
        where = redacted_url(settings.database_url)
        print(
            f"error: --thread {exc.args[0]}: no stored thread has this id in {where} "
            "(leave --thread out to start one; each run prints its thread's id on stderr)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except Exception as exc:
        print(f"error: run failed: {describe_failure(exc)}", file=sys.stderr)
        return EXIT_RUN_FAILED
    if result is None:
        return EXIT_RUN_FAILED
    if not console.printed_answer and result.answer:
        print(result.answer)
    return EXIT_OK
