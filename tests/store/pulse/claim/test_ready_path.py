"""Claims read only what can run now (no head-of-line blocking).

Tasks blocked by a saturated concurrency key or a closed gate, and tasks due in the future, are
off the claim path (``tasks.wait_path``), so a backlog of them in front of runnable tasks costs a
claim nothing and hides nothing; they come back in the transaction that frees them.
"""

from __future__ import annotations

import functools

import pytest
import sqlalchemy as sa

from orbit_store.pulse.claim.claim import claim_tasks

from ...conftest import rows_read
from ...drivers.pulse_driver import PulseDriver

BACKLOG = 300


def _claim_in(pulse: PulseDriver, limit: int = 10) -> functools.partial[object]:
    return functools.partial(
        claim_tasks,
        namespace=pulse.namespace,
        queues_=["default"],
        limit=limit,
        worker_session_id=pulse.session().id,
    )


def test_saturated_key_does_not_block_free_tasks(pulse: PulseDriver) -> None:
    """Defect 1: 300 tasks of a key with one permit, ahead of free tasks, must not stall the
    queue: after the key's one grant, claims keep granting the free tasks."""
    pulse.submit_many(BACKLOG, concurrency_key="customer-7", concurrency_limit=1, priority=-5)
    free = set(pulse.submit_many(10))
    first = pulse.claim(limit=11)
    assert sum(g.task_id not in free for g in first) == 1, "one permit: one keyed grant"
    assert {g.task_id for g in first if g.task_id in free} == free
    assert pulse.claim(limit=10) == [], "the rest of the key waits for its permit"


def test_closed_gate_does_not_block_other_tasks(pulse: PulseDriver) -> None:
    """Defect 1: 300 tasks behind a closed gate, ahead of free tasks, are not in the way."""
    gate = pulse.gate()
    pulse.set_gate(gate, allowed=False)
    pulse.submit_many(BACKLOG, gate_id=gate, priority=-5)
    free = set(pulse.submit_many(10))
    assert {g.task_id for g in pulse.claim(limit=10)} == free
    assert pulse.claim(limit=10) == []


def test_future_tasks_are_not_in_front_of_due_ones(pulse: PulseDriver) -> None:
    pulse.submit_many(BACKLOG, delay_seconds=3600, priority=-5)
    due = set(pulse.submit_many(10))
    assert {g.task_id for g in pulse.claim(limit=10)} == due


@pytest.mark.mariadb_only
def test_claim_cost_does_not_grow_with_what_is_blocked_or_future(engine: sa.Engine) -> None:
    """A claim reads the same number of rows whether 20 or 600 tasks are blocked or scheduled
    in front of the one it grants."""

    def cost(blocked: int) -> int:
        pulse = PulseDriver(engine)
        gate = pulse.gate()
        pulse.set_gate(gate, allowed=False)
        pulse.submit_many(blocked // 3, gate_id=gate, priority=-5)
        pulse.submit_many(blocked // 3, concurrency_key="k", priority=-5)
        pulse.submit_many(blocked // 3, delay_seconds=3600, priority=-5)
        pulse.submit()
        pulse.claim(limit=1)  # the key's one permit
        return rows_read(engine, _claim_in(pulse))

    small, large = cost(30), cost(600)
    assert large <= small + 2, (small, large)


def test_a_retry_that_falls_due_is_claimable_without_waiting_for_a_loop(
    pulse: PulseDriver,
) -> None:
    task = pulse.submit(backoff_initial_ms=5_000)
    grant = pulse.claim_one()
    pulse.start(grant)
    pulse.fail(grant, retryable=True)
    assert pulse.task(task.task_id).wait_path == "SCHEDULED"
    assert pulse.claim() == []
    pulse.advance(6)
    assert pulse.claim_one().task_id == task.task_id


def test_the_promoter_places_due_tasks_where_nobody_claims(pulse: PulseDriver) -> None:
    task = pulse.submit(delay_seconds=10)
    pulse.advance(11)
    assert pulse.promote().promoted == 1
    assert pulse.task(task.task_id).wait_path == "READY"


def test_a_released_permit_goes_to_the_next_blocked_task_in_the_same_transaction(
    pulse: PulseDriver,
) -> None:
    first = pulse.submit(concurrency_key="k", priority=1)
    second = pulse.submit(concurrency_key="k", priority=2)
    assert pulse.task(second.task_id).wait_path == "BLOCKED_KEY"
    grant = pulse.claim_one()
    assert grant.task_id == first.task_id
    pulse.start(grant)
    pulse.succeed(grant)
    assert pulse.task(second.task_id).wait_path == "READY"


def test_blocked_tasks_are_released_in_priority_order(pulse: PulseDriver) -> None:
    holder = pulse.submit(concurrency_key="k")
    later = pulse.submit(concurrency_key="k", priority=5)
    sooner = pulse.submit(concurrency_key="k", priority=-5)
    grant = pulse.claim_one()
    assert grant.task_id == holder.task_id
    pulse.cancel(holder.task_id)
    assert pulse.claim_one().task_id == sooner.task_id
    assert pulse.task(later.task_id).wait_path == "BLOCKED_KEY"


def test_a_lease_handed_back_keeps_its_place_and_permit(pulse: PulseDriver) -> None:
    from orbit_store.pulse.model import Outcome

    task = pulse.submit(concurrency_key="k")
    pulse.submit(concurrency_key="k")
    grant = pulse.claim_one()
    pulse.complete(grant, Outcome.RELEASED)
    assert pulse.claim_one().task_id == task.task_id


@pytest.mark.mariadb_only
def test_a_permit_left_free_by_a_skipped_blocked_task_is_handed_on_by_the_promoter(
    pulse: PulseDriver,
) -> None:
    """A release skips a blocked task another transaction holds (SKIP LOCKED); if that one then
    rolls back, the permit stays free. The promoter's repair hands it on."""
    from orbit_store.schema import tasks

    holder = pulse.submit(concurrency_key="k")
    blocked = pulse.submit(concurrency_key="k")
    grant = pulse.claim_one()
    assert grant.task_id == holder.task_id
    pulse.start(grant)
    with pulse.engine.connect() as other:
        other.execute(sa.select(tasks.c.id).where(tasks.c.id == blocked.task_id).with_for_update())
        pulse.succeed(grant)  # its release skips the locked blocked task
        other.rollback()
    assert pulse.task(blocked.task_id).wait_path == "BLOCKED_KEY"
    assert pulse.promote().released == 1
    assert pulse.claim_one().task_id == blocked.task_id


def test_an_idle_namespace_costs_the_promoter_no_transaction(isolated_engine: sa.Engine) -> None:
    """A pass over every namespace finds the ones with due or blocked tasks in one read and
    opens transactions only there: namespaces of finished work (what a long-lived database
    collects) must not each cost an idle server's promoter two transactions every pass."""
    from orbit_store.pulse import service

    for _ in range(5):  # finished work only
        idle = PulseDriver(isolated_engine)
        idle.submit()
        grant = idle.claim_one()
        idle.start(grant)
        idle.succeed(grant)
    later = PulseDriver(isolated_engine)
    later.submit(delay_seconds=3600)  # due, but not yet
    blocked = PulseDriver(isolated_engine)
    blocked.submit(concurrency_key="k")
    blocked.submit(concurrency_key="k")
    due = PulseDriver(isolated_engine)
    task = due.submit(delay_seconds=10)
    due.advance(11)
    report = service.promote(due.engine)
    assert (report.promoted, report.namespaces) == (1, 2), "the due one, the blocked one"
    assert due.task(task.task_id).wait_path == "READY"
