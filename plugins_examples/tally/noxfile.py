# `nox` runs this extension's tests, ordinary and property-based, in a fresh virtualenv where
# the package is built and installed with its "test" extra (deerflow-ext[test]: the author kit).
# DEERFLOW_EXT_SOURCE names the host to test against instead of the released deerflow-ext:
# a checkout or a wheel (DEERFLOW_EXT_SOURCE=../deerflow-ext nox), or a requirement.
# The same file serves every extension package: generated ones and plugins_examples/*.
from __future__ import annotations

import os

import nox


@nox.session
def tests(session: nox.Session) -> None:
    host = os.environ.get("DEERFLOW_EXT_SOURCE", "deerflow-ext")
    session.install(os.path.abspath(host) if os.path.exists(host) else host, ".[test]")
    session.run("pytest", *session.posargs)
