"""``deerflow-ext``: the operator's command line.

Every command that reads ``config.yaml`` reports a broken file as one ``error: <file>:<line>:
<field>: <problem>`` line on stderr (exit 1, :mod:`deerflow_ext.exitcodes`), never a
traceback: the operator's next step is to open that line, and a stack trace only hides it. A
bad ``DEERFLOW_*`` variable is refused the same way under every command. ``extensions
doctor`` runs the checks and the loader the Gateway runs — no database, no server — and
prints the same lines the Gateway would log, so "would this deployment start?" can be
answered before restarting it. ``extensions install`` / ``remove`` change the environment as
well as the file, so they ask first (``--yes`` to skip, required without a terminal) and
live in ``extensions.plugin_loading.install``. Output piped into ``head`` stops quietly.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from deerflow_ext import __version__
from deerflow_ext.authoring import add_authoring_commands, add_wheels_command
from deerflow_ext.config.editing import (
    ConfigEditError,
    PluginNotFoundError,
    add_model,
    add_plugin,
    set_plugin_enabled,
)
from deerflow_ext.config.loading import ConfigError, load_app_config
from deerflow_ext.config.settings import Settings, SettingsError, load_settings
from deerflow_ext.exitcodes import EXIT_FAILED, EXIT_OK, EXIT_STARTUP

__all__ = ["EXIT_CONFIG", "EXIT_FAILED", "EXIT_OK", "build_parser", "main"]

# The former name of a config.yaml refusal; the values live in deerflow_ext.exitcodes.
EXIT_CONFIG = EXIT_STARTUP

Handler = Callable[[argparse.Namespace], int]

_RESTART = "restart the Gateway to apply it (extensions load once, at startup)"


def _settings() -> Settings:
    return load_settings()


def _config_path(args: argparse.Namespace) -> Path:
    return Path(args.config) if args.config is not None else _settings().config


def _error(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


# -- extensions list ------------------------------------------------------------------------
def _cmd_list(args: argparse.Namespace) -> int:
    from deerflow_ext.extensions.operator_view.inventory import describe_entries
    from deerflow_ext.extensions.plugin_loading.discovery import EntryPointIndex

    config = load_app_config(_config_path(args))
    index = EntryPointIndex.scan()
    reports = describe_entries(config.plugins, index)
    configured = {r.extension for r in reports} | {r.use for r in reports}
    unconfigured = [i for i in index if i.name not in configured and i.value not in configured]
    if args.json:
        data = {
            "configured": [r.as_dict() for r in reports],
            "installed_not_configured": [
                {"entry_point": i.name, "use": i.value, "distribution": i.distribution, "version": i.version}
                for i in unconfigured
            ],
        }
        print(json.dumps(data, indent=2))
        return EXIT_OK
    header = ("NAME", "USE", "ENTRY POINT", "STATUS", "REQUIRED", "VERSION", "DISTRIBUTION")
    missing = "not installed"
    rows: list[tuple[str, ...]] = []
    for r in reports:
        info = index.describe(r.use)
        rows.append(
            (
                r.name,
                r.use,
                info.name if info is not None and info.name in index else "-",
                r.status,
                "yes" if r.required else "no",
                r.version or (missing if not r.installed else "-"),
                _distribution_cell(r.distribution, r.package)
                if r.installed
                else (f"{r.package} ({missing})" if r.package else missing),
            )
        )
    rows += [
        ("-", i.value, i.name, "not configured", "-", i.version or "-", i.distribution or "-") for i in unconfigured
    ]
    _print_table(header, rows, sys.stdout)
    return EXIT_OK


def _distribution_cell(installed: str | None, configured: str | None) -> str:
    """The installed distribution; the record's informational ``package:`` when nothing is
    installed, or beside it when the two disagree (the record may be stale)."""
    if installed is None:
        return configured or "-"
    if configured is None or configured.replace("_", "-").lower() == installed.replace("_", "-").lower():
        return installed
    return f"{installed} (config: {configured})"


def _print_table(header: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print(
            "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip(),
            file=out,
        )


# -- extensions enable / disable ------------------------------------------------------------
def _set_enabled(args: argparse.Namespace, enabled: bool) -> int:
    from deerflow_ext.extensions.operator_view.inventory import is_installed
    from deerflow_ext.extensions.plugin_loading.discovery import EntryPointIndex

    path = _config_path(args)
    index = EntryPointIndex.scan()
    word = "enabled" if enabled else "disabled"
    try:
        changed = set_plugin_enabled(path, args.name, enabled, entry_points=index)
    except PluginNotFoundError as exc:
        if enabled and args.name in index:
            # An installed but unconfigured extension: enabling it means adding its entry.
            add_plugin(path, {"name": args.name, "use": args.name})
            print(f"{word} {args.name} (added to {path}); {_RESTART}")
            return EXIT_OK
        _error(str(exc))
        return EXIT_STARTUP
    except ConfigEditError as exc:
        _error(str(exc))
        return EXIT_STARTUP
    print(f"{word} {args.name}; {_RESTART}" if changed else f"{args.name} is already {word}")
    if enabled:
        entry = next((e for e in load_app_config(path).plugins if e.name == args.name or e.use == args.name), None)
        if entry is not None and not is_installed(entry.use, index):
            print(
                f"warning: {entry.use!r} is not installed: the Gateway will log it as failed"
                f"{' and refuse to start (required: true)' if entry.required else ''}; "
                f"install it first (deerflow-ext extensions install SOURCE)",
                file=sys.stderr,
            )
    return EXIT_OK


# -- models add ---------------------------------------------------------------------------------
def _model_parameter(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE (e.g. model=gpt-4o-mini)")
    from deerflow_ext.config.loading import parse_yaml

    parsed = parse_yaml(value, "KEY=VALUE") if value.strip() else ""
    return key, parsed if isinstance(parsed, (str, int, float, bool)) else value


def _cmd_models_add(args: argparse.Namespace) -> int:
    path = _config_path(args)
    record: dict[str, object] = {"name": args.name, "use": args.use, **dict(args.parameters)}
    if args.purposes:
        record["purposes"] = [p.strip() for p in args.purposes.split(",") if p.strip()]
    try:
        add_model(path, record)
    except ConfigEditError as exc:
        _error(str(exc))
        return EXIT_FAILED
    print(f"added model {args.name} ({args.use}) to {path}; check it with: deerflow-ext extensions doctor")
    return EXIT_OK


# -- extensions skill / mcp: extensions_config.json, beside config.yaml -----------------------
def _cmd_extensions_config(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from deerflow_ext.gateway.routes import extensions_config as ec

    path = _config_path(args).parent / ec.EXTENSIONS_CONFIG_FILE
    enabled = args.action == "enable"

    def change(config: Any) -> Any:
        if args.action == "add":  # an operator at the machine: any command (no allowed_commands check)
            return ec.add_mcp_server(config, args.name, _mcp_entry(args))
        if args.action == "remove":
            return ec.remove_mcp_server(config, args.name)
        return ec.set_entry_enabled(config, args.kind, args.name, enabled)

    try:  # under the file's lock, as the Gateway's PUT: no torn file, no lost update
        ec.update_extensions_config(path, change)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        _error(f"{path}: {problems}")
        return EXIT_FAILED
    except ValueError as exc:  # ValidationError's base: after it
        _error(str(exc))
        return EXIT_FAILED
    done = {"add": "added", "remove": "removed"}.get(args.action, f"{args.action}d")
    print(f"{done} {args.kind} {args.name} in {path}")
    return EXIT_OK


def _pairs(values: list[str] | None, option: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values or ():
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise ValueError(f"{option} {value!r}: NAME=VALUE is required")
        pairs[key] = rest
    return pairs


def _mcp_entry(args: argparse.Namespace) -> dict[str, Any]:
    """``extensions mcp add``'s options as an ``mcpServers`` entry (DeerFlow's shape)."""
    if (args.command is None) == (args.url is None):
        raise ValueError("extensions mcp add: give --command (a stdio server) or --url (an http or sse one)")
    if args.command is not None:
        entry: dict[str, Any] = {"type": "stdio", "command": args.command, "args": list(args.arg or ())}
        entry["env"] = _pairs(args.env, "--env")
    else:
        entry = {"type": args.transport or "http", "url": args.url, "headers": _pairs(args.header, "--header")}
    entry["enabled"] = not args.disabled
    return entry


# -- extensions doctor ----------------------------------------------------------------------
class _Echo(logging.Handler):
    """Print the extension runtime's log lines exactly as the Gateway's log would carry them."""

    def __init__(self, out: TextIO) -> None:
        super().__init__(logging.INFO)
        self.out = out

    def emit(self, record: logging.LogRecord) -> None:
        print(record.getMessage(), file=self.out)


def _doctor_cause(exc: ConfigError, path: Path) -> str:
    """The refusal in words: a model that cannot be used is not an invalid file."""
    from deerflow_ext.agents.models import ModelUnusable

    if isinstance(exc, ModelUnusable):
        return f"a model entry of {path} cannot be used (see the error line)"
    if not Path(exc.path).exists():
        return f"{exc.path} does not exist"
    return f"{path} is invalid"


def _cmd_doctor(args: argparse.Namespace) -> int:
    from deerflow_ext.extensions.boundary.diagnostics import DiagnosticsList
    from deerflow_ext.extensions.plugin_loading.discovery import EntryPointIndex
    from deerflow_ext.extensions.plugin_loading.loader import ExtensionLoadError, load_extensions
    from deerflow_ext.extensions.plugin_loading.tables import TablePrefixCollisionError
    from deerflow_ext.preflight import error_line, load_startup_config

    path = _config_path(args)
    try:
        config = load_startup_config(_settings(), config_path=args.config)
    except ConfigError as exc:
        print(error_line(exc), file=sys.stderr)
        print(f"The Gateway would not start: {_doctor_cause(exc, path)}.")
        return EXIT_STARTUP
    if not path.exists():
        print(f"{path} does not exist: the Gateway starts with no extensions.")

    diagnostics = DiagnosticsList()
    runtime_logger = logging.getLogger("deerflow_ext.extensions")
    echo = _Echo(sys.stdout)
    previous_level = runtime_logger.level
    runtime_logger.addHandler(echo)
    if not runtime_logger.isEnabledFor(logging.INFO):
        runtime_logger.setLevel(logging.INFO)
    verdict: str | None = None
    try:
        load_extensions(config, entry_points=EntryPointIndex.scan(), diagnostics=diagnostics, config_file=str(path))
    except (ExtensionLoadError, TablePrefixCollisionError) as exc:
        verdict = f"{type(exc).__name__}: {exc}"
    finally:
        runtime_logger.removeHandler(echo)
        runtime_logger.setLevel(previous_level)

    for diagnostic in diagnostics:
        error_type = f" ({diagnostic.error_type})" if diagnostic.error_type else ""
        print(f"diagnostic [{diagnostic.phase}] {diagnostic.extension}: {diagnostic.message}{error_type}")
    if verdict is not None:
        print(verdict)
        print("The Gateway would not start.")
        return EXIT_STARTUP
    if config.auth is not None and not _auth_loads(config, path):
        print("The Gateway would not start: auth.path names no usable langgraph_sdk.Auth.")
        return EXIT_STARTUP
    print("The Gateway would start.")
    return EXIT_OK


def _auth_loads(config: Any, path: Path) -> bool:
    """``auth:`` loads as the Gateway loads it (the file is imported, as at startup); the
    error line on stderr when it does not."""
    from deerflow_ext.identity import AuthLoadError, build_identity_gate

    settings = _settings()
    token = settings.api_token.get_secret_value() if settings.api_token is not None else config.gateway.api_token
    try:
        build_identity_gate(config.auth, path, token)
    except AuthLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return False
    return True


# -- extensions install / remove ------------------------------------------------------------
def _confirm(question: str, assume_yes: bool) -> bool | None:
    """Ask on the terminal; ``None`` when nobody can answer (no TTY and no ``--yes``).

    Installing runs the package's build backend and, once loaded, its ``install()``: a
    script piping into this command must say ``--yes`` explicitly rather than be taken
    for consent by an empty stdin.
    """
    if assume_yes:
        return True
    if not sys.stdin.isatty():
        return None
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


def _refusal(question: str, assume_yes: bool, *, action: str, undone: str) -> int | None:
    """The exit status when the ``action`` (install, removal) may not go ahead, else ``None``.

    Both commands that change the environment share it, so that both refuse a missing TTY
    and a "no" the same way: the status is the startup failure, and ``undone`` says what was
    left as it was.
    """
    answer = _confirm(question, assume_yes)
    if answer is None:
        _error(f"stdin is not a terminal, so nobody can confirm the {action}; re-run with --yes to confirm it")
        return EXIT_STARTUP
    if not answer:
        print(f"aborted: nothing {undone}", file=sys.stderr)
        return EXIT_STARTUP
    return None


def _cmd_install(args: argparse.Namespace) -> int:
    from deerflow_ext.extensions.plugin_loading.install import InstallError, install_extension, preflight

    path = _config_path(args)
    preflight(path, args.name)
    question = (
        f"Install {args.source!r} with {sys.executable} -m pip and add it to {path}? "
        "Installing runs the package's code."
    )
    refused = _refusal(question, args.yes, action="install", undone="installed")
    if refused is not None:
        return refused
    try:
        result = install_extension(args.source, path, name=args.name)
    except InstallError as exc:
        _error(str(exc))
        for note in exc.rollback:
            print(f"rollback: {note}", file=sys.stderr)
        if not exc.restored:
            _error("the environment could not be fully restored (see above)")
        print(f"{path} unchanged", file=sys.stderr)
        return EXIT_STARTUP
    print(f"installed {result.distribution} {result.version}")
    if result.existing:
        what = f"the existing plugins entry {result.entry.name!r} (use: {result.entry.use})"
        print(f"enabled {what} in {path}; {_RESTART}")
    else:
        print(f"added plugins entry {result.entry.name!r} (use: {result.entry.use}) to {path}; {_RESTART}")
    return EXIT_OK


def _cmd_remove(args: argparse.Namespace) -> int:
    from deerflow_ext.extensions.plugin_loading.discovery import EntryPointIndex
    from deerflow_ext.extensions.plugin_loading.install import plan_removal, remove_extension

    path = _config_path(args)
    index = EntryPointIndex.scan()
    removal = plan_removal(path, args.name, index)
    refused = _refusal(f"{removal.describe()}?", args.yes, action="removal", undone="removed")
    if refused is not None:
        return refused
    try:
        result = remove_extension(path, removal, index)
    except RuntimeError as exc:
        _error(str(exc))
        return EXIT_STARTUP
    print(f"removed plugins entry {removal.entry.name!r} from {path}; {_RESTART}")
    if result.uninstalled:
        print(f"uninstalled {removal.distribution}")
    else:
        print(result.removal.kept_reason())
    return EXIT_OK


# -- commands written elsewhere -------------------------------------------------------------
# `serve` and `run` belong to the Gateway and the embedded client; each owns its argument
# parser (``serve_command(argv)`` / ``run_command(argv)``), so main() hands them the raw
# arguments instead of re-declaring their options here. They are imported on use so that
# `extensions doctor` never pays for FastAPI, LangGraph or a database driver.
def _serve(argv: Sequence[str]) -> int:
    from deerflow_ext.gateway.serve import serve_command

    return int(serve_command(list(argv)))


def _run(argv: Sequence[str]) -> int:
    from deerflow_ext.run_console import run_command

    return int(run_command(list(argv)))


DELEGATED: dict[str, Callable[[Sequence[str]], int]] = {"serve": _serve, "run": _run}


# -- parser -----------------------------------------------------------------------------------
def _add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="PATH",
        default=None,
        help="path of config.yaml (default: $DEERFLOW_CONFIG or ./config.yaml)",
    )


def _add_yes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deerflow-ext",
        description="DeerFlow extension host",
        epilog="exit codes: 0 ok, 1 startup refused (one error line says why), 2 usage, 3 run failed, 130 interrupted",
    )
    parser.add_argument("--version", action="version", version=f"deerflow-ext {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    # serve / run: listed here for --help; main() delegates their arguments untouched.
    commands.add_parser("serve", help="run the Gateway: serve [--config PATH] [--host H] [--port P]", add_help=False)
    commands.add_parser(
        "run", help="run one prompt in-process: run PROMPT [--config PATH] [--thread ID]", add_help=False
    )

    extensions = commands.add_parser("extensions", help="inspect and configure extensions")
    ext_commands = extensions.add_subparsers(dest="ext_command", metavar="ACTION", required=True)

    ext_list = ext_commands.add_parser("list", help="installed entry points and configured entries")
    ext_list.add_argument("--json", action="store_true", help="one JSON document instead of a table")
    _add_config(ext_list)
    ext_list.set_defaults(handler=_cmd_list)

    for action, enabled in (("enable", True), ("disable", False)):
        sub = ext_commands.add_parser(action, help=f"{action} an extension in config.yaml")
        sub.add_argument("name", metavar="NAME", help="entry name, entry-point name, or use value")
        _add_config(sub)
        sub.set_defaults(handler=lambda args, enabled=enabled: _set_enabled(args, enabled))

    for kind, what in (("skill", "a skill"), ("mcp", "an MCP server")):
        sub = ext_commands.add_parser(kind, help=f"enable or disable {what} in extensions_config.json")
        sub.add_argument(
            "action", choices=("enable", "disable", "add", "remove") if kind == "mcp" else ("enable", "disable")
        )
        sub.add_argument("name", metavar="NAME")
        if kind == "mcp":  # add: a stdio server (--command) or a remote one (--url)
            sub.add_argument("--command", help="add: the stdio server's command")
            sub.add_argument(
                "--arg",
                action="append",
                help="add: one argument of the command (repeatable; --arg=-y for one that starts with -)",
            )
            sub.add_argument("--env", action="append", help="add: NAME=VALUE for the process; VALUE may say $VAR")
            sub.add_argument("--url", help="add: the http or sse server's URL")
            sub.add_argument("--transport", choices=("http", "sse"), help="add: with --url (default http)")
            sub.add_argument("--header", action="append", help="add: NAME=VALUE sent with each request")
            sub.add_argument("--disabled", action="store_true", help="add it switched off")
        _add_config(sub)
        sub.set_defaults(handler=_cmd_extensions_config, kind=kind)

    doctor = ext_commands.add_parser("doctor", help="dry-run the Gateway's extension loading")
    _add_config(doctor)
    doctor.set_defaults(handler=_cmd_doctor)

    install = ext_commands.add_parser(
        "install", help="pip-install an extension and add it to config.yaml (one transaction)"
    )
    install.add_argument("source", metavar="SOURCE", help="a local path, a wheel or a requirement")
    install.add_argument("--name", default=None, help="entry name (default: the entry-point name)")
    _add_yes(install)
    _add_config(install)
    install.set_defaults(handler=_cmd_install)

    remove = ext_commands.add_parser("remove", help="remove an extension from config.yaml, then uninstall it")
    remove.add_argument("name", metavar="NAME", help="entry name, entry-point name, or use value")
    _add_yes(remove)
    _add_config(remove)
    remove.set_defaults(handler=_cmd_remove)

    add_authoring_commands(ext_commands, _add_config, _config_path)

    models = commands.add_parser("models", help="edit the models: section of config.yaml")
    model_commands = models.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    model_add = model_commands.add_parser(
        "add", help="add a models: entry (config.yaml is created if missing; nothing else in it changes)"
    )
    model_add.add_argument("name", metavar="NAME", help="the entry's name, e.g. gpt")
    model_add.add_argument("use", metavar="USE", help="module:Class, e.g. langchain_openai:ChatOpenAI")
    model_add.add_argument(
        "parameters",
        metavar="KEY=VALUE",
        nargs="*",
        type=_model_parameter,
        help="constructor keys, e.g. model=gpt-4o-mini",
    )
    model_add.add_argument("--purposes", default=None, help="comma-separated: lead, subagent, title, memory, ...")
    _add_config(model_add)
    model_add.set_defaults(handler=_cmd_models_add)

    add_wheels_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:
        # The reader went away (`deerflow-ext extensions list | head`): stop quietly. stdout
        # is pointed at /dev/null so the interpreter's final flush does not complain either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


def _main(arguments: list[str]) -> int:
    if arguments and arguments[0] in DELEGATED:
        return DELEGATED[arguments[0]](arguments[1:])
    parser = build_parser()
    args = parser.parse_args(arguments)
    handler: Handler = args.handler
    try:
        _settings()  # a bad DEERFLOW_* value is refused under every command, naming the variable
        return handler(args)
    except SettingsError as exc:
        _error(str(exc))
        return EXIT_STARTUP
    except ConfigError as exc:
        for problem in exc.problems:
            _error(problem)
        return EXIT_STARTUP
    except ConfigEditError as exc:
        _error(str(exc))
        return EXIT_STARTUP


if __name__ == "__main__":
    sys.exit(main())
