"""Invariant 5: a schedule occurrence, its task and the schedule's progress commit together;
the same instant never fires twice (invariant 6)."""

from __future__ import annotations

import datetime as dt
import functools
import multiprocessing

import pytest
import sqlalchemy as sa

from orbit_store.db import create_store_engine, run_transaction
from orbit_store.errors import QuotaExceeded
from orbit_store.schedules.declare import ScheduleSpec, put_schedule
from orbit_store.schedules.fire import fire_occurrence
from orbit_store.schema import schedule_occurrences, schedules, tasks

from .pulse_driver import PulseDriver

T0 = dt.datetime(2026, 1, 1, 9, 0)
T1 = dt.datetime(2026, 1, 2, 9, 0)


def declare(pulse: PulseDriver) -> str:
    spec = ScheduleSpec(
        name="nightly",
        cron="0 9 * * *",
        time_zone="Europe/Berlin",
        task_template={"handler": "reports.build", "params": {"kind": "daily"}},
    )
    return pulse.tx(lambda c: put_schedule(c, pulse.namespace, spec, next_fire_at=T0))


def fire(pulse: PulseDriver, schedule_id: str):  # type: ignore[no-untyped-def]
    return pulse.tx(
        functools.partial(
            fire_occurrence,
            namespace=pulse.namespace,
            schedule_id=schedule_id,
            scheduled_at=T0,
            next_fire_at=T1,
        )
    )


def count(pulse: PulseDriver, table: sa.Table) -> int:
    with pulse.engine.connect() as conn:
        return int(
            conn.execute(
                sa.select(sa.func.count())
                .select_from(table)
                .where(table.c.namespace == pulse.namespace)
            ).scalar_one()
        )


def test_occurrence_task_and_progress_commit_together_inv5(pulse: PulseDriver) -> None:
    schedule_id = declare(pulse)
    result = fire(pulse, schedule_id)
    assert result.fired
    task = pulse.task(result.task_id)
    assert (task.handler, task.params, task.schedule_id) == (
        "reports.build",
        {"kind": "daily"},
        schedule_id,
    )
    with pulse.engine.connect() as conn:
        occurrence = conn.execute(sa.select(schedule_occurrences)).all()
        row = conn.execute(sa.select(schedules).where(schedules.c.id == schedule_id)).one()
    assert [(o.scheduled_at, o.task_id) for o in occurrence if o.schedule_id == schedule_id] == [
        (T0, result.task_id)
    ]
    assert (row.next_fire_at, row.last_fire_at) == (T1, T0)


def test_the_same_instant_never_fires_twice_inv5_inv6(pulse: PulseDriver) -> None:
    schedule_id = declare(pulse)
    assert fire(pulse, schedule_id).fired
    again = fire(pulse, schedule_id)
    assert not again.fired and "already fired" in again.reason
    assert count(pulse, tasks) == 1 and count(pulse, schedule_occurrences) == 1


def test_a_refused_task_leaves_no_occurrence_and_no_progress_inv5(pulse: PulseDriver) -> None:
    schedule_id = declare(pulse)
    pulse.quota("none", max_waiting=0)
    with pytest.raises(QuotaExceeded):
        fire(pulse, schedule_id)
    assert count(pulse, tasks) == 0 and count(pulse, schedule_occurrences) == 0
    with pulse.engine.connect() as conn:
        assert (
            conn.execute(
                sa.select(schedules.c.next_fire_at).where(schedules.c.id == schedule_id)
            ).scalar_one()
            == T0
        )


def _fire_in_process(url: str, namespace: str, schedule_id: str, barrier: object) -> bool:
    engine = create_store_engine(url)
    barrier.wait()  # type: ignore[attr-defined]
    try:
        return run_transaction(
            engine,
            functools.partial(
                fire_occurrence,
                namespace=namespace,
                schedule_id=schedule_id,
                scheduled_at=T0,
                next_fire_at=T1,
            ),
        ).fired
    finally:
        engine.dispose()


@pytest.mark.mariadb_only
def test_two_scheduler_processes_never_double_fire_inv5(pulse: PulseDriver) -> None:
    schedule_id = declare(pulse)
    url = pulse.engine.url.render_as_string(hide_password=False)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(4)
        with ctx.Pool(4) as pool:
            fired = pool.starmap(
                _fire_in_process, [(url, pulse.namespace, schedule_id, barrier)] * 4
            )
    assert sorted(fired) == [False, False, False, True]
    assert count(pulse, tasks) == 1 and count(pulse, schedule_occurrences) == 1
