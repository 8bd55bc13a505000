"""Project sessions: ``nox`` runs the tests, the architecture contracts, types, lint and the
author's workflow end to end (``scaffold``).

Each session builds its own virtualenv from ``pyproject.toml`` so a clean clone needs
nothing but ``nox`` itself; ``bench`` is opt-in because it measures, it does not check, and
``extensions`` is the operator's session of docs/TESTING.md, run here on the examples.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nox

nox.options.sessions = ["tests", "arch", "types", "lint", "scaffold"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"
# The suite runs on every Python the host supports (pyproject's requires-python); the other
# sessions check source, which one interpreter does.
SUPPORTED = ["3.11", "3.12"]
# One ruff for every machine: a newer ruff formats and lints differently, so the lint session
# would pass here and fail elsewhere. Raise it on purpose, with the tree reformatted.
RUFF = "ruff==0.17.6"
LINTED = ("src", "tests", "benchmarks", "plugins_examples", "examples", "contract", "noxfile.py")
ROOT = Path(__file__).resolve().parent


PARALLEL = ("-n", "2", "--dist", "loadfile")
"""The suite on two pytest-xdist workers: a module stays on one worker, and the modules that
must not overlap share one (tests/worker_groups.py, ``SAME_WORKER``). Two, not one per core: CI's
machine has two, and more would only make every case wait longer on each. ``-n 0`` in the
session's arguments runs it serially (a later option wins)."""


@nox.session(python=SUPPORTED)
def tests(session: nox.Session) -> None:
    """The whole suite; the example extensions are installed for real, as an operator would.
    The browser tests need /usr/bin/chromium and the test page's npm packages (``.ci/run``)."""
    # pytest-xdist here, not in the test extra: that is the author kit, which needs no workers.
    session.install("-e", ".[test,browser]", "pytest-xdist>=3.5")
    session.run("pytest", *PARALLEL, *session.posargs, env={"PYTHONDONTWRITEBYTECODE": "1"})


@nox.session(python=PYTHON)
def arch(session: nox.Session) -> None:
    """DESIGN.md §2 dependency rules, enforced by import-linter."""
    session.install("-e", ".", "import-linter")
    # No cache: a cached import graph once kept a broken contract green on one machine.
    session.run("lint-imports", "--no-cache")


@nox.session(python=PYTHON)
def types(session: nox.Session) -> None:
    """mypy on the whole of src/ (pyproject.toml): strict on the public contract, every body
    checked on the host. The test extra brings the author kit's pytest and hypothesis; nox is
    what the scaffold's template noxfile imports."""
    session.install("-e", ".[test]", "mypy", "nox")
    session.run("mypy")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """The pinned ruff's formatting and lint rules (pyproject.toml), on everything we write."""
    session.install(RUFF)
    session.run("ruff", "format", "--check", *LINTED)
    session.run("ruff", "check", *LINTED)


@nox.session(python=PYTHON)
def scaffold(session: nox.Session) -> None:
    """`deerflow-ext extensions new`: the generated package is built, installed and its own nox passes.

    Twice. From this checkout (DEERFLOW_EXT_SOURCE), offline but for the package index. Then
    as an author outside the repository: `deerflow-ext wheels --with-dependencies` fills a
    directory under the system's temporary directory, a fresh virtualenv there installs the
    host from those wheels, `extensions new` (run from that host) generates the package
    there, and the package's own nox runs with no index at all (PIP_NO_INDEX) and nothing
    installed pointing into this clone.
    """
    session.install("-e", ".", "nox")
    work = Path(session.create_tmp()) / "scaffold"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    session.run("deerflow-ext", "extensions", "new", "acme_counts", "--directory", str(work))
    with session.chdir(work / "acme-counts"):
        session.run("python", "-m", "nox", env={"DEERFLOW_EXT_SOURCE": str(ROOT)})
    # And a full-stack plugin: its static/ page must reach the wheel the package's nox installs.
    session.run("deerflow-ext", "extensions", "new", "--full-stack", "acme_notes", "--directory", str(work))
    with session.chdir(work / "acme-notes"):
        session.run("python", "-m", "nox", env={"DEERFLOW_EXT_SOURCE": str(ROOT)})
    _scaffold_outside_the_clone(session)


def _scaffold_outside_the_clone(session: nox.Session) -> None:
    outside = Path(tempfile.mkdtemp(prefix="deerflow-author-")).resolve()
    try:
        wheels = outside / "wheels"
        session.run("deerflow-ext", "wheels", str(wheels), "--source", str(ROOT), "--with-dependencies")
        home = outside / "venv"
        session.run("python", "-m", "venv", str(home))  # the session's interpreter, as the wheels'
        python, deerflow = str(home / "bin" / "python"), str(home / "bin" / "deerflow-ext")
        offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels), "DEERFLOW_EXT_SOURCE": ""}
        (host,) = wheels.glob("deerflow_ext-*.whl")
        session.run(python, "-m", "pip", "install", "-q", str(host), "nox", env=offline, external=True)
        leaks = [
            str(path)
            for path in (home / "lib").rglob("*.dist-info/*")
            if path.name in ("METADATA", "direct_url.json") and str(ROOT) in path.read_text(errors="replace")
        ]
        if leaks:
            session.error(f"installed metadata points into the clone: {leaks}")
        author = outside / "author"
        author.mkdir()
        session.run(deerflow, "extensions", "new", "acme_hello", "--directory", str(author), env=offline, external=True)
        with session.chdir(author / "acme-hello"):
            session.run(python, "-m", "nox", env=offline, external=True)
    finally:
        shutil.rmtree(outside, ignore_errors=True)


@nox.session(python=PYTHON)
def extensions(session: nox.Session) -> None:
    """The operator's property check (docs/TESTING.md), on config.example.yaml with every example enabled."""
    examples = sorted(str(p) for p in (ROOT / "plugins_examples").iterdir() if p.is_dir())
    session.install("-e", ".[test]", *examples)
    config = Path(session.create_tmp()) / "config.yaml"
    shutil.copyfile(ROOT / "config.example.yaml", config)
    for name in ("observers", "audit", "costs", "otel"):
        session.run("deerflow-ext", "extensions", "enable", name, "--config", str(config))
    session.run("deerflow-ext", "extensions", "check", "--config", str(config), *session.posargs)


@nox.session(python=PYTHON)
def chaos(session: nox.Session) -> None:
    """Reliability under load and faults (docs/RELIABILITY.md): real Gateways next to a Redis
    and a PostgreSQL cluster the cases kill, and the machine's PostgreSQL and Redis. Loads are
    scaled for CI; DEERFLOW_CHAOS_FULL=1 runs the issue's full figures."""
    session.install("-e", ".[test]")
    env = {"DEERFLOW_CHAOS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    session.run("pytest", "tests/chaos", *session.posargs, env=env)


PEER = "langgraph-cli[inmem]"


@contextmanager
def _langgraph_dev(
    session: nox.Session, graph: Path, auth: Path | None = None, env: dict[str, str] | None = None
) -> Iterator[str]:
    """LangGraph's own server on ``graph`` (as ``lead_agent``), in a virtualenv of its own (its
    pins are not ours, one for the session's servers), on a free loopback port; yields its API
    root and stops it afterwards. ``auth``: a custom-auth file (its ``auth`` object), loaded as
    langgraph.json's ``auth.path`` says; ``env``: more environment for the server."""
    tmp = Path(session.create_tmp()).resolve()
    python = str(tmp / "peer-venv" / "bin" / "python")
    if not (tmp / "peer-venv" / "bin" / "python").exists():
        venv.create(tmp / "peer-venv", with_pip=True)
    session.run(python, "-m", "pip", "install", "-q", PEER, "langchain", external=True)
    home = tmp / ("peer" if auth is None else f"peer-{auth.stem}")
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    shutil.copyfile(graph, home / "peer_graph.py")
    document: dict[str, Any] = {"dependencies": ["."], "graphs": {"lead_agent": "./peer_graph.py:graph"}}
    if auth is not None:
        shutil.copyfile(auth, home / auth.name)
        document["auth"] = {"path": f"./{auth.name}:auth"}
    (home / "langgraph.json").write_text(json.dumps(document))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (home / "server.log").open("wb")
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environment.update(LANGSMITH_TRACING="false", LANGGRAPH_CLI_NO_ANALYTICS="1", **(env or {}))
    command = [str(tmp / "peer-venv" / "bin" / "langgraph"), "dev", "--no-browser", "--no-reload", "--port", str(port)]
    server = subprocess.Popen(command, cwd=home, env=environment, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None or time.monotonic() > deadline:
                session.error(f"langgraph dev did not start; see {home / 'server.log'}")
            try:
                with urllib.request.urlopen(f"{url}/ok", timeout=2):
                    break
            except urllib.error.HTTPError:  # it answers (a custom auth may refuse /ok)
                break
            except OSError:
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(30)


@nox.session(python=PYTHON)
def compat(session: nox.Session) -> None:
    """The LangGraph Platform suite (tests/platform_api) against LangGraph's own server
    (``langgraph dev`` on tests/platform_api/peer_graph.py): where we diverge from LangGraph, a
    case fails here unless the divergence is on purpose and says so. Opt-in: it installs the
    peer from PyPI."""
    session.install("-e", ".[test]")
    suite = ROOT / "tests" / "platform_api"
    graph = suite / "peer_graph.py"
    secret = {"AUTH_JWT_SECRET": "compat-session-jwt-secret-0123456789abcdef"}
    with (
        _langgraph_dev(session, graph) as url,
        # The custom-auth cases' servers (test_custom_auth_compat.py): the same graph behind the
        # tutorial-style auth file, and behind the shipped JWT example.
        _langgraph_dev(session, graph, auth=suite / "tutorial_auth.py") as auth_url,
        _langgraph_dev(session, graph, auth=ROOT / "examples" / "auth" / "auth.py", env=secret) as jwt_url,
    ):
        tests = session.posargs or ["tests/platform_api"]
        urls = {"DEERFLOW_COMPAT_URL": url, "DEERFLOW_COMPAT_AUTH_URL": auth_url, "DEERFLOW_COMPAT_JWT_URL": jwt_url}
        session.run("pytest", *tests, env={**urls, **secret})


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks print ratios measured side by side in one run (see benchmarks/RESULTS.md)."""
    session.install("-e", ".[test]", "stevedore")
    # scaleout.py needs PostgreSQL, so it runs only when named: nox -s bench -- scaleout
    names = session.posargs or ["notify", "run_overhead", "metrics", "load", "gateway", "sse"]
    for name in names:
        session.run("python", f"benchmarks/{name}.py")
