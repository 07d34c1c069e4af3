"""Random operation sequences against the real store, checked against a small model (seed §2, §3).

Hypothesis drives submit / claim (leases with start or not) / start / heartbeat / complete /
cancel / review / clock / reap / session revoke through :class:`PulseDriver` and, after every
step, checks invariants 2, 3, 4, 7:
every task is in a seed state, reached by legal transitions only, with the state, version and
current attempt the model expects and a clean ``verify``; a stale grant is refused by start,
heartbeat and complete and changes nothing; task_events are append-only and a SUCCEEDED task never
changes again; an unsafe task whose RUNNING lease lapsed goes to NEEDS_REVIEW, never to WAITING.

Time is the driver's clock skew. Leases last 30 s (the implicit default queue): a 31 s step lapses
every lease; a 1 s step lets every backoff (100-200 ms here) pass and is only taken while every
live lease keeps 20 s of wall-clock slack, so the model always knows which leases are live.
"""

from __future__ import annotations

import contextlib
import functools
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from orbit_store.errors import Conflict, InvalidRequest
from orbit_store.pulse.model import (
    LEGAL_TRANSITIONS,
    AttemptOutcome,
    CompletionStatus,
    LeaseGrant,
    Outcome,
    RenewStatus,
    Safety,
    StartRefusal,
)
from orbit_store.pulse.model import TaskState as S
from orbit_store.recovery.verify import verify
from orbit_store.schema import task_attempts, task_events, tasks

from ..drivers.pulse_driver import PulseDriver

BIG_STEP = 31  # longer than the default 30 s lease
SMALL_STEP = 1  # longer than any backoff used here
SURELY_LIVE = 10  # skew seconds since a renewal within which a lease is certainly live
# What a worker does with a grant ("cancel": an operator cancels the grant's task meanwhile).
ACTIONS = ("start", "succeeded", "heartbeat", "cancel", "failed_retryable", "failed_final")
ACTIONS += ("unknown", "cancelled", "released")


@dataclass
class Lease:
    grant: LeaseGrant
    session_id: str
    renewed_at: float  # the driver's skew when the lease was last set
    revoked: bool = False  # its session ended: the lease was cut to "now"
    outcome: AttemptOutcome | None = None


@dataclass
class Task:
    id: str
    safety: Safety
    max_attempts: int
    priority: int
    state: S = S.WAITING
    version: int = 1
    attempts_used: int = 0
    cancel_requested: bool = False
    current: Lease | None = None
    due_at: float = 0.0  # from this skew on, a claim certainly sees the WAITING task


class PulseMachine(RuleBasedStateMachine):
    grants = Bundle("grants")

    def __init__(self, engine: sa.Engine) -> None:
        super().__init__()
        self.pulse = PulseDriver(engine)
        self.tasks: dict[str, Task] = {}
        self.leases: dict[str, Lease] = {}
        self.history: dict[str, list[tuple[Any, ...]]] = {}
        self.sessions: list[str] = []
        self.session_id = self._new_session()

    # --- the model ----------------------------------------------------------------------------
    def _new_session(self) -> str:
        name = f"worker-{len(self.sessions) + 1}"
        self.sessions.append(self.pulse.session(name, ttl_seconds=86_400).id)
        return self.sessions[-1]

    def lapsed(self, lease: Lease) -> bool:
        if lease.revoked:  # cut to "now" when its session ended: its renewals no longer count
            return True
        since = self.pulse.skew - lease.renewed_at
        assert since >= BIG_STEP or since <= SURELY_LIVE, "the model lost track of a lease"
        return since >= BIG_STEP

    def _current(self, lapsed: bool | None = None) -> list[Lease]:
        found = [t.current for t in self.tasks.values() if t.current is not None]
        return [x for x in found if lapsed is None or self.lapsed(x) is lapsed]

    def _waiting(self, due: bool | None = None) -> list[Task]:
        found = [t for t in self.tasks.values() if t.state is S.WAITING]
        return [t for t in found if due is None or (t.due_at <= self.pulse.skew) is due]

    def _finish(self, task: Task, to: S, outcome: AttemptOutcome, due_at: float) -> None:
        """The current attempt ends with ``outcome``; the task moves to ``to``."""
        assert task.current is not None
        task.current.outcome, task.current = outcome, None
        task.state, task.version, task.due_at = to, task.version + 1, due_at

    def _retry_or_fail(self, task: Task, backoff: float) -> tuple[S, float]:
        if task.attempts_used < task.max_attempts:
            return S.WAITING, self.pulse.skew + backoff
        return S.FAILED, self.pulse.skew

    def _assert_unchanged(self, task: Task) -> None:
        row = self.pulse.task(task.id)
        assert (row.state, row.state_version) == (task.state, task.version), row

    # --- worker operations, with any grant (current or stale) ---------------------------------
    def _start(self, grant: LeaseGrant) -> None:
        task, lease = self.tasks[grant.task_id], self.leases[grant.attempt_id]
        result = self.pulse.start(grant)
        if task.current is not lease:  # invariant 3: a stale grant is refused
            assert not result.started and result.refusal is StartRefusal.STALE_ATTEMPT, result
            self._assert_unchanged(task)
        elif task.state is S.RUNNING:
            assert result.started and result.already_started, result
        elif self.lapsed(lease):
            assert not result.started and result.refusal is StartRefusal.LEASE_EXPIRED, result
        else:
            assert result.started and not result.already_started, result
            task.state, task.version = S.RUNNING, task.version + 1
            lease.renewed_at = self.pulse.skew

    def _heartbeat(self, grants: list[LeaseGrant]) -> None:
        batch = list({g.attempt_id: g for g in grants}.values())
        for grant, result in zip(batch, self.pulse.heartbeat(*batch), strict=True):
            task, lease = self.tasks[grant.task_id], self.leases[grant.attempt_id]
            assert result.attempt_id == grant.attempt_id
            if task.current is not lease or self.lapsed(lease):
                assert result.status is RenewStatus.LOST, result
                self._assert_unchanged(task)
            else:
                extended = (
                    RenewStatus.CANCEL_REQUESTED if task.cancel_requested else RenewStatus.EXTENDED
                )
                assert result.status is extended, result
                lease.renewed_at = self.pulse.skew

    def _complete(self, grant: LeaseGrant, action: str) -> None:
        task, lease = self.tasks[grant.task_id], self.leases[grant.attempt_id]
        outcome = Outcome.FAILED if action.startswith("failed") else Outcome(action)
        recorded = AttemptOutcome[outcome.name]
        retryable = action == "failed_retryable"
        report = functools.partial(self.pulse.complete, grant, outcome, retryable=retryable)
        if task.current is not lease:  # invariant 3: kept as evidence at most, never applied
            result = report()
            late = (
                CompletionStatus.DUPLICATE
                if lease.outcome is recorded
                else CompletionStatus.SUPERSEDED
            )
            assert result.status is late and result.task_state is task.state, result
            return self._assert_unchanged(task)
        released = outcome is Outcome.RELEASED
        if released != (task.state is S.LEASED) or (
            outcome is Outcome.CANCELLED and not task.cancel_requested
        ):
            with pytest.raises(InvalidRequest):
                report()
            return self._assert_unchanged(task)
        due_at = self.pulse.skew
        if released:
            to = S.WAITING
            task.attempts_used -= 1  # handed back before it ran: not spent
        elif outcome is Outcome.SUCCEEDED:
            to = S.SUCCEEDED  # a confirmed success wins over a pending cancel request
        elif outcome is Outcome.UNKNOWN:
            to = S.NEEDS_REVIEW  # invariant 7
        elif outcome is Outcome.CANCELLED or task.cancel_requested:
            to = S.CANCELLED
        elif retryable:
            to, due_at = self._retry_or_fail(task, SMALL_STEP)
        else:
            to = S.FAILED
        result = report()
        assert result.status is CompletionStatus.APPLIED and result.task_state is to, (result, to)
        self._finish(task, to, recorded, due_at)

    def _cancel(self, task: Task) -> None:
        if task.state is S.NEEDS_REVIEW:  # settled by review, not by cancel
            with pytest.raises(Conflict):
                self.pulse.cancel(task.id)
            return
        result = self.pulse.cancel(task.id)
        if task.state.is_terminal:
            assert not result.changed and result.state is task.state, result
        elif task.state is S.RUNNING:  # only the intent is recorded; the worker decides
            assert result.changed is not task.cancel_requested and result.state is S.RUNNING
            task.cancel_requested = True
        else:
            assert result.changed and result.state is S.CANCELLED, result
            task.cancel_requested = True
            if task.current is not None:
                self._finish(task, S.CANCELLED, AttemptOutcome.CANCELLED, self.pulse.skew)
            else:
                task.state, task.version = S.CANCELLED, task.version + 1

    def _act(self, grant: LeaseGrant, action: str) -> None:
        if action == "start":
            self._start(grant)
        elif action == "heartbeat":
            self._heartbeat([grant])
        elif action == "cancel":  # an operator cancels the grant's task
            self._cancel(self.tasks[grant.task_id])
        else:
            self._complete(grant, action)

    # --- rules --------------------------------------------------------------------------------
    @initialize(specs=st.lists(st.tuples(st.booleans(), st.integers(1, 3)), min_size=1, max_size=3))
    def submit_some(self, specs: list[tuple[bool, int]]) -> None:
        for spec in specs:
            self.submit(*spec)

    @precondition(lambda self: len(self.tasks) < 6)
    @rule(unsafe=st.booleans(), max_attempts=st.integers(1, 3))
    def submit(self, unsafe: bool, max_attempts: int) -> None:
        safety = Safety.UNSAFE if unsafe else Safety.SAFE
        priority = len(self.tasks)  # unique: claims take tasks in a certain order
        result = self.pulse.submit(
            safety=safety, max_attempts=max_attempts, backoff_initial_ms=100, priority=priority
        )
        assert result.state is S.WAITING and not result.replayed
        task = Task(result.task_id, safety, max_attempts, priority, due_at=self.pulse.skew)
        self.tasks[task.id] = task

    # Claims run only while every WAITING task is certainly due (no backoff in flight), and each
    # task has its own priority: what a claim gets is certain and Hypothesis can replay a run.
    @precondition(lambda self: self._waiting() and not self._waiting(due=False))
    @rule(target=grants, limit=st.integers(1, 3), with_start=st.booleans())
    def claim(self, limit: int, with_start: bool) -> Any:
        """``with_start``: a lease with start for the driver's handler — safe tasks come back
        RUNNING (LEASED and RUNNING in one transaction), unsafe ones LEASED."""
        first = [t.id for t in sorted(self._waiting(), key=lambda t: t.priority)][:limit]
        start_handlers = ("test.noop",) if with_start else ()
        got = self.pulse.claim(
            limit=limit, session_id=self.session_id, start_handlers=start_handlers
        )
        assert [g.task_id for g in got] == first, (got, first)
        for grant in got:
            task = self.tasks[grant.task_id]
            task.state, task.version = S.LEASED, task.version + 1
            task.attempts_used += 1
            assert grant.generation == task.version  # the fencing number: the grant's version
            if with_start and task.safety is Safety.SAFE:
                task.state, task.version = S.RUNNING, task.version + 1
            assert grant.started is (task.state is S.RUNNING)
            assert grant.state_version == task.version
            lease = Lease(grant, self.session_id, self.pulse.skew)
            task.current = self.leases[grant.attempt_id] = lease
        return multiple(*got)

    @precondition(lambda self: self._current())
    @rule(pick=st.integers(0, 5), action=st.sampled_from(ACTIONS))
    def work(self, pick: int, action: str) -> None:
        """A worker with a current grant: it starts before it reports an outcome (or the operator
        cancels its task), and its heartbeat renews every grant it holds in one batch."""
        leases = self._current()
        grant = leases[pick % len(leases)].grant
        if action == "heartbeat":
            return self._heartbeat([x.grant for x in leases])
        if action not in ("start", "released") and self.tasks[grant.task_id].state is S.LEASED:
            self._start(grant)
        self._act(grant, action)

    @rule(grant=grants, action=st.sampled_from(ACTIONS))
    def replay(self, grant: LeaseGrant, action: str) -> None:
        """Any grant ever handed out, used as it is: a stale one must change nothing."""
        self._act(grant, action)

    @precondition(lambda self: any(t.state is S.NEEDS_REVIEW for t in self.tasks.values()))
    @rule(pick=st.integers(0, 5), succeeded=st.booleans())
    def review(self, pick: int, succeeded: bool) -> None:
        ordered = sorted(self.tasks.values(), key=lambda t: (t.state != S.NEEDS_REVIEW, t.priority))
        task = ordered[pick % len(ordered)]  # mostly a NEEDS_REVIEW one; else refused
        if task.state is not S.NEEDS_REVIEW:
            with pytest.raises(Conflict):
                self.pulse.review(task.id, expected_state_version=task.version)
            return
        to = S.SUCCEEDED if succeeded else S.FAILED
        assert self.pulse.review(task.id, to.lower()) is to
        task.state, task.version = to, task.version + 1

    @precondition(lambda self: self._current() or self._waiting(due=False))
    @rule(lapse=st.booleans())
    def advance_clock(self, lapse: bool) -> None:
        small_ok = all(
            self.lapsed(x) or self.pulse.skew + SMALL_STEP - x.renewed_at <= SURELY_LIVE
            for x in self._current()
        )
        self.pulse.advance(SMALL_STEP if small_ok and not lapse else BIG_STEP)

    @precondition(lambda self: self._current(lapsed=True))
    @rule()
    def reap(self) -> None:
        self.pulse.reap()
        for task in self.tasks.values():
            if task.current is None or not self.lapsed(task.current):
                continue
            due_at = self.pulse.skew
            if task.state is S.LEASED:
                to, due_at = self._retry_or_fail(task, 0)
            elif task.safety is Safety.UNSAFE:
                to = S.NEEDS_REVIEW  # invariant 7: a lost worker's side effects are unknown
            elif task.cancel_requested:
                to = S.CANCELLED
            else:
                to, due_at = self._retry_or_fail(task, SMALL_STEP)
            self._finish(task, to, AttemptOutcome.LAPSED, due_at)

    @precondition(lambda self: any(x.session_id == self.session_id for x in self._current(False)))
    @rule()
    def revoke_worker_session(self) -> None:
        revoked = self.session_id
        self.pulse.revoke(revoked)  # this only cuts the session's leases; the reaper decides
        for lease in self.leases.values():
            lease.revoked = lease.revoked or lease.session_id == revoked
        self.session_id = self._new_session()

    # --- invariants ---------------------------------------------------------------------------
    @invariant()
    def store_agrees_with_model_and_seed(self) -> None:
        ns = self.pulse.namespace
        with self.pulse.engine.connect() as conn:
            rows = conn.execute(sa.select(tasks).where(tasks.c.namespace == ns)).all()
            events = conn.execute(
                sa.select(task_events)
                .where(task_events.c.namespace == ns)
                .order_by(task_events.c.task_id, task_events.c.state_version)
            ).all()
            lapsed_while_running = set(
                conn.execute(
                    sa.select(task_attempts.c.id).where(
                        task_attempts.c.namespace == ns,
                        task_attempts.c.outcome == AttemptOutcome.LAPSED.value,
                        task_attempts.c.started_at.is_not(None),
                    )
                ).scalars()
            )
            report = verify(conn, ns)
        assert report.clean, report.as_dict()
        assert {row.id for row in rows} == set(self.tasks)
        for row in rows:
            task = self.tasks[row.id]
            current = task.current.grant.attempt_id if task.current else None
            seen = (S(row.state), row.state_version, row.attempts_used)  # S(): a seed state
            assert seen == (task.state, task.version, task.attempts_used), (row, task)
            assert bool(row.cancel_requested) is task.cancel_requested, (row, task)
            assert row.current_attempt_id == current, (row, task)
        chains: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
        for e in events:
            chains[e.task_id].append((e.state_version, e.from_state, e.to_state, e.attempt_id))
        for task_id, task in self.tasks.items():
            chain, before = chains[task_id], self.history.get(task_id, [])
            assert chain[: len(before)] == before, "task_events were rewritten"
            if before and before[-1][2] == S.SUCCEEDED:
                assert chain == before, "a SUCCEEDED task changed again"
            assert [e[0] for e in chain] == list(range(1, task.version + 1)), chain
            previous = None
            for _, from_state, to_state, attempt_id in chain:
                assert from_state == previous, chain
                move = (S(from_state) if from_state else None, S(to_state))
                assert move in LEGAL_TRANSITIONS, chain
                if from_state == S.RUNNING and attempt_id in lapsed_while_running:
                    assert task.safety is Safety.SAFE or to_state == S.NEEDS_REVIEW, chain
                previous = to_state
            self.history[task_id] = chain

    def teardown(self) -> None:
        """Leave no live attempt behind for a global (all-namespace) reaper."""
        for task in self.tasks.values():
            with contextlib.suppress(Exception):
                row = self.pulse.task(task.id)
                if row.state == S.LEASED:
                    self.pulse.cancel(task.id)
                elif row.state == S.RUNNING:
                    self.pulse.fail(self.leases[row.current_attempt_id].grant)


def _run(engine: sa.Engine, examples: int) -> None:
    run_state_machine_as_test(
        lambda: PulseMachine(engine),
        settings=settings(
            max_examples=examples,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )


@pytest.mark.slow
def test_random_operation_sequences_only_reach_legal_states_on_mariadb(
    mariadb_engine: sa.Engine,
) -> None:
    """Seed invariants 2, 3, 4, 7 hold after every step of random operation sequences."""
    _run(mariadb_engine, examples=25)


@pytest.mark.slow  # a stateful test: the slow tier, as on MariaDB
def test_random_operation_sequences_only_reach_legal_states_on_sqlite(
    sqlite_engine: sa.Engine,
) -> None:
    """Seed invariants 2, 3, 4, 7 hold after every step on SQLite (``orbit dev``) as well."""
    _run(sqlite_engine, examples=10)
