"""Which process owns a run: this process's identity on run rows, and whether another's is
gone (what startup recovery, ``recovery``, asks of each live run it finds)."""

from __future__ import annotations

import os
import socket
import uuid

__all__ = ["PROCESS_OWNER", "owner_is_dead"]

PROCESS_OWNER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
"""This process's identity on run rows: host, pid and a per-start token (pids get reused)."""


def owner_is_dead(owner: str | None, *, me: str = PROCESS_OWNER) -> bool:
    """Whether the process recorded as ``owner`` can no longer be executing its runs.

    Conservative about other machines: a run owned by a process on another host is left
    alone here (on PostgreSQL the heartbeats of ``runtime.presence`` tell those). On this
    host a missing pid, or our own pid with a different start token (a previous
    incarnation), is dead.
    """
    if owner is None:
        return True
    host, _, rest = owner.partition(":")
    pid_text, _, _token = rest.partition(":")
    if host != socket.gethostname():
        return False
    if owner == me:
        return False
    try:
        pid = int(pid_text)
    except ValueError:
        return True
    if pid == os.getpid():
        return True  # same pid, different token: an earlier process that used our pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
