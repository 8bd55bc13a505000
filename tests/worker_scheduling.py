"""pytest-xdist's ``loadfile`` scheduling with ``worker_groups``' files as one unit.

Imported only under pytest-xdist (tests/conftest.py's ``pytest_xdist_make_scheduler``):
plain ``pytest`` needs no xdist installed.
"""

from __future__ import annotations

from xdist.scheduler import LoadFileScheduling

from worker_groups import scope_of

__all__ = ["FileGroupScheduling"]

if not callable(getattr(LoadFileScheduling, "_split_scope", None)):
    raise RuntimeError(
        "pytest-xdist's LoadFileScheduling no longer has _split_scope(nodeid), which "
        "tests/worker_scheduling.py overrides to keep files together: update it for this pytest-xdist"
    )


class FileGroupScheduling(LoadFileScheduling):
    """``--dist loadfile`` with the files of a ``worker_groups.SAME_WORKER`` group as one unit."""

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)
