"""The reaper under bad data: backoff arithmetic is bounded for every
CRD-legal value, and one failing item never stops a pass — it is logged naming the task,
counted, and the pass goes on with the other items and namespaces."""

from __future__ import annotations

import logging

import pytest
import sqlalchemy as sa

from orbit_store.pulse.leases import expiry
from orbit_store.pulse.model import LeaseGrant, RetryPolicy, Safety
from orbit_store.schema import tasks

from ...drivers.pulse_driver import PulseDriver

DAY_MS, WEEK_MS = 86_400_000, 7 * 86_400_000


@pytest.mark.parametrize("attempts_used", [1, 2, 155, 156, 310, 1_000, 10**9])
def test_backoff_arithmetic_never_overflows_for_crd_legal_values(attempts_used: int) -> None:
    """Multiplier 100 (the CRD maximum) overflowed a float at attempt 156; capped first now."""
    policy = RetryPolicy(
        1000, backoff_initial_ms=DAY_MS, backoff_max_ms=WEEK_MS, backoff_multiplier=100
    )
    delay = policy.backoff_after(attempts_used)
    assert delay.total_seconds() * 1000 <= WEEK_MS
    jittered = policy.jittered_backoff_after(attempts_used)
    assert delay / 2 <= jittered <= delay


def test_backoff_still_grows_until_its_maximum() -> None:
    policy = RetryPolicy(10, backoff_initial_ms=1_000, backoff_max_ms=60_000, backoff_multiplier=2)
    assert [policy.backoff_after(n).total_seconds() for n in range(1, 9)] == [
        1,
        2,
        4,
        8,
        16,
        32,
        60,
        60,
    ]


def test_retry_backoff_is_jittered(pulse: PulseDriver) -> None:
    """Defect 8: tasks that fail together do not all come back at the same instant."""
    pulse.submit_many(8, backoff_initial_ms=100_000)
    grants = pulse.claim(limit=8)
    for grant in grants:
        pulse.start(grant)
        pulse.fail(grant, retryable=True)
    due = [pulse.task(g.task_id).available_at for g in grants]
    now = pulse.now()
    assert len(set(due)) == len(due)
    assert all(40 <= (d - now).total_seconds() <= 100 for d in due)


def _aged(pulse: PulseDriver, task_id: str, attempts_used: int) -> None:
    """As if the task had already run ``attempts_used`` times (its attempt rows are not there:
    these tests use a driver without the verify-at-teardown of the ``pulse`` fixture)."""
    pulse.tx(
        lambda c: c.execute(
            tasks.update().where(tasks.c.id == task_id).values(attempts_used=attempts_used)
        )
    )


def _running_with_huge_backoff(pulse: PulseDriver) -> LeaseGrant:
    pulse.submit(
        safety=Safety.SAFE,
        max_attempts=1000,
        backoff_initial_ms=DAY_MS,
        backoff_max_ms=WEEK_MS,
        backoff_multiplier=100,
    )
    grant = pulse.claim_one()
    pulse.start(grant)
    _aged(pulse, grant.task_id, 400)
    return grant


def test_a_lapse_with_an_enormous_backoff_is_retried_not_crashed(engine: sa.Engine) -> None:
    """Defect 4: this task's lapse raised OverflowError and killed every reaper pass."""
    pulse = PulseDriver(engine)
    task_id = _running_with_huge_backoff(pulse).task_id
    pulse.advance(31)
    report = pulse.reap()
    assert (report.leases_lapsed, report.errors) == (1, 0)
    assert pulse.state(task_id) == "WAITING"


def test_completing_with_an_enormous_backoff_is_applied(engine: sa.Engine) -> None:
    """Defect 4: the same arithmetic on the complete path was a 500 the SDK retried forever."""
    pulse = PulseDriver(engine)
    grant = _running_with_huge_backoff(pulse)
    assert pulse.fail(grant, retryable=True).task_state == "WAITING"


def test_one_bad_item_does_not_stop_the_reaper(
    pulse: PulseDriver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A lapse that raises (a defect we have not found yet) is logged naming its task, counted,
    and skipped; the pass still handles the other leases."""
    bad, good = pulse.submit(), pulse.submit()
    pulse.claim(limit=2)
    real = expiry.lapse_attempt

    def flaky(conn: sa.Connection, lapsed: expiry.LapsedAttempt) -> expiry.Decision | None:
        if lapsed.task_id == bad.task_id:
            raise RuntimeError("corrupt row")
        return real(conn, lapsed)

    monkeypatch.setattr(expiry, "lapse_attempt", flaky)
    pulse.advance(31)
    with caplog.at_level(logging.ERROR, logger="orbit_store.pulse.service"):
        report = pulse.reap()
    assert (report.leases_lapsed, report.errors) == (1, 1)
    assert pulse.state(good.task_id) == "WAITING" and pulse.state(bad.task_id) == "LEASED"
    assert any(bad.task_id in r.getMessage() for r in caplog.records)
    monkeypatch.undo()
    assert pulse.reap().leases_lapsed == 1  # the next pass gets it, once the defect is gone
