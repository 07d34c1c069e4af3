"""Which due instant to decide next, and how: pure rules, no database.

The firing transaction asks :func:`decide` about the schedule's oldest due instant
(``next_fire_at``) and gets either one instant to fire or a run of consecutive instants to record
as missed. Asked again after each step, the rules give the same answer for every instant
whichever replica asks, so each instant is decided exactly once (invariant 5).

- **On time** — at most :data:`MISFIRE_GRACE` late: fires.
- **Misfired** — later than that (no scheduler ran: an outage, a deploy, an overloaded loop):
  ``misfirePolicy`` decides. Skip fires none of the late ones (on-time ones after them fire);
  FireOnce fires only the latest instant due now, late or not, as a CronJob fires only its most
  recent missed time; CatchUp fires the latest ``catchUpLimit`` late ones, oldest first, and the
  on-time ones. The others are one MISSED run.
- **startingDeadlineSeconds** then turns any instant chosen to fire but later than that into
  MISSED, as in a Kubernetes CronJob.
"""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass

from .cron import Cron
from .model import MAX_RUN, MisfirePolicy, Reason

#: How late an instant may be decided and still count as on time.
MISFIRE_GRACE = dt.timedelta(seconds=60)


@dataclass(frozen=True)
class Policies:
    misfire: MisfirePolicy
    catch_up_limit: int
    starting_deadline_seconds: int | None
    end_at: dt.datetime | None


@dataclass(frozen=True)
class Fire:
    instant: dt.datetime
    reason: Reason


@dataclass(frozen=True)
class Miss:
    first: dt.datetime
    through: dt.datetime
    instants: int
    reason: Reason
    message: str


Decision = Fire | Miss


def decide(cron: Cron, policies: Policies, first: dt.datetime, now: dt.datetime) -> Decision:
    """The decision for ``first`` (the oldest undecided instant, due: ``first <= now``)."""
    if now - first <= MISFIRE_GRACE:
        return _deadline(Fire(first, Reason.SCHEDULED), policies, now)
    horizon = now if policies.end_at is None else min(now, policies.end_at)
    kept = _kept_instants(cron, policies, first, horizon, now)
    if kept and kept[0] == first:
        reason = (
            Reason.FIRE_ONCE if policies.misfire is MisfirePolicy.FIRE_ONCE else Reason.CATCH_UP
        )
        return _deadline(Fire(first, reason), policies, now)
    stop = kept[0] if kept else _first_on_time(cron, first, horizon, now)
    return _missed_run(cron, policies, first, stop, horizon, now)


def _kept_instants(
    cron: Cron, policies: Policies, first: dt.datetime, horizon: dt.datetime, now: dt.datetime
) -> list[dt.datetime]:
    """The instants between ``first`` and ``horizon`` the misfire policy fires out of turn, oldest
    first: the late ones CatchUp keeps, or the one FireOnce keeps (the latest due, late or not)."""
    if policies.misfire is MisfirePolicy.SKIP:
        return []
    wanted = 1 if policies.misfire is MisfirePolicy.FIRE_ONCE else policies.catch_up_limit
    newest_first = itertools.takewhile(
        lambda at: at >= first, cron.before(horizon + dt.timedelta(microseconds=1))
    )
    if policies.misfire is MisfirePolicy.FIRE_ONCE:
        latest = next(newest_first, None)
        return [] if latest is None else [latest]
    late_ones = (at for at in newest_first if now - at > MISFIRE_GRACE)
    return sorted(itertools.islice(late_ones, wanted))


def _first_on_time(
    cron: Cron, first: dt.datetime, horizon: dt.datetime, now: dt.datetime
) -> dt.datetime | None:
    """The oldest due instant that is not late, if any (where a Skip run ends)."""
    on_time = None
    for at in cron.before(horizon + dt.timedelta(microseconds=1)):
        if at < first or now - at > MISFIRE_GRACE:
            break
        on_time = at
    return on_time


def _missed_run(
    cron: Cron,
    policies: Policies,
    first: dt.datetime,
    stop: dt.datetime | None,
    horizon: dt.datetime,
    now: dt.datetime,
) -> Miss:
    """Instants from ``first`` up to (not including) ``stop``, or through ``horizon``."""
    through, count = run_of(cron, first, horizon, stop=stop)
    reason = {
        MisfirePolicy.SKIP: Reason.MISFIRE_SKIP,
        MisfirePolicy.FIRE_ONCE: Reason.MISFIRE_FIRE_ONCE,
        MisfirePolicy.CATCH_UP: Reason.MISFIRE_CATCH_UP_LIMIT,
    }[policies.misfire]
    what = {
        MisfirePolicy.SKIP: "misfirePolicy Skip fires none of them",
        MisfirePolicy.FIRE_ONCE: "misfirePolicy FireOnce fires only the latest",
        MisfirePolicy.CATCH_UP: f"beyond catchUpLimit {policies.catch_up_limit}",
    }[policies.misfire]
    late = (now - through).total_seconds()
    message = (
        f"{_instants(count)} {_span(first, through)} came due while no scheduler ran "
        f"(the newest {late:.0f}s late); {what}"
    )
    return Miss(first, through, count, reason, message)


def run_of(
    cron: Cron, first: dt.datetime, horizon: dt.datetime, *, stop: dt.datetime | None = None
) -> tuple[dt.datetime, int]:
    """(last instant, count) of the run of consecutive instants from ``first`` that ends before
    ``stop`` and not after ``horizon``, at most :data:`MAX_RUN` long."""
    through, count = first, 1
    for at in cron.after(first):
        if (stop is not None and at >= stop) or at > horizon or count >= MAX_RUN:
            break
        through, count = at, count + 1
    return through, count


def _deadline(fire: Fire, policies: Policies, now: dt.datetime) -> Decision:
    deadline = policies.starting_deadline_seconds
    late = (now - fire.instant).total_seconds()
    if deadline is None or late <= deadline:
        return fire
    message = f"{late:.0f}s late, past startingDeadlineSeconds {deadline}"
    return Miss(fire.instant, fire.instant, 1, Reason.STARTING_DEADLINE_EXCEEDED, message)


def _instants(count: int) -> str:
    return "1 instant" if count == 1 else f"{count} instants"


def _span(first: dt.datetime, through: dt.datetime) -> str:
    start = f"{first:%Y-%m-%dT%H:%M:%S}Z"
    return f"({start})" if first == through else f"({start} .. {through:%Y-%m-%dT%H:%M:%S}Z)"
