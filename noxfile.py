"""Project sessions: ``nox`` runs the tests, the architecture contracts, types and lint.

Each session builds its own virtualenv from ``pyproject.toml`` so a clean clone needs
nothing but ``nox`` itself; ``bench`` is opt-in because it measures, it does not check.
"""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "arch", "types", "lint"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

PYTHON = "3.11"


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole suite; the example extensions are installed for real, as an operator would."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs, env={"PYTHONDONTWRITEBYTECODE": "1"})


@nox.session(python=PYTHON)
def arch(session: nox.Session) -> None:
    """DESIGN.md §2 dependency rules, enforced by import-linter."""
    session.install("-e", ".", "import-linter")
    session.run("lint-imports")


@nox.session(python=PYTHON)
def types(session: nox.Session) -> None:
    """mypy, strict on the public contract."""
    session.install("-e", ".", "mypy")
    session.run("mypy")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "src", "tests", "benchmarks", "plugins_examples", "noxfile.py")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks print ratios measured side by side in one run (see benchmarks/RESULTS.md)."""
    session.install("-e", ".[test]", "stevedore")
    # scaleout.py needs PostgreSQL, so it runs only when named: nox -s bench -- scaleout
    names = session.posargs or ["notify", "run_overhead", "load", "gateway"]
    for name in names:
        session.run("python", f"benchmarks/{name}.py")
