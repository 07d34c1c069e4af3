"""The invariant checker behind ``orbit admin verify``: read-only queries that look for states
the seed's invariants forbid. An empty report means none were found."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from orbit_store.pulse.model import LEGAL_TRANSITIONS, TaskState
from orbit_store.pulse.views.bookkeeping import BOOKKEEPING_CHECKS
from orbit_store.pulse.views.bookkeeping import ids as _ids
from orbit_store.pulse.views.bookkeeping import scoped as _scoped

from ..schema import (
    dispatch_fence,
    schedule_occurrences,
    schedules,
    task_attempts,
    task_events,
    tasks,
)
from ..weave.invariants import WORKFLOW_CHECKS

LIVE_ATTEMPT = ("LEASED", "RUNNING")
EXAMPLES = 10


@dataclass(frozen=True)
class CheckResult:
    invariant: str
    description: str
    violations: int
    examples: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class VerifyReport:
    checks: dict[str, CheckResult]

    @property
    def clean(self) -> bool:
        return all(check.violations == 0 for check in self.checks.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "clean": self.clean,
            "violations": sum(c.violations for c in self.checks.values()),
            "checks": {
                name: {
                    "invariant": c.invariant,
                    "description": c.description,
                    "violations": c.violations,
                    "examples": c.examples,
                }
                for name, c in self.checks.items()
            },
        }


def _multiple_live_attempts(conn: sa.Connection, ns: str | None) -> list[str]:
    query = (
        sa.select(task_attempts.c.task_id)
        .where(task_attempts.c.state.in_(LIVE_ATTEMPT))
        .group_by(task_attempts.c.task_id)
        .having(sa.func.count() > 1)
    )
    return _ids(conn, _scoped(query, task_attempts, ns))


def _live_attempt_on_settled_task(conn: sa.Connection, ns: str | None) -> list[str]:
    query = (
        sa.select(tasks.c.id)
        .join(task_attempts, task_attempts.c.task_id == tasks.c.id)
        .where(
            task_attempts.c.state.in_(LIVE_ATTEMPT),
            tasks.c.state.not_in([TaskState.LEASED.value, TaskState.RUNNING.value]),
        )
    )
    return _ids(conn, _scoped(query, tasks, ns))


def _current_attempt_mismatch(conn: sa.Connection, ns: str | None) -> list[str]:
    attempt = task_attempts.alias("a")
    query = (
        sa.select(tasks.c.id)
        .outerjoin(attempt, attempt.c.id == tasks.c.current_attempt_id)
        .where(
            tasks.c.state.in_([TaskState.LEASED.value, TaskState.RUNNING.value]),
            sa.or_(
                attempt.c.id.is_(None),
                attempt.c.task_id != tasks.c.id,
                attempt.c.state != tasks.c.state,
            ),
        )
    )
    return _ids(conn, _scoped(query, tasks, ns))


def _live_attempt_before_the_fence(conn: sa.Connection, ns: str | None) -> list[str]:
    """Seed §7: after a restore fence no grant of an older epoch stays live (the fence settles
    them; one found here means its run was interrupted or a lease is about to be reaped)."""
    current = sa.func.coalesce(sa.select(dispatch_fence.c.epoch).scalar_subquery(), 0)
    query = sa.select(task_attempts.c.task_id).where(
        task_attempts.c.state.in_(LIVE_ATTEMPT), task_attempts.c.epoch < current
    )
    return _ids(conn, _scoped(query, task_attempts, ns))


def _running_without_start(conn: sa.Connection, ns: str | None) -> list[str]:
    query = (
        sa.select(tasks.c.id)
        .join(task_attempts, task_attempts.c.id == tasks.c.current_attempt_id)
        .where(tasks.c.state == TaskState.RUNNING.value, task_attempts.c.started_at.is_(None))
    )
    return _ids(conn, _scoped(query, tasks, ns))


def _event_gaps(conn: sa.Connection, ns: str | None) -> list[str]:
    counts = (
        _scoped(
            sa.select(
                task_events.c.task_id,
                sa.func.count().label("n"),
                sa.func.max(task_events.c.state_version).label("top"),
            ),
            task_events,
            ns,
        )
        .group_by(task_events.c.task_id)
        .subquery()
    )
    query = (
        sa.select(tasks.c.id)
        .outerjoin(counts, counts.c.task_id == tasks.c.id)
        .where(
            sa.or_(
                counts.c.n.is_(None),
                counts.c.n != tasks.c.state_version,
                counts.c.top != tasks.c.state_version,
            )
        )
    )
    return _ids(conn, _scoped(query, tasks, ns))


def _broken_event_chain(conn: sa.Connection, ns: str | None) -> list[str]:
    """Consecutive events must chain (to_state of n = from_state of n+1) and be legal moves."""
    nxt = task_events.alias("nxt")
    query = (
        sa.select(task_events.c.task_id)
        .join(
            nxt,
            sa.and_(
                nxt.c.namespace == task_events.c.namespace,
                nxt.c.task_id == task_events.c.task_id,
                nxt.c.state_version == task_events.c.state_version + 1,
            ),
        )
        .where(nxt.c.from_state != task_events.c.to_state)
    )
    broken = _ids(conn, _scoped(query, task_events, ns))
    pairs = _scoped(
        sa.select(task_events.c.task_id, task_events.c.from_state, task_events.c.to_state),
        task_events,
        ns,
    )
    for task_id, from_state, to_state in conn.execute(pairs):
        move = (TaskState(from_state) if from_state else None, TaskState(to_state))
        if move not in LEGAL_TRANSITIONS:
            broken.append(str(task_id))
    return broken


def _multiple_retry_successors(conn: sa.Connection, ns: str | None) -> list[str]:
    query = (
        sa.select(tasks.c.retry_of)
        .where(tasks.c.retry_of.is_not(None))
        .group_by(tasks.c.retry_of)
        .having(sa.func.count() > 1)
    )
    return _ids(conn, _scoped(query, tasks, ns))


def _attempt_count_mismatch(conn: sa.Connection, ns: str | None) -> list[str]:
    counts = (
        _scoped(sa.select(task_attempts.c.task_id, sa.func.count().label("n")), task_attempts, ns)
        .where(sa.func.coalesce(task_attempts.c.outcome, "") != "RELEASED")
        .group_by(task_attempts.c.task_id)
        .subquery()
    )
    query = (
        sa.select(tasks.c.id)
        .outerjoin(counts, counts.c.task_id == tasks.c.id)
        .where(sa.func.coalesce(counts.c.n, 0) != tasks.c.attempts_used)
    )
    return _ids(conn, _scoped(query, tasks, ns))


def _scheduled_task_without_occurrence(conn: sa.Connection, ns: str | None) -> list[str]:
    occ = schedule_occurrences
    query = (
        sa.select(tasks.c.id)
        .outerjoin(
            occ, sa.and_(occ.c.task_id == tasks.c.id, occ.c.schedule_id == tasks.c.schedule_id)
        )
        .where(tasks.c.schedule_id.is_not(None), occ.c.id.is_(None))
    )
    return _ids(conn, _scoped(query, tasks, ns))


def _schedule_behind_its_occurrences(conn: sa.Connection, ns: str | None) -> list[str]:
    """A schedule whose next instant is not after every instant it already decided."""
    latest = (
        _scoped(
            sa.select(
                schedule_occurrences.c.schedule_id,
                sa.func.max(schedule_occurrences.c.through_at).label("through"),
            ),
            schedule_occurrences,
            ns,
        )
        .group_by(schedule_occurrences.c.schedule_id)
        .subquery()
    )
    query = (
        sa.select(schedules.c.id)
        .join(latest, latest.c.schedule_id == schedules.c.id)
        .where(schedules.c.next_fire_at <= latest.c.through)
    )
    return _ids(conn, _scoped(query, schedules, ns))


CHECKS: dict[str, tuple[str, str, Callable[[sa.Connection, str | None], list[str]]]] = {
    "multiple_live_attempts": (
        "2",
        "a task with more than one live attempt",
        _multiple_live_attempts,
    ),
    "live_attempt_on_settled_task": (
        "2, 4",
        "a live attempt on a task that is not LEASED/RUNNING",
        _live_attempt_on_settled_task,
    ),
    "current_attempt_mismatch": (
        "2, 3",
        "a LEASED/RUNNING task whose current attempt is missing, foreign or out of step",
        _current_attempt_mismatch,
    ),
    "running_without_started_attempt": (
        "3",
        "RUNNING without a started attempt",
        _running_without_start,
    ),
    "event_gaps": ("4", "task_events do not cover every state_version", _event_gaps),
    "broken_event_chain": (
        "4",
        "events that do not chain or are illegal moves",
        _broken_event_chain,
    ),
    "multiple_retry_successors": (
        "8",
        "more than one direct retry successor",
        _multiple_retry_successors,
    ),
    "scheduled_task_without_occurrence": (
        "5",
        "a task a schedule fired that no occurrence of that schedule records",
        _scheduled_task_without_occurrence,
    ),
    "schedule_behind_its_occurrences": (
        "5",
        "a schedule whose next fire is not after the instants it already decided",
        _schedule_behind_its_occurrences,
    ),
    "attempt_count_mismatch": (
        "3",
        "attempts_used differs from the attempts spent (all but released ones)",
        _attempt_count_mismatch,
    ),
    "live_attempt_before_restore_fence": (
        "3",
        "a live attempt granted before the current restore fence (run `orbit admin "
        "restore-fence` again if it stays)",
        _live_attempt_before_the_fence,
    ),
    **WORKFLOW_CHECKS,
}


# wait paths, semaphores, quota counters (pulse/views/bookkeeping.py)
CHECKS.update(BOOKKEEPING_CHECKS)


def verify(conn: sa.Connection, namespace: str | None = None) -> VerifyReport:
    """Run every check (optionally for one namespace) and report what each found."""
    results = {}
    for name, (invariant, description, check) in CHECKS.items():
        found = sorted(set(check(conn, namespace)))
        results[name] = CheckResult(invariant, description, len(found), found[:EXAMPLES])
    return VerifyReport(results)
