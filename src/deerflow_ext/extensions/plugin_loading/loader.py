"""``load_extensions``: the spec's loading sequence, steps 2.1 to 2.5, for every entry.

1. Table prefixes are registered first — for every entry that declares one, disabled and
   failing entries included — and validated before any extension code runs, so a collision
   aborts startup without having imported anything.
2. Then, per entry in list order: a disabled entry is skipped without importing; ``use`` is
   resolved (2.3); the ``@extension(api=...)`` marker is checked (2.4); ``install(registry,
   config)`` runs with a shallow copy of the entry's config (2.5).

Any failure in 2.3 to 2.5 becomes one attributed diagnostic (logged as
``Extension <use>: ...``) and the entry is skipped; whatever its ``install()`` registered
before failing is rolled back *positionally*, so a failing second instance of the same
``use`` never removes the first instance's registrations. ``required: true`` turns that
failure into :class:`ExtensionLoadError`, which stops the Gateway.

A ``CancelledError`` raised while importing an extension or by its ``install()`` is such a
failure too. Loading is synchronous: even when ``create_app`` runs inside a task, nothing can
deliver the host's cancellation until the next ``await``, so a ``CancelledError`` here was
raised by the extension's own code (spec, Cancellation). So is a ``SystemExit`` (an
``install()`` calling ``sys.exit(7)`` used to end ``serve`` and ``doctor`` with exit code 7
and no output), and a ``KeyboardInterrupt`` the extension raised itself. An operator's
Ctrl-C while an extension loads is not the extension's failure: :class:`~.exits.InterruptWatch`
sees the signal arrive, and that ``KeyboardInterrupt`` propagates, after rollback.

The result is returned, not published: ``create_app`` and ``doctor`` decide whether it
becomes the process-wide set (``set_loaded_extensions``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from deerflow_ext.config.schema import AppConfig, PluginEntry
from deerflow_ext.exception_text import exception_text

from ..boundary.diagnostics import DiagnosticsList
from ..boundary.exits import EXTENSION_FAILURES, InterruptWatch
from ..contract.registry import HostRegistry
from ..contract.snapshot import LoadedExtensions, TablePrefix
from .discovery import EntryPointIndex, ResolvedExtension
from .tables import HOST_TABLE_NAMES, TablePrefixCollisionError, check_table_prefixes
from .versioning import check_marker

__all__ = ["ExtensionLoadError", "load_extensions", "register_table_prefixes"]

logger = logging.getLogger("deerflow_ext.extensions")


class ExtensionLoadError(RuntimeError):
    """A ``required: true`` extension failed; the Gateway must not start without it.

    ``str(exc)`` is the spec's text, ``required extension <use> failed to install``; the
    underlying failure is chained as ``__cause__`` and named by ``extension``.
    """

    def __init__(self, extension: str) -> None:
        self.extension = extension
        super().__init__(f"required extension {extension} failed to install")


def register_table_prefixes(
    entries: Sequence[PluginEntry],
    entry_points: EntryPointIndex,
    *,
    host_tables: Iterable[str] = HOST_TABLE_NAMES,
    diagnostics: DiagnosticsList,
) -> tuple[TablePrefix, ...]:
    """Step 2.1 for every entry at once; a collision is recorded, then raised."""
    prefixes = tuple(
        TablePrefix(entry.table_prefix, entry_points.attribution(entry.use), entry.name)
        for entry in entries
        if entry.table_prefix is not None
    )
    try:
        return check_table_prefixes(prefixes, host_tables)
    except TablePrefixCollisionError as exc:
        diagnostics.record(exc.prefix.extension, "tables", str(exc), exc=exc)
        raise


def _install(resolved: ResolvedExtension, registry: HostRegistry, entry: PluginEntry) -> None:
    result = resolved.install(registry, dict(entry.config))
    if inspect.isawaitable(result):
        # An async install() would register nothing until awaited, and loading is synchronous:
        # accepting it would silently load an empty extension.
        close = getattr(result, "close", None)
        if callable(close):
            close()
        raise TypeError("install() must be a plain function; it returned an awaitable")


def load_extensions(
    config: AppConfig,
    *,
    entry_points: EntryPointIndex | None = None,
    diagnostics: DiagnosticsList | None = None,
    host_tables: Iterable[str] | None = None,
    config_file: str = "config.yaml",
    model_invokers: Callable[[PluginEntry], Any] | None = None,
) -> LoadedExtensions:
    """Load ``config.plugins`` into a frozen :class:`LoadedExtensions` (not published).

    Raises :class:`ExtensionLoadError` when a required entry fails and
    :class:`~deerflow_ext.extensions.plugin_loading.tables.TablePrefixCollisionError` when a table prefix
    collides. Only an operator's Ctrl-C propagates out of an install (after rollback); a
    ``KeyboardInterrupt``/``SystemExit`` the extension raised is its load failure.

    Problems are recorded in ``diagnostics`` (a new list when not given), which the snapshot
    keeps as its own: ``LoadedExtensions.diagnostics``. ``config_file`` names the file in
    messages about a record's ``settings:``. ``model_invokers`` makes a record's granted model
    invoker (``host_access.model_invocation``), which its services receive; the Gateway passes
    it, since only the Gateway runs services.
    """
    index = entry_points if entry_points is not None else EntryPointIndex.scan()
    diags = diagnostics if diagnostics is not None else DiagnosticsList()
    entries = config.plugins
    prefixes = register_table_prefixes(
        entries,
        index,
        host_tables=HOST_TABLE_NAMES if host_tables is None else host_tables,
        diagnostics=diags,
    )
    registry = HostRegistry(config_file=config_file)
    loaded: list[str] = []

    with InterruptWatch() as operator:
        for position, entry in enumerate(entries):
            if not entry.enabled:
                continue
            attribution = index.attribution(entry.use)
            resolved = None
            try:
                resolved = index.resolve(entry.use)  # 2.3
                attribution = resolved.attribution
                check_marker(resolved.install)  # 2.4
            except Exception as exc:
                _fail(diags, entry, attribution, str(exc), exc)
                continue
            except EXTENSION_FAILURES as exc:  # the extension's own: see the module docstring
                if operator.sent(exc):
                    raise
                step = "cannot import" if resolved is None else "marker check failed for"
                _fail(diags, entry, attribution, f"{step} {attribution}: {exception_text(exc)}", exc)
                continue

            invoker = model_invokers(entry) if model_invokers is not None else None
            mark = registry.begin(
                position,
                entry.name,
                attribution,
                intercept=entry.intercept,
                settings=entry.settings,
                model_invoker=invoker,
            )
            try:
                _install(resolved, registry, entry)  # 2.5
                registry.check_settings_claimed(mark)
            except EXTENSION_FAILURES as exc:
                registry.rollback(mark)
                if operator.sent(exc):
                    raise
                _fail(diags, entry, attribution, f"install() failed: {exception_text(exc)}", exc)
                continue
            except BaseException:
                registry.rollback(mark)
                raise
            registry.end()
            loaded.append(attribution)

    disabled = sum(not entry.enabled for entry in entries)
    extensions = registry.freeze(
        table_prefixes=prefixes, loaded=loaded, total=len(entries), disabled=disabled, diagnostics=diags
    )
    logger.info("%s", extensions.summary)
    return extensions


def _fail(diags: DiagnosticsList, entry: PluginEntry, attribution: str, message: str, exc: BaseException) -> None:
    diags.record(attribution, "load", message, exc=exc)
    if entry.required:
        raise ExtensionLoadError(attribution) from exc
