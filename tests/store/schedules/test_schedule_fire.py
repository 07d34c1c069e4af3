"""Firing schedules (seed §5 "调度触发"): invariant 5 — occurrence, task and progress commit
together — and the policies of docs/concepts/schedules.md, on a database clock the test moves."""

from __future__ import annotations

import datetime as dt
import functools

import pytest
import sqlalchemy as sa

from orbit_store.pulse.limits.queues import delete_queue
from orbit_store.pulse.limits.quota_declarations import QuotaSpec, put_quota
from orbit_store.pulse.model import Outcome
from orbit_store.schedules.fire import fire_next, submission_key
from orbit_store.schedules.model import ConcurrencyPolicy, InvalidSchedule
from orbit_store.schema import submission_keys

from ..drivers.pulse_driver import PulseDriver
from ..drivers.schedule_driver import ScheduleDriver

T = dt.datetime(2026, 6, 1, 10, 0)  # a Monday, 10:00 UTC
MIN = dt.timedelta(minutes=1)


def at(minutes: float, seconds: float = 0.5) -> dt.datetime:
    return T + dt.timedelta(minutes=minutes, seconds=seconds)


def test_a_fire_commits_occurrence_task_and_progress_together_inv5(
    schedules: ScheduleDriver, pulse: PulseDriver
) -> None:
    schedules.travel(at(-1, 30))
    created = schedules.create(params={"kind": "daily"})
    assert created.next_fire_at == T

    report = schedules.run_at(at(0))

    [step] = report.steps
    assert (step.status, step.reason, step.scheduled_at) == ("FIRED", "Scheduled", T)
    [occurrence] = schedules.occurrences()
    task = pulse.task(occurrence.task_id)
    assert (task.handler, task.params, task.schedule_id) == (
        "jobs.run",
        {"kind": "daily"},
        created.schedule_id,
    )
    assert (task.state, task.submitted_by) == ("WAITING", "schedule/job")
    view = schedules.get()
    assert (view.last_fire_at, view.next_fire_at) == (T, T + MIN)
    assert 0 < occurrence.recorded_at.timestamp() - T.timestamp() < 30


def test_the_same_instant_is_decided_once_inv5_inv6(schedules: ScheduleDriver) -> None:
    schedules.travel(at(-1, 30))
    schedule_id = schedules.create().schedule_id
    schedules.travel(at(0))
    assert len(schedules.run().steps) == 1
    assert schedules.run().steps == []
    again = schedules.pulse.tx(
        functools.partial(fire_next, namespace=schedules.namespace, schedule_id=schedule_id)
    )
    assert again is None
    assert len(schedules.occurrences()) == 1 and len(schedules.tasks()) == 1


def test_the_task_carries_a_key_made_of_schedule_and_instant_inv6(
    schedules: ScheduleDriver,
) -> None:
    schedules.travel(at(-1, 30))
    schedule_id = schedules.create().schedule_id
    schedules.run_at(at(0))
    key = submission_key(schedule_id, T)
    assert key == f"schedule:{schedule_id}:2026-06-01T10:00:00.000000Z"
    [task] = schedules.tasks()
    with schedules.pulse.engine.connect() as conn:
        found = conn.execute(
            sa.select(submission_keys.c.task_id).where(
                submission_keys.c.namespace == schedules.namespace,
                submission_keys.c.idempotency_key == key,
            )
        ).scalar_one()
    assert found == task.id


def test_a_task_refused_by_a_quota_is_skipped_and_the_schedule_moves_on(
    schedules: ScheduleDriver, pulse: PulseDriver
) -> None:
    pulse.tx(lambda c: put_quota(c, pulse.namespace, QuotaSpec(name="full", max_waiting=1)))
    schedules.travel(at(-1, 30))
    schedules.create()
    schedules.run_at(at(0))
    schedules.run_at(at(1))  # the first task still waits: the quota refuses the second

    decided = schedules.decided()
    assert decided == [(T, "FIRED", "Scheduled"), (T + MIN, "SKIPPED", "QuotaExceeded")]
    assert "quota 'full'" in schedules.occurrences()[1].message
    assert schedules.get().next_fire_at == T + 2 * MIN
    pulse.cancel(schedules.tasks()[0].id)
    schedules.run_at(at(2))
    assert schedules.decided()[-1] == (T + 2 * MIN, "FIRED", "Scheduled")


def test_a_queue_deleted_after_the_schedule_is_recorded_as_skipped(
    schedules: ScheduleDriver, pulse: PulseDriver
) -> None:
    pulse.queue("reports")
    schedules.travel(at(-1, 30))
    schedules.create(queue="reports")
    pulse.tx(lambda c: delete_queue(c, pulse.namespace, "reports"))
    schedules.run_at(at(0))
    [occurrence] = schedules.occurrences()
    assert (occurrence.status, occurrence.reason, occurrence.task_id) == (
        "SKIPPED",
        "QueueNotFound",
        None,
    )
    assert "queue 'reports' is not declared" in occurrence.message


def test_a_schedule_must_name_a_declared_queue(schedules: ScheduleDriver) -> None:
    with pytest.raises(InvalidSchedule) as refused:
        schedules.create(queue="nowhere")
    assert refused.value.field == "task.queue"


# --- concurrencyPolicy ---------------------------------------------------------------------


def test_allow_fires_while_the_previous_task_runs(
    schedules: ScheduleDriver, pulse: PulseDriver
) -> None:
    schedules.travel(at(-1, 30))
    schedules.create(concurrency_policy="Allow")
    schedules.run_at(at(0))
    pulse.start(pulse.claim_one())
    schedules.run_at(at(1))
    assert [d[1:] for d in schedules.decided()] == [("FIRED", "Scheduled")] * 2
    assert [t.state for t in schedules.tasks()] == ["RUNNING", "WAITING"]


def test_forbid_skips_while_the_previous_task_runs(
    schedules: ScheduleDriver, pulse: PulseDriver
) -> None:
    schedules.travel(at(-1, 30))
    schedules.create(concurrency_policy="Forbid")
    schedules.run_at(at(0))
    grant = pulse.claim_one()
    pulse.start(grant)
    schedules.run_at(at(1))
    pulse.succeed(grant)
    schedules.run_at(at(2))

    assert schedules.decided() == [
        (T, "FIRED", "Scheduled"),
        (T + MIN, "SKIPPED", "ConcurrencyForbid"),
        (T + 2 * MIN, "FIRED", "Scheduled"),
    ]
    assert "(RUNNING) unfinished" in schedules.occurrences()[1].message
    assert len(schedules.tasks()) == 2


def test_replace_cancels_the_previous_task_and_fires(
    schedules: ScheduleDriver, pulse: PulseDriver
) -> None:
    schedules.travel(at(-1, 30))
    schedules.create(concurrency_policy="Replace")
    schedules.run_at(at(0))
    pulse.start(pulse.claim_one())
    schedules.run_at(at(1))  # the running task is asked to stop, a new one is submitted
    schedules.run_at(at(2))  # the first still runs (its worker has not stopped), the second waits

    first, second, third = schedules.tasks()
    assert (first.state, bool(first.cancel_requested)) == ("RUNNING", True)
    assert second.state == "CANCELLED"  # never started: cancelled at once by the third fire
    assert third.state == "WAITING"
    assert [d[1:] for d in schedules.decided()] == [
        ("FIRED", "Scheduled"),
        ("FIRED", "Replaced"),
        ("FIRED", "Replaced"),
    ]
    assert f"cancelled task {first.id} (RUNNING)" in schedules.occurrences()[1].message


def test_replace_starts_the_new_task_only_once_the_previous_one_has_ended(
    schedules: ScheduleDriver, pulse: PulseDriver
) -> None:
    """As a CronJob deletes the old Job before it creates the new one: old and new never run
    at once."""
    schedules.travel(at(-1, 30))
    schedules.create(concurrency_policy="Replace")
    schedules.run_at(at(0))
    running = pulse.claim_one()
    pulse.start(running)
    schedules.run_at(at(1))

    assert pulse.claim(limit=5) == [], "the new task waits while the old one runs"
    pulse.complete(running, Outcome.CANCELLED)  # its worker confirms the handler stopped
    first, second = schedules.tasks()
    assert first.state == "CANCELLED"
    assert pulse.claim_one().task_id == second.id


def test_replace_waits_for_a_previous_task_that_finishes_instead_of_stopping(
    schedules: ScheduleDriver, pulse: PulseDriver
) -> None:
    schedules.travel(at(-1, 30))
    schedules.create(concurrency_policy="Replace")
    schedules.run_at(at(0))
    running = pulse.claim_one()
    pulse.start(running)
    schedules.run_at(at(1))
    assert pulse.claim(limit=5) == []
    pulse.succeed(running)  # it finished before it saw the cancel: its success stands
    first, second = schedules.tasks()
    assert first.state == "SUCCEEDED"
    assert pulse.claim_one().task_id == second.id


def test_replace_cancels_every_unfinished_previous_task_however_many(
    schedules: ScheduleDriver, pulse: PulseDriver
) -> None:
    schedules.travel(T - dt.timedelta(seconds=0.5))
    schedules.create(cron="* * * * * *", misfire_policy="CatchUp", catch_up_limit=200)
    schedules.travel(T + dt.timedelta(seconds=149.5))
    while schedules.run().steps:  # 150 every-second instants fire, nobody works on them
        pass
    previous = [t.id for t in schedules.tasks()]
    assert len(previous) >= 150  # and more, if the passes took seconds of the clock
    schedules.update(concurrency_policy=ConcurrencyPolicy.REPLACE)
    schedules.run_at(schedules.now() + dt.timedelta(seconds=1.5))

    states = {t.id: t.state for t in schedules.tasks()}
    assert {states[task_id] for task_id in previous} == {"CANCELLED"}
    *replaced, new = sorted(task_id for task_id in states if task_id not in previous)
    assert states[new] == "WAITING"
    assert {states[task_id] for task_id in replaced} <= {"CANCELLED"}  # fired and replaced since
    assert pulse.claim_one().task_id == new
    first_replace = next(o for o in schedules.occurrences() if o.reason == "Replaced")
    assert f"and {len(previous) - 3} more" in first_replace.message


def test_replace_refused_by_a_quota_cancels_nothing(
    schedules: ScheduleDriver, pulse: PulseDriver
) -> None:
    schedules.travel(at(-1, 30))
    schedules.create(concurrency_policy="Replace")
    schedules.run_at(at(0))
    pulse.start(pulse.claim_one())
    pulse.submit("other.job")  # fills the quota below
    pulse.tx(lambda c: put_quota(c, pulse.namespace, QuotaSpec(name="full", max_waiting=1)))
    schedules.run_at(at(1))

    [first] = schedules.tasks()
    assert (first.state, bool(first.cancel_requested)) == ("RUNNING", False)
    assert schedules.decided()[-1][1:] == ("SKIPPED", "QuotaExceeded")


# --- startingDeadlineSeconds and misfires ----------------------------------------------------


def test_starting_deadline_turns_a_too_late_fire_into_missed(schedules: ScheduleDriver) -> None:
    schedules.travel(at(-1, 30))
    schedules.create(starting_deadline_seconds=20)
    schedules.run_at(at(0, 45))  # 45 s late
    schedules.run_at(at(1, 5))  # 5 s late
    assert schedules.decided() == [
        (T, "MISSED", "StartingDeadlineExceeded"),
        (T + MIN, "FIRED", "Scheduled"),
    ]
    assert "past startingDeadlineSeconds 20" in schedules.occurrences()[0].message


OUTAGE = dt.timedelta(hours=3, minutes=5)  # no scheduler ran from T-30s to T+3h05m


@pytest.mark.parametrize(
    ("policy", "limit", "expected"),
    [
        ("Skip", 1, [(0, 13, "MISSED", "MisfireSkip")]),
        ("FireOnce", 1, [(0, 12, "MISSED", "MisfireFireOnce"), (12, 1, "FIRED", "FireOnce")]),
        (
            "CatchUp",
            3,
            [
                (0, 10, "MISSED", "MisfireCatchUpLimit"),
                (10, 1, "FIRED", "CatchUp"),
                (11, 1, "FIRED", "CatchUp"),
                (12, 1, "FIRED", "CatchUp"),
            ],
        ),
        ("CatchUp", 50, [(i, 1, "FIRED", "CatchUp") for i in range(13)]),
    ],
)
def test_each_misfire_policy_after_a_3_hour_outage(
    schedules: ScheduleDriver,
    policy: str,
    limit: int,
    expected: list[tuple[int, int, str, str]],
) -> None:
    every_15 = dt.timedelta(minutes=15)
    schedules.travel(at(-0.5, 0))
    schedules.create(cron="*/15 * * * *", misfire_policy=policy, catch_up_limit=limit)
    schedules.run_at(T + OUTAGE)  # 13 instants came due: T .. T+3h, all of them late

    got = [
        (int((o.scheduled_at - T) / every_15), o.instants, o.status, o.reason)
        for o in schedules.occurrences()
    ]
    assert got == expected
    fired = [o for o in schedules.occurrences() if o.status == "FIRED"]
    assert [o.task_id for o in fired] == [t.id for t in schedules.tasks()], "oldest first"
    assert schedules.get().next_fire_at == T + 13 * every_15  # the next instant, on time
    schedules.run_at(T + 13 * every_15 + dt.timedelta(seconds=1))
    assert schedules.decided()[-1] == (T + 13 * every_15, "FIRED", "Scheduled")


def test_fire_once_after_an_outage_just_past_the_threshold_fires_the_latest_instant(
    schedules: ScheduleDriver,
) -> None:
    """As a CronJob does: after an outage, one task, for the latest instant that came due."""
    every_15 = dt.timedelta(seconds=15)
    schedules.travel(T - dt.timedelta(seconds=0.5))
    schedules.create(cron="*/15 * * * * *")  # FireOnce is the default
    schedules.run_at(T + dt.timedelta(seconds=75.5))  # T+0s is 75 s late, T+75s is not

    assert [(o.scheduled_at, o.instants, o.status, o.reason) for o in schedules.occurrences()] == [
        (T, 5, "MISSED", "MisfireFireOnce"),
        (T + 5 * every_15, 1, "FIRED", "Scheduled"),
    ]
    assert len(schedules.tasks()) == 1


def test_fire_once_honours_the_starting_deadline_of_the_latest_instant(
    schedules: ScheduleDriver,
) -> None:
    schedules.travel(T - dt.timedelta(seconds=0.5))
    schedules.create(cron="*/15 * * * * *", starting_deadline_seconds=5)
    schedules.run_at(T + dt.timedelta(seconds=82))  # the latest, T+75s, is 7 s late

    assert [(o.instants, o.status, o.reason) for o in schedules.occurrences()] == [
        (5, "MISSED", "MisfireFireOnce"),
        (1, "MISSED", "StartingDeadlineExceeded"),
    ]
    assert schedules.tasks() == []


def test_catch_up_still_honours_the_starting_deadline(schedules: ScheduleDriver) -> None:
    schedules.travel(at(-0.5, 0))
    schedules.create(
        cron="*/15 * * * *",
        misfire_policy="CatchUp",
        catch_up_limit=2,
        starting_deadline_seconds=600,
    )
    schedules.run_at(T + dt.timedelta(hours=2, minutes=54))  # T+2h45 is 9 min late, T+2h30 24
    assert [(o.instants, o.status, o.reason) for o in schedules.occurrences()] == [
        (10, "MISSED", "MisfireCatchUpLimit"),
        (1, "MISSED", "StartingDeadlineExceeded"),
        (1, "FIRED", "CatchUp"),
    ]


def test_an_every_minute_schedule_fires_its_current_instant_after_an_outage(
    schedules: ScheduleDriver,
) -> None:
    """However long the outage, the instant that is due now is on time and fires."""
    schedules.travel(at(-0.5, 0))
    schedules.create(misfire_policy="Skip")
    schedules.run_at(T + dt.timedelta(hours=3, seconds=20))
    assert [(o.instants, o.status, o.reason) for o in schedules.occurrences()] == [
        (180, "MISSED", "MisfireSkip"),
        (1, "FIRED", "Scheduled"),
    ]
    assert schedules.occurrences()[0].through_at == T + dt.timedelta(minutes=179)


# --- bounds, edits, suspension -----------------------------------------------------------------


def test_nothing_fires_before_the_start_bound(schedules: ScheduleDriver) -> None:
    schedules.travel(at(-1, 30))
    schedules.create(start_at=T + 5 * MIN)
    assert schedules.get().next_fire_at == T + 5 * MIN
    for minute in range(6):
        schedules.run_at(at(minute))
    assert schedules.decided() == [(T + 5 * MIN, "FIRED", "Scheduled")]


def test_the_end_bound_stops_the_schedule_and_says_it_ended(schedules: ScheduleDriver) -> None:
    schedules.travel(at(-1, 30))
    schedules.create(end_at=T + MIN)
    for minute in range(4):
        schedules.run_at(at(minute))
    assert [d[0] for d in schedules.decided()] == [T, T + MIN]
    view = schedules.get()
    assert (view.next_fire_at, view.state) == (None, "Ended")


def test_an_edit_while_due_records_the_old_instant_and_fires_no_instant_twice(
    schedules: ScheduleDriver, pulse: PulseDriver
) -> None:
    schedules.travel(at(-1, 30))
    schedules.create(params={"v": 1})
    schedules.run_at(at(0))
    schedules.travel(at(1, 20))  # T+1m is due, not yet fired …
    edited = schedules.update(task={"params": {"v": 2}})  # … when the schedule changes

    assert (edited.version, edited.next_fire_at) == (2, T + 2 * MIN)
    schedules.run()
    schedules.run_at(at(2))
    decided = [
        (o.scheduled_at, o.status, o.reason, o.schedule_version) for o in schedules.occurrences()
    ]
    assert decided == [
        (T, "FIRED", "Scheduled", 1),
        (T + MIN, "MISSED", "Superseded", 1),
        (T + 2 * MIN, "FIRED", "Scheduled", 2),
    ]
    assert [t.params for t in schedules.tasks()] == [{"v": 1}, {"v": 2}]


def test_an_edit_to_the_cron_expression_starts_from_the_edit(schedules: ScheduleDriver) -> None:
    schedules.travel(at(-1, 30))
    schedules.create()
    schedules.run_at(at(0))
    schedules.travel(at(0, 40))
    edited = schedules.update(cron="*/10 * * * *")
    assert (edited.version, edited.next_fire_at) == (2, T + 10 * MIN)
    assert schedules.get().spec.cron == "*/10 * * * *"
    unchanged = schedules.update(cron="*/10 * * * *")
    assert (unchanged.changed, unchanged.version) == (False, 2)


def test_a_suspended_schedule_fires_nothing_and_resumes_from_now(schedules: ScheduleDriver) -> None:
    schedules.travel(at(-1, 30))
    schedules.create()
    schedules.run_at(at(0))
    schedules.travel(at(0, 30))
    suspended = schedules.suspend()
    assert (suspended.next_fire_at, schedules.get().state) == (None, "Suspended")
    for minute in range(1, 5):
        assert schedules.run_at(at(minute)).steps == []
    schedules.travel(at(4, 40))
    resumed = schedules.suspend(suspended=False)
    assert resumed.next_fire_at == T + 5 * MIN
    schedules.run_at(at(5))
    assert [d[0] for d in schedules.decided()] == [T, T + 5 * MIN]


# --- daylight-saving time, through real passes --------------------------------------------

DST_CASES = [
    # zone, UTC instant of the change, a fixed-time expression in the changed hour, where it fires
    (
        "America/New_York",
        dt.datetime(2026, 3, 8, 7, 0),
        "30 2 * * *",
        [dt.datetime(2026, 3, 8, 7, 0)],
    ),
    (
        "America/New_York",
        dt.datetime(2026, 11, 1, 6, 0),
        "30 1 * * *",
        [dt.datetime(2026, 11, 1, 5, 30)],
    ),
    (
        "Europe/Berlin",
        dt.datetime(2026, 3, 29, 1, 0),
        "30 2 * * *",
        [dt.datetime(2026, 3, 29, 1, 0)],
    ),
    (
        "Europe/Berlin",
        dt.datetime(2026, 10, 25, 1, 0),
        "30 2 * * *",
        [dt.datetime(2026, 10, 25, 0, 30)],
    ),
]


@pytest.mark.parametrize(("zone", "change", "fixed", "fixed_fires"), DST_CASES)
def test_every_minute_across_a_dst_change_fires_each_utc_minute_once(
    schedules: ScheduleDriver,
    zone: str,
    change: dt.datetime,
    fixed: str,
    fixed_fires: list[dt.datetime],
) -> None:
    """Gap: the missing wall-clock hour has no instants, the fixed time fires at the jump.
    Fold: both passes of the repeated hour fire every minute, the fixed time fires once."""
    start = change - dt.timedelta(minutes=90)
    schedules.travel(start - dt.timedelta(seconds=30))
    schedules.create("minutely", "* * * * *", time_zone=zone)
    schedules.create("fixed", fixed, time_zone=zone)
    minutes = 150
    for m in range(minutes):
        schedules.run_at(start + dt.timedelta(minutes=m, seconds=1))

    minutely = schedules.decided("minutely")
    assert [d[0] for d in minutely] == [start + dt.timedelta(minutes=m) for m in range(minutes)]
    assert {d[1:] for d in minutely} == {("FIRED", "Scheduled")}
    assert [d[0] for d in schedules.decided("fixed")] == fixed_fires
    assert len(schedules.tasks("minutely")) == minutes
