"""`orbit admin verify` finds the states invariant 5 forbids for schedules (planted by hand here,
in a namespace of their own: the store never produces them)."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from orbit_store.ids import new_id
from orbit_store.recovery.verify import verify
from orbit_store.schema import schedules as schedules_table

from ..drivers.pulse_driver import PulseDriver
from ..drivers.schedule_driver import ScheduleDriver

T = dt.datetime(2026, 6, 1, 10, 0)


def violations(pulse: PulseDriver, check: str) -> int:
    with pulse.engine.connect() as conn:
        return verify(conn, pulse.namespace).checks[check].violations


def test_verify_finds_a_task_fired_without_its_occurrence_inv5(engine: sa.Engine) -> None:
    pulse = PulseDriver(engine)
    pulse.submit(schedule_id=new_id())
    assert violations(pulse, "scheduled_task_without_occurrence") == 1


def test_verify_finds_a_schedule_behind_the_instants_it_decided_inv5(engine: sa.Engine) -> None:
    driver = ScheduleDriver(PulseDriver(engine))
    driver.travel(T - dt.timedelta(seconds=30))
    schedule_id = driver.create().schedule_id
    driver.run_at(T + dt.timedelta(seconds=1))
    assert violations(driver.pulse, "schedule_behind_its_occurrences") == 0
    driver.pulse.tx(
        lambda c: c.execute(
            schedules_table.update()
            .where(schedules_table.c.id == schedule_id)
            .values(next_fire_at=T)
        )
    )
    assert violations(driver.pulse, "schedule_behind_its_occurrences") == 1
