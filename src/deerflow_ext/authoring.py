"""``extensions check``, ``extensions new`` and ``wheels``: the commands that test and start extensions.

Kept apart from ``cli.py`` so the operator's configuration commands and these two grow
independently. Both import their machinery on use: ``check`` needs the author kit's test
dependencies (pytest, hypothesis), which an operator's Gateway environment may not have,
and neither should slow down ``deerflow-ext --help``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path

from deerflow_ext.exitcodes import EXIT_FAILED, EXIT_OK, EXIT_USAGE

__all__ = ["add_authoring_commands", "add_wheels_command"]


def _cmd_check(args: argparse.Namespace, config_path: Callable[[argparse.Namespace], Path]) -> int:
    try:
        # properties imports hypothesis and the kit pytest: both come with deerflow-ext[test].
        importlib.import_module("deerflow_ext.testing.properties")
        from deerflow_ext.testing.check import run_check
    except ImportError as exc:
        print(
            f"error: extensions check needs the author kit's test dependencies ({exc.name} is missing): "
            f"python3 -m pip install {_kit_arguments()}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return run_check(config_path(args), examples=args.examples, seed=args.seed, verbose=args.verbose)


def _kit_arguments() -> str:
    """Where ``deerflow-ext[test]`` comes from: the source this host was installed from."""
    from importlib import metadata

    from deerflow_ext.distribution import host_source

    try:
        return host_source().install_arguments("test")
    except metadata.PackageNotFoundError:
        return "'deerflow-ext[test]'"


def _cmd_new(args: argparse.Namespace) -> int:
    from deerflow_ext.scaffold import Scaffold, ScaffoldError, create_package

    try:
        target = create_package(args.name, Path(args.directory), full_stack=args.full_stack)
    except ScaffoldError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    scaffold = Scaffold.named(args.name)
    print(f"created {target} (entry point {scaffold.entry_point} = {scaffold.module}:install)")
    print(f"next: cd {target} && python3 -m pip install nox && python3 -m nox")
    return EXIT_OK


def _cmd_wheels(args: argparse.Namespace) -> int:
    from importlib import metadata

    from deerflow_ext.distribution import WheelsError, build_wheels, host_source

    source = Path(args.source) if args.source else None
    if source is None:
        try:
            found = host_source()
        except metadata.PackageNotFoundError:
            found = None
        if found is None or found.kind != "checkout":
            origin = found.requirement if found is not None else "nowhere pip recorded"
            print(
                f"error: deerflow-ext was installed from {origin}, not a checkout; name one with --source PATH",
                file=sys.stderr,
            )
            return EXIT_FAILED
        source = Path(found.location)
    directory = Path(args.directory)
    try:
        written = build_wheels(source, directory, with_dependencies=args.with_dependencies)
    except WheelsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    host, contract, *dependencies = written
    print(f"built {host}\nbuilt {contract}")
    if dependencies:
        print(f"and {len(dependencies)} dependency wheels: installs with --no-index")
    print(f"next: python3 -m pip install --find-links {directory} {host}")
    return EXIT_OK


def add_wheels_command(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``wheels DIR``: the host and contract wheels an extension author's machine installs."""
    wheels = commands.add_parser(
        "wheels",
        help="build deerflow-ext and deerflow-extension-api wheels that install without the checkout",
    )
    wheels.add_argument("directory", metavar="DIR", help="where the wheels go (created if missing)")
    wheels.add_argument(
        "--source", metavar="PATH", default=None, help="the checkout (default: the one deerflow-ext was installed from)"
    )
    wheels.add_argument(
        "--with-dependencies",
        action="store_true",
        help="also every wheel deerflow-ext[test], a hatchling build and nox need (then install with --no-index)",
    )
    wheels.set_defaults(handler=_cmd_wheels)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_authoring_commands(
    commands: argparse._SubParsersAction,  # type: ignore[type-arg]
    add_config: Callable[[argparse.ArgumentParser], None],
    config_path: Callable[[argparse.Namespace], Path],
) -> None:
    """Add ``check`` and ``new`` to the ``extensions`` sub-commands."""
    from deerflow_ext.testing.check import DEFAULT_EXAMPLES

    check = commands.add_parser(
        "check",
        help="property-check the enabled plugins: any order, failing neighbours, install rollback, budget",
    )
    add_config(check)
    check.add_argument(
        "--examples",
        metavar="N",
        type=_positive,
        default=DEFAULT_EXAMPLES,
        help=f"examples per property (default {DEFAULT_EXAMPLES})",
    )
    check.add_argument("--seed", metavar="S", type=int, default=None, help="replay a run: the seed it printed")
    check.add_argument("--verbose", action="store_true", help="let the Gateways' own output through")
    check.set_defaults(handler=lambda args: _cmd_check(args, config_path))

    new = commands.add_parser("new", help="scaffold an extension package whose nox passes as generated")
    new.add_argument("name", metavar="NAME", help="the entry-point and import name, e.g. acme_audit")
    new.add_argument("--directory", metavar="DIR", default=".", help="where to create it (default: here)")
    new.add_argument(
        "--full-stack",
        action="store_true",
        help="a full-stack plugin (contract 0.2.6): a model tool, a backend action, a page, a setting",
    )
    new.set_defaults(handler=_cmd_new)
