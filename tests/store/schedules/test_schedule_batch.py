"""Schedules decided in batches (``fire_batch``): a constant number of statements per batch, not
per instant, and every schedule of a batch still judged on its own — its occurrence, its task
and its progress in the batch's one transaction (invariant 5), its own recorded reason when its
task is refused, and one that cannot be decided left out without failing the others."""

from __future__ import annotations

import datetime as dt
import functools

import pytest
import sqlalchemy as sa

from orbit.engines.scheduler import scheduler_pass
from orbit_store.db import run_transaction
from orbit_store.schedules.fire_batch import fire_batch
from orbit_store.schema import schedules as schedules_table

from ..drivers.pulse_driver import PulseDriver
from ..drivers.schedule_driver import ScheduleDriver
from ..drivers.sent_statements import sent_statements

T = dt.datetime(2026, 6, 1, 10, 0)
MIN = dt.timedelta(minutes=1)
SIZES = (1, 8, 64)

#: Statements per batch of due schedules, whatever its size: lock the rows, the set-based
#: submission of their tasks, the occurrences' INSERT and the schedules' UPDATE (the figure
#: docs/performance.md quotes).
BATCH_STATEMENTS = 8


def _decided_in_one_batch(engine: sa.Engine, size: int) -> tuple[int, int]:
    """(statements, instants decided) of one batch of ``size`` due every-minute schedules."""
    schedules = ScheduleDriver(PulseDriver(engine))
    schedules.travel(T - dt.timedelta(seconds=30))
    ids = [schedules.create(f"s{i:03d}").schedule_id for i in range(size)]
    schedules.travel(T + dt.timedelta(seconds=1))
    work = functools.partial(fire_batch, namespace=schedules.namespace, schedule_ids=ids)
    with sent_statements(schedules.pulse.base_engine) as sent:
        outcome = run_transaction(schedules.pulse.engine, work)
    assert {(s.status, s.scheduled_at) for s in outcome.steps} == {("FIRED", T)}
    assert len(outcome.steps) == size and len({s.task_id for s in outcome.steps}) == size
    return len(sent), len(outcome.steps)


@pytest.mark.mariadb_only
def test_statements_per_batch_of_schedules_do_not_grow_with_its_size_inv5(
    mariadb_engine: sa.Engine,
) -> None:
    counts = {size: _decided_in_one_batch(mariadb_engine, size) for size in SIZES}
    per_instant = {size: sent / decided for size, (sent, decided) in counts.items()}
    print(f"statements per batch: {counts}; per decided instant: {per_instant}")
    assert counts[64][0] == counts[8][0] == BATCH_STATEMENTS
    assert counts[1][0] <= BATCH_STATEMENTS


def _where(schedules: ScheduleDriver, name: str) -> sa.ColumnElement[bool]:
    return sa.and_(
        schedules_table.c.namespace == schedules.namespace, schedules_table.c.name == name
    )


def _break(schedules: ScheduleDriver, name: str, **values: object) -> None:
    schedules.pulse.tx(
        lambda c: c.execute(
            schedules_table.update().where(_where(schedules, name)).values(**values)
        )
    )


def _next_fire(schedules: ScheduleDriver, name: str) -> dt.datetime | None:
    query = sa.select(schedules_table.c.next_fire_at).where(_where(schedules, name))
    return schedules.pulse.tx(lambda c: c.execute(query).scalar_one())


def test_every_schedule_of_a_batch_gets_its_own_decision_and_reason_inv5(
    schedules: ScheduleDriver, pulse: PulseDriver, caplog: pytest.LogCaptureFixture
) -> None:
    schedules.travel(T - dt.timedelta(seconds=30))
    for name in ("fine", "blank", "unreadable", "broken", "elsewhere"):
        schedules.create(name)
    schedules.create("forbid", concurrency_policy="Forbid")
    schedules.create("replace", concurrency_policy="Replace")
    schedules.create("deadline", starting_deadline_seconds=5)
    schedules.run_at(T + dt.timedelta(seconds=1))  # forbid and replace leave a task waiting
    _break(schedules, "blank", task_template={"handler": ""})  # the submission refuses it
    _break(schedules, "unreadable", task_template={"queue": "default"})  # no handler at all
    _break(schedules, "elsewhere", task_template={"handler": "h", "queue": "deleted"})
    _break(schedules, "broken", time_zone="Gone/Away")  # a zone the tzdata no longer knows
    schedules.travel(T + MIN + dt.timedelta(seconds=10))

    report = scheduler_pass(pulse.engine, namespace=schedules.namespace)

    decided = {s.name: (s.status.value, s.reason.value) for s in report.steps}
    assert decided == {
        "fine": ("FIRED", "Scheduled"),
        "blank": ("SKIPPED", "InvalidTask"),
        "unreadable": ("SKIPPED", "InvalidTask"),
        "elsewhere": ("SKIPPED", "QueueNotFound"),
        "forbid": ("SKIPPED", "ConcurrencyForbid"),
        "replace": ("FIRED", "Replaced"),
        "deadline": ("MISSED", "StartingDeadlineExceeded"),
    }
    assert report.errors == 1, "the broken schedule alone"
    assert _next_fire(schedules, "broken") == T + MIN, "left where it was, not moved"
    assert {_next_fire(schedules, name) for name in decided} == {T + 2 * MIN}
    assert "failed as a whole" not in caplog.text, "decided in the batch, not one by one"
    first_replace, second_replace = schedules.tasks("replace")
    assert (first_replace.state, second_replace.state) == ("CANCELLED", "WAITING")


def test_a_catch_up_is_decided_in_rounds_of_the_batch(schedules: ScheduleDriver) -> None:
    schedules.travel(T - dt.timedelta(seconds=30))
    for i in range(3):
        schedules.create(f"c{i}", misfire_policy="CatchUp", catch_up_limit=5)
    report = schedules.run_at(T + 4 * MIN + dt.timedelta(seconds=90))  # T .. T+5m are due

    for i in range(3):
        assert [d[0] for d in schedules.decided(f"c{i}")] == [T + m * MIN for m in range(6)]
    assert len(report.steps) == 18


@pytest.mark.mariadb_only
def test_a_whole_pass_sends_its_batches_statements_and_four_more_inv5(
    mariadb_engine: sa.Engine,
) -> None:
    """A pass over 150 due schedules (batches of 100 and 50): its scan (database time, then the
    due rows), each batch's statements, and the read of how far off the next instant is
    (database time, then the earliest instant ahead): statements per decided instant fall as
    the spike grows."""
    schedules = ScheduleDriver(PulseDriver(mariadb_engine))
    schedules.travel(T - dt.timedelta(seconds=30))
    for i in range(150):
        schedules.create(f"p{i:03d}")
    schedules.travel(T + dt.timedelta(seconds=1))
    with sent_statements(schedules.pulse.base_engine) as sent:
        report = scheduler_pass(schedules.pulse.engine, namespace=schedules.namespace)
    assert len(report.steps) == 150 and report.next_due_in is not None
    assert len(sent) == 2 + 2 * BATCH_STATEMENTS + 2
