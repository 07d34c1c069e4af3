"""Cron expressions read in an IANA time zone, turned into the UTC instants a schedule fires at.

Evaluation is cronsim's (maintained, typed, used in production by Healthchecks.io), which follows
Debian's cron, daylight-saving changes included (docs/concepts/schedules.md#daylight-saving-time):

- **Spring forward (a gap)**: an expression with a fixed hour whose wall-clock time does not
  exist that day fires at the first instant after the jump (``30 2 * * *`` → 03:00); expressions
  that run every hour or more often simply have no instants in the missing hour.
- **Fall back (a fold)**: an expression with a fixed hour fires once, in the first pass of the
  repeated hour; expressions that run every hour or more often fire in both passes, each pass
  being its own UTC instant.

Everything else here is bookkeeping around that rule: instants are naive UTC (the store's
convention), strictly increasing forwards and strictly decreasing backwards — a start point inside
a fold can make cronsim offer an instant on the wrong side of it, and such an instant is dropped.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from .model import InvalidSchedule

#: The shorthands Kubernetes CronJob accepts, as the five fields they stand for.
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
CRON_HELP = (
    "use five fields (minute hour day-of-month month day-of-week), optionally a leading "
    "seconds field, or one of " + ", ".join(MACROS)
)
UTC = dt.UTC


def zone_of(time_zone: str) -> ZoneInfo:
    """The IANA zone named ``time_zone``; InvalidSchedule names the field and the fix."""
    try:
        return _zone(time_zone)
    except (ZoneInfoNotFoundError, ValueError, TypeError) as exc:
        raise InvalidSchedule(
            "time_zone",
            f"{time_zone!r} is not an IANA time zone; use a name such as 'Europe/Berlin', "
            "'America/New_York' or 'UTC'",
        ) from exc


@cache
def _zone(time_zone: str) -> ZoneInfo:
    if not time_zone or time_zone != time_zone.strip():
        raise ValueError(time_zone)
    return ZoneInfo(time_zone)


def to_utc(value: dt.datetime) -> dt.datetime:
    """Naive UTC (the store's form) of an aware instant; a naive one is taken as UTC."""
    if value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class Cron:
    """A validated expression in its zone. Build it with :func:`parse`."""

    expression: str  # as written (a macro stays a macro)
    fields: str  # what cronsim evaluates
    zone: ZoneInfo

    def local(self, instant: dt.datetime) -> dt.datetime:
        """The wall-clock time of a UTC instant in this schedule's zone."""
        return instant.replace(tzinfo=UTC).astimezone(self.zone)

    def after(self, instant: dt.datetime) -> Iterator[dt.datetime]:
        """Instants strictly after ``instant`` (naive UTC), oldest first."""
        last = instant
        for local in CronSim(self.fields, self.local(instant)):
            found = to_utc(local)
            if found > last:
                last = found
                yield found

    def before(self, instant: dt.datetime) -> Iterator[dt.datetime]:
        """Instants strictly before ``instant`` (naive UTC), newest first."""
        last = instant
        for local in CronSim(self.fields, self.local(instant), reverse=True):
            found = to_utc(local)
            if found < last:
                last = found
                yield found

    def next_after(
        self, instant: dt.datetime, *, end_at: dt.datetime | None = None
    ) -> dt.datetime | None:
        """The first instant after ``instant`` and not after ``end_at``; None when there is none
        (the bound passed, or the expression never matches again within cronsim's 50 years)."""
        found = next(self.after(instant), None)
        if found is None or (end_at is not None and found > end_at):
            return None
        return found

    def first_from(
        self,
        now: dt.datetime,
        *,
        start_at: dt.datetime | None = None,
        end_at: dt.datetime | None = None,
    ) -> dt.datetime | None:
        """Where a new, edited or resumed schedule starts: the first instant after ``now`` and
        not before ``start_at`` (an instant equal to ``start_at`` counts)."""
        origin = now
        if start_at is not None and start_at > now:
            origin = start_at - dt.timedelta(microseconds=1)
        return self.next_after(origin, end_at=end_at)


def parse(expression: str, time_zone: str) -> Cron:
    """Validate ``expression`` in ``time_zone``; InvalidSchedule says which field and why."""
    zone = zone_of(time_zone)
    written = " ".join(expression.split())
    if written.upper().startswith(("TZ=", "CRON_TZ=")):
        raise InvalidSchedule(
            "cron", f"{expression!r}: give the zone in time_zone, not inside the expression"
        )
    fields = MACROS.get(written.lower(), written)
    try:
        probe = CronSim(fields, dt.datetime(2000, 1, 1, tzinfo=zone))
    except CronSimError as exc:
        raise InvalidSchedule(
            "cron", f"{expression!r} is not a valid cron expression ({exc}); {CRON_HELP}"
        ) from exc
    if next(probe, None) is None:
        raise InvalidSchedule("cron", f"{expression!r} never matches a date; {CRON_HELP}")
    return Cron(written, fields, zone)


@dataclass(frozen=True)
class PreviewInstant:
    at: dt.datetime  # naive UTC
    local: dt.datetime  # aware, in the schedule's zone


def preview(
    cron: Cron,
    *,
    after: dt.datetime,
    count: int,
    start_at: dt.datetime | None = None,
    end_at: dt.datetime | None = None,
) -> list[PreviewInstant]:
    """The next ``count`` fire instants after ``after``, within the bounds."""
    first = cron.first_from(after, start_at=start_at, end_at=end_at)
    if first is None:
        return []
    found = itertools.chain([first], cron.after(first))
    instants = itertools.takewhile(lambda at: end_at is None or at <= end_at, found)
    return [PreviewInstant(at, cron.local(at)) for at in itertools.islice(instants, count)]
