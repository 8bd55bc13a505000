"""Schedules and clocks: when a cron's next tick is, and what "now" is.

A schedule is five cron fields (minute hour day month weekday), as LangGraph Platform takes
them, read by croniter; a sixth field (seconds) or a macro croniter would also accept is
refused, so a schedule means the same here as on LangGraph's server. Ticks are computed in
the cron's IANA ``timezone`` (None: UTC) and stored in UTC.

The clock is the system's, except under ``DEERFLOW_TEST_CRON_CLOCK=<epoch>:<scale>`` (tests
only): time then runs ``scale`` times faster from the Unix time ``epoch``, the same for every
process given the same value: at scale 120 ten minutes of every-minute ticks take five seconds, and two
Gateways still agree on which tick is due.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

__all__ = [
    "CLOCK_VARIABLE",
    "Clock",
    "ScaledClock",
    "ScheduleError",
    "SystemClock",
    "check_schedule",
    "clock_from_env",
    "next_tick",
]

CLOCK_VARIABLE = "DEERFLOW_TEST_CRON_CLOCK"


class ScheduleError(ValueError):
    """A schedule or time zone that cannot be used; the message names the field."""


def _zone(timezone: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(timezone or "UTC")
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleError(f"timezone: {timezone!r} is not an IANA time zone (e.g. 'Europe/Paris')") from exc


def check_schedule(schedule: str, timezone: str | None = None) -> None:
    """Raise :class:`ScheduleError` unless ``schedule`` is five valid cron fields and
    ``timezone`` an IANA zone (or None)."""
    _zone(timezone)
    fields = schedule.split()
    if len(fields) != 5:
        raise ScheduleError(
            f"schedule: {schedule!r} has {len(fields)} field(s); a cron schedule has five "
            "(minute hour day-of-month month day-of-week, e.g. '0 9 * * 1-5')"
        )
    if not croniter.is_valid(schedule):
        raise ScheduleError(f"schedule: {schedule!r} is not a valid cron expression")
    next_tick(schedule, timezone, datetime.now(UTC))  # one that never comes (Feb 30) is refused too


def next_tick(schedule: str, timezone: str | None, after: datetime) -> datetime:
    """The first tick of ``schedule`` strictly after ``after``, in UTC; :class:`ScheduleError`
    when croniter finds none (a day that never comes)."""
    local = after.astimezone(_zone(timezone))
    try:
        tick: datetime = croniter(schedule, local).get_next(datetime)
    except CroniterBadDateError as exc:
        raise ScheduleError(f"schedule: {schedule!r} has no date to fire on ({exc})") from exc
    return tick.astimezone(UTC)


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, in UTC."""
        ...

    def seconds_until(self, when: datetime) -> float:
        """Real seconds to sleep until ``when`` (0 when it has passed)."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def seconds_until(self, when: datetime) -> float:
        return max(0.0, (when - self.now()).total_seconds())


class ScaledClock:
    """Time ``scale`` times faster than the system's from the Unix time ``epoch`` (tests)."""

    def __init__(self, epoch: float, scale: float) -> None:
        self.epoch = epoch
        self.scale = scale

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.epoch + (time.time() - self.epoch) * self.scale, UTC)

    def seconds_until(self, when: datetime) -> float:
        return max(0.0, (when - self.now()).total_seconds() / self.scale)


def clock_from_env() -> Clock:
    """The system clock, or the scaled one ``DEERFLOW_TEST_CRON_CLOCK`` names."""
    value = os.environ.get(CLOCK_VARIABLE)
    if not value:
        return SystemClock()
    epoch, _, scale = value.partition(":")
    try:
        clock = ScaledClock(float(epoch), float(scale or 1))
    except ValueError:
        clock = ScaledClock(0.0, 0.0)
    if clock.scale <= 0:
        raise ScheduleError(f"{CLOCK_VARIABLE}={value!r}: expected '<unix epoch>:<scale>' with a scale above 0")
    return clock
