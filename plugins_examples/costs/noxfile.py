"""``nox`` runs this extension's tests, ordinary and property-based, in a fresh virtualenv.

The tests use the author kit that ships with ``deerflow-ext[test]`` (the ``deerflow_host``
fixture and ``deerflow_ext.testing``'s property checks). ``DEERFLOW_EXT_SOURCE`` names the
host to test against instead of the one the package depends on — a checkout, a wheel or a
requirement — e.g. ``DEERFLOW_EXT_SOURCE=../deerflow-ext nox``.
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """The package built and installed (not editable), then its tests."""
    source = os.environ.get("DEERFLOW_EXT_SOURCE")
    if source:
        session.install(f"{Path(source).resolve()}[test]" if Path(source).is_dir() else source)
    session.install(".[test]")
    session.run("pytest", *session.posargs)
