"""The loop watchdog's frame reading (``extensions/boundary/loopwatch.py``).

``thread_frame`` is the host's one use of CPython's ``sys._current_frames``: if that ever
stops answering, this fails first, naming it.
"""

from __future__ import annotations

import sys
import threading
from types import FrameType

from deerflow_ext.extensions.boundary.loopwatch import (
    DOWNSTREAM,
    RunningHook,
    register_site,
    running_hook,
    thread_frame,
)


def test_thread_frame_reads_another_threads_stack() -> None:
    assert hasattr(sys, "_current_frames"), "CPython's sys._current_frames is gone: loopwatch.thread_frame must change"
    inside, release = threading.Event(), threading.Event()

    def parked() -> None:
        inside.set()
        release.wait(10)

    worker = threading.Thread(target=parked)
    worker.start()
    try:
        assert inside.wait(10)
        frame = thread_frame(worker.ident or 0)
        names = []
        while frame is not None:
            names.append(frame.f_code.co_name)
            frame = frame.f_back
        assert "parked" in names, names
    finally:
        release.set()
        worker.join(10)
    assert thread_frame(-1) is None


def _site(frame: FrameType) -> RunningHook:
    return RunningHook(frame.f_locals["extension"], "hook")


def _handler(frame: FrameType) -> RunningHook:
    return DOWNSTREAM


def outer_site(extension: str, inner: object) -> RunningHook | None:
    return inner()  # type: ignore[operator]


def tracked_handler(inner: object) -> RunningHook | None:
    return inner()  # type: ignore[operator]


register_site(outer_site, _site)
register_site(tracked_handler, _handler)


def _here() -> RunningHook | None:
    return running_hook(sys._getframe())


def test_the_innermost_site_is_blamed() -> None:
    assert running_hook(sys._getframe()) is None
    assert outer_site("a", _here) == RunningHook("a", "hook")
    assert outer_site("a", lambda: outer_site("b", _here)) == RunningHook("b", "hook")


def test_code_inside_a_handler_is_not_the_enclosing_sites() -> None:
    # a's wrap hook called its handler, which runs b's hook: b is blamed, not a
    assert outer_site("a", lambda: tracked_handler(lambda: outer_site("b", _here))) == RunningHook("b", "hook")
    # a's handler runs host code: a is not blamed, the next site out is (z's code called a's
    # directly here, with no handler between them)
    assert outer_site("z", lambda: outer_site("a", lambda: tracked_handler(_here))) == RunningHook("z", "hook")
