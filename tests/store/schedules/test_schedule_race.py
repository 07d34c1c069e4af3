"""Several scheduler replicas over the same database (real processes, not threads): every due
instant of every schedule is decided exactly once, and none is missing (invariant 5)."""

from __future__ import annotations

import collections
import datetime as dt
import multiprocessing

import pytest
import sqlalchemy as sa

from orbit.engines.scheduler import scheduler_pass
from orbit_store.clock import CLOCK_SKEW_OPTION
from orbit_store.db import create_store_engine
from orbit_store.schema import schedule_occurrences, tasks

from ..drivers.schedule_driver import ScheduleDriver

pytestmark = [pytest.mark.slow, pytest.mark.mariadb_only]

T = dt.datetime(2026, 6, 1, 10, 0)
SCHEDULES = 120
INSTANTS = 5  # T .. T+4m, caught up in full
REPLICAS = 3


def _replica(url: str, skew: float, namespace: str, barrier: object) -> int:
    """Run scheduler passes until one finds nothing due; return the instants this one fired."""
    engine = create_store_engine(url).execution_options(**{CLOCK_SKEW_OPTION: skew})
    fired = 0
    barrier.wait()  # type: ignore[attr-defined]
    try:
        while True:
            report = scheduler_pass(engine, namespace=namespace, limit=50)
            fired += len(report.steps)
            if not report.steps and not report.errors:
                return fired
    finally:
        engine.dispose()


def test_three_scheduler_processes_decide_every_instant_exactly_once_inv5(
    schedules: ScheduleDriver,
) -> None:
    schedules.travel(T - dt.timedelta(seconds=30))
    ids = [
        schedules.create(f"s{i:03d}", misfire_policy="CatchUp", catch_up_limit=10).schedule_id
        for i in range(SCHEDULES)
    ]
    schedules.travel(T + dt.timedelta(minutes=INSTANTS - 1, seconds=30))
    engine = schedules.pulse.engine
    url = engine.url.render_as_string(hide_password=False)
    skew = schedules.pulse.skew
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(REPLICAS)
        with ctx.Pool(REPLICAS) as pool:
            fired = pool.starmap(_replica, [(url, skew, schedules.namespace, barrier)] * REPLICAS)

    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(
                schedule_occurrences.c.schedule_id,
                schedule_occurrences.c.scheduled_at,
                schedule_occurrences.c.status,
                schedule_occurrences.c.task_id,
            ).where(schedule_occurrences.c.namespace == schedules.namespace)
        ).all()
        task_count = conn.execute(
            sa.select(sa.func.count()).where(tasks.c.namespace == schedules.namespace)
        ).scalar_one()
    per_schedule = collections.defaultdict(list)
    for row in rows:
        per_schedule[row.schedule_id].append(row.scheduled_at)
    wanted = [T + dt.timedelta(minutes=m) for m in range(INSTANTS)]
    assert {sid: sorted(found) for sid, found in per_schedule.items()} == dict.fromkeys(ids, wanted)
    assert {row.status for row in rows} == {"FIRED"}
    assert len({row.task_id for row in rows}) == task_count == SCHEDULES * INSTANTS
    assert sum(fired) == SCHEDULES * INSTANTS
    assert sum(1 for f in fired if f > 0) >= 2, f"the replicas shared the work: {fired}"
