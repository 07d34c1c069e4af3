"""The happy path and the basic transitions of seed §2, end to end through the store."""

from __future__ import annotations

from orbit_store.pulse.model import CompletionStatus, TaskState

from ..drivers.pulse_driver import PulseDriver


def test_submitted_task_is_claimed_started_and_succeeds(pulse: PulseDriver) -> None:
    task = pulse.submit(params={"x": 1})
    grant = pulse.claim_one()
    assert grant.task_id == task.task_id and grant.params == {"x": 1} and grant.generation == 2
    assert pulse.state(task.task_id) == "LEASED"
    assert pulse.start(grant).started
    assert pulse.state(task.task_id) == "RUNNING"
    done = pulse.succeed(grant, result={"y": 2})
    assert done.status is CompletionStatus.APPLIED and done.task_state is TaskState.SUCCEEDED
    row = pulse.task(task.task_id)
    assert row.result == {"y": 2} and row.finished_at is not None and row.current_attempt_id is None
    assert [e.to_state for e in pulse.events(task.task_id)] == [
        "WAITING",
        "LEASED",
        "RUNNING",
        "SUCCEEDED",
    ]


def test_claim_orders_by_priority_then_available_at(pulse: PulseDriver) -> None:
    late = pulse.submit(priority=5)
    first = pulse.submit(priority=0)
    second = pulse.submit(priority=0)
    order = [g.task_id for g in pulse.claim(limit=3)]
    assert order == [first.task_id, second.task_id, late.task_id]


def test_future_task_is_not_claimed_before_it_is_due(pulse: PulseDriver) -> None:
    task = pulse.submit(delay_seconds=60)
    assert pulse.claim() == []
    pulse.advance(61)
    assert [g.task_id for g in pulse.claim()] == [task.task_id]
