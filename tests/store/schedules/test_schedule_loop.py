"""The scheduler loop (orbit/engines/scheduler.py): per-item isolation, its metrics, and the wait
for the next instant."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from orbit.engines.loop import EngineLoop
from orbit.engines.scheduler import scheduler_pass
from orbit.metrics.server import Metrics
from orbit_store.schedules.queries import seconds_to_next_instant
from orbit_store.schema import schedules as schedules_table

from ..drivers.schedule_driver import ScheduleDriver

T = dt.datetime(2026, 6, 1, 10, 0)


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_one_broken_schedule_is_counted_and_logged_and_the_others_fire(
    schedules: ScheduleDriver, caplog: pytest.LogCaptureFixture
) -> None:
    schedules.travel(T - dt.timedelta(seconds=30))
    schedules.create("good")
    broken = schedules.create("broken").schedule_id
    schedules.pulse.tx(  # a zone the installed tzdata no longer knows
        lambda c: c.execute(
            schedules_table.update()
            .where(schedules_table.c.id == broken)
            .values(time_zone="Gone/Away")
        )
    )
    schedules.travel(T + dt.timedelta(seconds=2))
    metrics = Metrics(schedules.pulse.engine)

    report = scheduler_pass(schedules.pulse.engine, metrics, namespace=schedules.namespace)

    assert report.errors == 1
    assert [(s.name, s.status) for s in report.steps] == [("good", "FIRED")]
    assert sample(metrics, "orbit_engine_item_errors_total", loop="scheduler") == 1
    assert sample(metrics, "orbit_engine_errors_total", loop="scheduler") == 0, "the pass went on"
    assert f"schedule {broken} in namespace {schedules.namespace} failed" in caplog.text


def test_fires_skips_and_misses_are_counted_with_the_lateness_of_fires(
    schedules: ScheduleDriver,
) -> None:
    ns = schedules.namespace
    schedules.travel(T - dt.timedelta(seconds=30))
    schedules.create("late", starting_deadline_seconds=5)
    schedules.create("fine")
    schedules.create("blocked", concurrency_policy="Forbid")
    metrics = Metrics(schedules.pulse.engine)
    schedules.travel(T + dt.timedelta(seconds=2))
    scheduler_pass(schedules.pulse.engine, metrics, namespace=ns)  # all three fire, 2 s late
    schedules.travel(T + dt.timedelta(minutes=1, seconds=10))
    # 10 s late: "late" misses its 5 s deadline, "fine" fires, "blocked" skips (Forbid)
    scheduler_pass(schedules.pulse.engine, metrics, namespace=ns)

    fires = "orbit_schedule_fires_total"
    assert sample(metrics, fires, namespace=ns, outcome="fired", reason="Scheduled") == 4
    assert sample(metrics, fires, namespace=ns, outcome="skipped", reason="ConcurrencyForbid") == 1
    missed = sample(
        metrics, fires, namespace=ns, outcome="missed", reason="StartingDeadlineExceeded"
    )
    assert missed == 1
    count = sample(metrics, "orbit_schedule_fire_lateness_seconds_count", namespace=ns)
    total = sample(metrics, "orbit_schedule_fire_lateness_seconds_sum", namespace=ns)
    assert count == 4 and 2 * 3 + 10 <= total < 2 * 3 + 10 + 5


def test_a_pass_says_how_far_off_the_next_instant_is(schedules: ScheduleDriver) -> None:
    schedules.travel(T - dt.timedelta(seconds=30))
    schedules.create("soon")  # first instant: T
    schedules.travel(T - dt.timedelta(seconds=10))

    report = scheduler_pass(schedules.pulse.engine, namespace=schedules.namespace)

    assert report.steps == []
    assert report.next_due_in is not None and 9.0 < report.next_due_in <= 10.0


def test_an_instant_that_cannot_be_decided_does_not_cut_the_wait(
    schedules: ScheduleDriver,
) -> None:
    """A schedule left due (its time zone is gone) must not make the loop spin: the wait is
    for the next instant still ahead."""
    schedules.travel(T - dt.timedelta(seconds=30))
    schedules.create("good")
    broken = schedules.create("broken").schedule_id
    schedules.pulse.tx(
        lambda c: c.execute(
            schedules_table.update()
            .where(schedules_table.c.id == broken)
            .values(time_zone="Gone/Away")
        )
    )
    schedules.travel(T + dt.timedelta(seconds=2))

    report = scheduler_pass(schedules.pulse.engine, namespace=schedules.namespace)

    assert report.errors == 1, "the broken schedule is still due"
    assert report.next_due_in is not None and 57.0 < report.next_due_in <= 58.0, "good: T+1min"


def test_an_instant_that_fell_due_after_the_scan_is_not_waited_past(
    schedules: ScheduleDriver,
) -> None:
    """A pass whose scan ran just before an instant, and whose read of the next one just after
    it: the wait is none (that instant), not until the instant a minute later."""
    schedules.travel(T - dt.timedelta(seconds=30))
    schedules.create("soon")  # first instant: T
    schedules.travel(T + dt.timedelta(seconds=0.2))
    scanned_at = T - dt.timedelta(seconds=0.5)

    due_in = schedules.pulse.tx(
        lambda c: seconds_to_next_instant(c, after=scanned_at, namespace=schedules.namespace)
    )

    assert due_in is not None and due_in <= 0


def test_the_loop_runs_its_next_pass_when_the_pass_says_work_is_due() -> None:
    ran = [threading.Event(), threading.Event()]
    passes: list[int] = []

    def run_pass() -> float:
        passes.append(len(passes))
        ran[min(len(passes), 2) - 1].set()
        return 0.0  # the next instant is due now

    loop = EngineLoop("scheduler", run_pass, interval=3600, next_wait=lambda due_in: due_in)
    loop.start()
    try:
        assert ran[0].wait(30), "the first pass runs at start"
        assert ran[1].wait(30), "the next runs for its instant, long before the hour"
    finally:
        loop.stop()
