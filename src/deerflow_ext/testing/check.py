"""``deerflow-ext extensions check``: the property checks over an operator's own ``plugins:``.

The enabled entries of ``config.yaml`` are the list under test; every other section is kept
(limits, summarization, ...) except ``models:``, because the check runs on the embedded,
offline model: in-process Gateways on temporary SQLite databases, no network. Output is one
line per property and, for a property that fails, its shrunk counterexample as a
``plugins:`` block to paste into a ``config.yaml``. The Gateways' own output (log lines, an
exporter printing spans) is captured at the file-descriptor level while a property runs,
so it cannot interleave with those lines; ``--verbose`` lets it through.
"""

from __future__ import annotations

import dataclasses
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from deerflow_ext.exitcodes import EXIT_FAILED, EXIT_OK

from .entries import Plugin

__all__ = ["DEFAULT_EXAMPLES", "plugins_of", "run_check"]

DEFAULT_EXAMPLES = 10
"""Examples per property that runs Gateways; the two that only load and compose run five times
as many, at a hundredth of the cost each."""

CHEAP_FACTOR = 5


def plugins_of(config: Any) -> list[Plugin]:
    """The enabled ``plugins:`` records of an ``AppConfig`` as kit entries, field for field
    (what the record left at its default, the entry leaves at the kit's)."""
    names = {f.name for f in dataclasses.fields(Plugin)}
    return [
        Plugin(**{name: value for name, value in entry.model_dump(exclude_defaults=True).items() if name in names})
        for entry in config.plugins
        if entry.enabled
    ]


@contextmanager
def _captured_output(enabled: bool) -> Iterator[None]:
    """Send fds 1 and 2 to a scratch file while the block runs (C-level writers included)."""
    if not enabled:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def _load_problems(plugins: Sequence[Plugin], app_config: Any) -> list[str]:
    """Why the list does not load in the given order (then no order can be compared), if it does not."""
    from deerflow_ext.extensions.plugin_loading.loader import ExtensionLoadError
    from deerflow_ext.extensions.plugin_loading.tables import TablePrefixCollisionError

    from .harness import load_plugins

    try:
        loaded = load_plugins(plugins, app_config=app_config)
    except (ExtensionLoadError, TablePrefixCollisionError) as exc:
        return [f"FAIL  every entry loads: {type(exc).__name__}: {exc}"]
    failures = loaded.diagnostics.snapshot()
    if not failures:
        return []
    lines = [f"FAIL  every entry loads: {len(failures)} failure(s); `deerflow-ext extensions doctor` says more"]
    return lines + [f"      {diagnostic}" for diagnostic in failures]


def run_check(
    config_path: Path,
    *,
    examples: int = DEFAULT_EXAMPLES,
    seed: int | None = None,
    verbose: bool = False,
    out: TextIO | None = None,
) -> int:
    """Check the enabled entries of *config_path*; 0 when every property holds, 1 otherwise.

    Raises ``ConfigError`` for a file that does not validate (the CLI turns it into one line).
    """
    from deerflow_ext.config.loading import load_app_config

    from .properties import PROPERTIES, PropertyFailed

    out = out or sys.stdout
    config = load_app_config(config_path)
    plugins = plugins_of(config)
    if not plugins:
        print(f"{config_path}: no enabled plugins, nothing to check", file=out)
        return EXIT_OK
    seed = seed if seed is not None else random.SystemRandom().randrange(2**32)
    app_config = config.model_dump(exclude={"plugins", "models"})
    names = ", ".join(p.label for p in plugins)
    print(f"checking {len(plugins)} plugins from {config_path} ({names}), seed {seed}", file=out)
    with _captured_output(not verbose):
        problems = _load_problems(plugins, app_config)
    if problems:
        print("\n".join(problems), file=out)
        return EXIT_FAILED
    failed = 0
    for prop in PROPERTIES:
        started = time.monotonic()
        failure: PropertyFailed | None = None
        count = examples if prop.runs_gateways else examples * CHEAP_FACTOR
        with _captured_output(not verbose):
            try:
                prop.check(plugins, examples=count, seed=seed, app_config=app_config)
            except PropertyFailed as exc:
                failure = exc
        took = f"({count} examples, {time.monotonic() - started:.1f}s)"
        if failure is None:
            print(f"PASS  {prop.title} {took}", file=out)
            continue
        failed += 1
        print(f"FAIL  {prop.title} {took}: {failure.reason}", file=out)
        print(failure.yaml, file=out, end="")
    verdict = "all hold" if not failed else f"{failed} failed"
    print(f"{len(PROPERTIES)} properties: {verdict}", file=out)
    return EXIT_FAILED if failed else EXIT_OK
