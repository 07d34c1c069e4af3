"""Trigger now: a schedule fires once at this instant on a person's request, in one transaction
with its occurrence and task (invariant 5), unique per instant (invariant 6), audited with who
and why (invariant 8); the schedule's concurrencyPolicy applies, its cron progress does not move."""

from __future__ import annotations

import functools

import pytest

from orbit_store.errors import NotFound
from orbit_store.schedules.trigger import Triggered, trigger_schedule

from ..drivers.schedule_driver import ScheduleDriver


def _trigger(schedules: ScheduleDriver, name: str = "job") -> Triggered:
    return schedules.pulse.tx(
        functools.partial(
            trigger_schedule,
            namespace=schedules.namespace,
            name=name,
            actor="alice",
            reason="the report is needed now",
        )
    )


def test_trigger_now_fires_once_records_it_and_leaves_the_cron_as_it_was_inv5_inv8(
    schedules: ScheduleDriver,
) -> None:
    schedules.create(cron="0 3 * * *", suspended=True)
    before = schedules.get()

    fired = _trigger(schedules)

    assert (fired.status.value, fired.reason.value) == ("FIRED", "Manual")
    assert fired.message == "triggered now by alice"
    (task,) = schedules.tasks()
    assert (task.id, task.handler, task.state) == (fired.task_id, "jobs.run", "WAITING")
    after = schedules.get()
    assert (after.version, after.next_fire_at, after.state) == (
        before.version,
        before.next_fire_at,
        "Suspended",
    )
    (occurrence,) = after.occurrences
    assert (occurrence.status, occurrence.reason, occurrence.task_id) == (
        "FIRED",
        "Manual",
        fired.task_id,
    )
    (audit,) = [
        a
        for a in schedules.pulse.audit("job")
        if a.action == "schedule.trigger" and a.namespace == schedules.namespace
    ]
    assert (audit.actor, audit.reason) == ("alice", "the report is needed now")
    assert audit.after["task_id"] == fired.task_id


def test_trigger_now_keeps_the_concurrency_policy(schedules: ScheduleDriver) -> None:
    schedules.create(cron="0 3 * * *", concurrency_policy="Forbid")
    first = _trigger(schedules)
    second = _trigger(schedules)  # the first one's task has not finished
    assert first.status.value == "FIRED"
    assert (second.status.value, second.reason.value, second.task_id) == (
        "SKIPPED",
        "ConcurrencyForbid",
        None,
    )
    assert [o.status for o in schedules.get().occurrences] == ["SKIPPED", "FIRED"]


def test_triggering_a_schedule_that_does_not_exist_is_not_found(
    schedules: ScheduleDriver,
) -> None:
    with pytest.raises(NotFound):
        _trigger(schedules, "nope")
