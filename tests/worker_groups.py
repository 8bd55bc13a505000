"""Which test files pytest-xdist must run on one worker.

``nox -s tests`` runs the suite with ``-n 2 --dist loadfile``: each file on one worker, in
order, as a serial run has it (its module-scoped servers start once). Some files must not run
beside each other either, so each group below counts as one file (``worker_scheduling``).
pytest-xdist's own ``loadgroup`` cannot do it: it tags node ids, which pytest 9.2's structured
ids no longer let it change (pytest-xdist issue 1386), and it then spreads the tests one by
one, saying nothing.
"""

from __future__ import annotations

__all__ = ["SAME_WORKER", "scope_of"]

SAME_WORKER = {
    # They pip-install packages into the environment the suite runs in (and uninstall them at
    # the worker's end), or diff its installed distributions: an install must not land in the
    # middle of another file's cases.
    "site-packages": ("e2e/", "cli/test_install_remove.py"),
    # Each drives a Chromium: two at once would be all of a small machine for nothing.
    "browser": ("gateway/test_gateway_docs.py", "gateway/test_browser_client.py"),
}
"""Group name -> paths under tests/ (a folder ends with ``/``) whose files one worker runs."""


def scope_of(nodeid: str) -> str:
    """The unit one worker runs a test in: its group when its file is in one, else its file."""
    path = nodeid.split("::", 1)[0]
    under_tests = path.removeprefix("tests/")
    for group, paths in SAME_WORKER.items():
        if under_tests.startswith(paths):
            return f"group:{group}"
    return path
