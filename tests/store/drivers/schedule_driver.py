"""A test driver for schedules on top of :class:`PulseDriver`: one namespace, a database clock
the test moves (``travel``), and short names for declaring schedules and running scheduler passes.

Time is the database's own (``orbit_clock_skew_seconds``), so declaring, firing and Pulse's
transactions all agree on "now"; a pass is the server's own ``scheduler_pass``.
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import replace
from typing import Any

import sqlalchemy as sa

from orbit.engines.scheduler import SchedulerReport, scheduler_pass
from orbit_store.clock import db_now
from orbit_store.schedules import declare
from orbit_store.schedules.model import (
    ConcurrencyPolicy,
    MisfirePolicy,
    ScheduleSpec,
    ScheduleView,
    TaskTemplate,
    WriteResult,
)
from orbit_store.schedules.queries import get_schedule
from orbit_store.schema import schedule_occurrences, tasks

from .pulse_driver import PulseDriver


class ScheduleDriver:
    def __init__(self, pulse: PulseDriver) -> None:
        self.pulse = pulse
        self.namespace = pulse.namespace

    # --- time -------------------------------------------------------------------------------
    def travel(self, when: dt.datetime) -> None:
        """Set the database clock this driver sees to ``when`` (naive UTC); it keeps ticking."""
        with self.pulse.base_engine.connect() as conn:
            real = db_now(conn)
        self.pulse.skew = 0.0
        self.pulse.advance((when - real).total_seconds())

    def now(self) -> dt.datetime:
        return self.pulse.now()

    # --- declaring --------------------------------------------------------------------------
    def spec(self, name: str = "job", cron: str = "* * * * *", **kw: Any) -> ScheduleSpec:
        task = TaskTemplate(
            handler=kw.pop("handler", "jobs.run"),
            queue=kw.pop("queue", "default"),
            params=kw.pop("params", {"n": 1}),
        )
        if isinstance(kw.get("concurrency_policy"), str):
            kw["concurrency_policy"] = ConcurrencyPolicy(kw["concurrency_policy"])
        if isinstance(kw.get("misfire_policy"), str):
            kw["misfire_policy"] = MisfirePolicy(kw["misfire_policy"])
        return ScheduleSpec(name=name, cron=cron, task=task, **kw)

    def create(self, name: str = "job", cron: str = "* * * * *", **kw: Any) -> WriteResult:
        spec = self.spec(name, cron, **kw)
        return self.pulse.tx(
            lambda c: declare.create_schedule(c, self.namespace, spec, actor="tester")
        )

    def update(self, name: str = "job", **changes: Any) -> WriteResult:
        current = self.get(name).spec
        task = replace(current.task, **changes.pop("task", {}))
        spec = replace(current, task=task, **changes)
        return self.pulse.tx(
            lambda c: declare.update_schedule(c, self.namespace, spec, actor="tester")
        )

    def suspend(self, name: str = "job", suspended: bool = True) -> WriteResult:
        return self.pulse.tx(
            functools.partial(
                declare.set_suspended,
                namespace=self.namespace,
                name=name,
                suspended=suspended,
                actor="tester",
            )
        )

    # --- running ----------------------------------------------------------------------------
    def run(self) -> SchedulerReport:
        """One scheduler pass over this namespace, at the driver's clock."""
        return scheduler_pass(self.pulse.engine, namespace=self.namespace)

    def run_at(self, when: dt.datetime) -> SchedulerReport:
        self.travel(when)
        return self.run()

    # --- reading ----------------------------------------------------------------------------
    def get(self, name: str = "job") -> ScheduleView:
        with self.pulse.engine.connect() as conn:
            view = get_schedule(conn, self.namespace, name)
        assert view is not None, f"no schedule {name}"
        return view

    def occurrences(self, name: str = "job") -> list[sa.Row[Any]]:
        """Every occurrence of the schedule, oldest first."""
        schedule_id = self.get(name).id
        with self.pulse.engine.connect() as conn:
            return list(
                conn.execute(
                    sa.select(schedule_occurrences)
                    .where(schedule_occurrences.c.schedule_id == schedule_id)
                    .order_by(schedule_occurrences.c.scheduled_at)
                )
            )

    def decided(self, name: str = "job") -> list[tuple[dt.datetime, str, str]]:
        """(scheduled_at, status, reason) of every occurrence, oldest first."""
        return [(o.scheduled_at, o.status, o.reason) for o in self.occurrences(name)]

    def tasks(self, name: str = "job") -> list[sa.Row[Any]]:
        schedule_id = self.get(name).id
        with self.pulse.engine.connect() as conn:
            return list(
                conn.execute(
                    sa.select(tasks).where(tasks.c.schedule_id == schedule_id).order_by(tasks.c.id)
                )
            )
