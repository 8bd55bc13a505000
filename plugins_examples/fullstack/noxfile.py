# `nox` runs this extension's tests, ordinary and property-based, in a fresh virtualenv where
# the package is built and installed with its "test" extra (deerflow-ext[test]: the author kit).
# The host it tests against: DEERFLOW_EXT_SOURCE if set, else `host` under [tool.deerflow-ext]
# in pyproject.toml (`extensions new` records there where the host that generated the package
# was installed from), else the released deerflow-ext. A source is a checkout, a wheel (the
# contract's wheel beside it: `deerflow-ext wheels DIR`), a directory of such wheels, or a
# requirement (a VCS URL). The same file serves every extension package: generated ones and
# plugins_examples/*.
from __future__ import annotations

import glob
import os
import tomllib

import nox


def _recorded_host() -> str:
    with open("pyproject.toml", "rb") as project:
        return str(tomllib.load(project).get("tool", {}).get("deerflow-ext", {}).get("host", ""))


def _host(source: str) -> list[str]:
    """pip arguments that install the host from ``source`` ([] for the released one)."""
    if not source:
        return []
    if os.path.isfile(source):  # a wheel: its contract wheel is found beside it
        return ["--find-links", os.path.dirname(os.path.abspath(source)), os.path.abspath(source)]
    if os.path.isdir(source) and glob.glob(os.path.join(source, "deerflow_ext-*.whl")):
        return ["--find-links", os.path.abspath(source)]  # a directory of wheels
    if os.path.isdir(source):  # a checkout
        return [os.path.abspath(source)]
    return [source]


@nox.session
def tests(session: nox.Session) -> None:
    source = os.environ.get("DEERFLOW_EXT_SOURCE") or _recorded_host()
    session.install(*_host(source), ".[test]")
    session.run("pytest", *session.posargs)
