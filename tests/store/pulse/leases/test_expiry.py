"""Lapsed leases, deadlines and sessions: the reaper re-checks lease and state_version, and a
lost worker is not a business failure (invariants 3, 7)."""

from __future__ import annotations

from orbit_store.pulse.model import RenewStatus, Safety

from ...drivers.pulse_driver import PulseDriver


def test_a_lease_that_lapses_before_start_returns_the_task_to_waiting(pulse: PulseDriver) -> None:
    task = pulse.submit()
    pulse.claim_one()
    pulse.advance(31)
    assert pulse.reap().leases_lapsed == 1
    assert pulse.state(task.task_id) == "WAITING"
    assert pulse.attempts(task.task_id)[0].outcome == "LAPSED"


def test_a_lease_that_lapses_before_start_with_attempts_used_up_fails(pulse: PulseDriver) -> None:
    task = pulse.submit(max_attempts=1)
    pulse.claim_one()
    pulse.advance(31)
    pulse.reap()
    assert pulse.state(task.task_id) == "FAILED"


def test_a_safe_task_whose_running_lease_lapsed_is_retried(pulse: PulseDriver) -> None:
    task = pulse.submit(safety=Safety.SAFE, backoff_initial_ms=1_000)
    pulse.start(pulse.claim_one())
    pulse.advance(31)
    pulse.reap()
    assert pulse.state(task.task_id) == "WAITING"
    pulse.advance(2)
    assert pulse.claim_one().task_id == task.task_id


def test_an_unsafe_task_whose_running_lease_lapsed_goes_to_review_not_rerun_inv7(
    pulse: PulseDriver,
) -> None:
    """Invariant 7: without evidence of the side effect, a lost worker is not re-run."""
    task = pulse.submit(safety=Safety.UNSAFE)
    pulse.start(pulse.claim_one())
    pulse.advance(31)
    pulse.reap()
    assert pulse.state(task.task_id) == "NEEDS_REVIEW"
    pulse.advance(3600)
    assert pulse.claim(session_id=pulse.session("worker-2").id) == []


def test_the_reaper_never_lapses_a_freshly_renewed_lease_inv3(pulse: PulseDriver) -> None:
    renewed, idle = pulse.submit(), pulse.submit()
    grants = {g.task_id: g for g in pulse.claim(limit=2)}
    for grant in grants.values():
        pulse.start(grant)
    pulse.advance(25)  # 5 s left on both 30 s leases
    assert pulse.heartbeat(grants[renewed.task_id])[0].status is RenewStatus.EXTENDED
    pulse.advance(10)  # past the original leases, inside the renewed one
    assert pulse.reap().leases_lapsed == 1, "only the lease nobody renewed lapses"
    assert pulse.state(renewed.task_id) == "RUNNING"
    assert pulse.attempts(renewed.task_id)[0].outcome is None
    assert pulse.attempts(idle.task_id)[0].outcome == "LAPSED"


def test_a_lapse_decision_rechecks_the_lease_a_renewal_moved_after_the_scan_inv3(
    pulse: PulseDriver,
) -> None:
    from orbit_store.pulse.leases.expiry import LapsedAttempt, lapse_attempt

    renewed, idle = pulse.submit(), pulse.submit()
    grants = {g.task_id: g for g in pulse.claim(limit=2)}
    for grant in grants.values():
        pulse.start(grant)
    # What a reaper's scan hands to its decisions; the worker renews before they run.
    scanned = [LapsedAttempt(pulse.namespace, g.attempt_id, g.task_id) for g in grants.values()]
    pulse.advance(25)
    assert pulse.heartbeat(grants[renewed.task_id])[0].status is RenewStatus.EXTENDED
    pulse.advance(10)  # the decisions run past the old leases, inside the renewed one
    decisions = {c.task_id: pulse.tx(lambda conn, c=c: lapse_attempt(conn, c)) for c in scanned}
    assert decisions[renewed.task_id] is None, "the renewal wins over the stale scan"
    assert decisions[idle.task_id] is not None, "the lease nobody renewed still lapses"
    assert pulse.state(renewed.task_id) == "RUNNING"


def test_a_waiting_task_past_its_deadline_fails(pulse: PulseDriver) -> None:
    task = pulse.submit(deadline_at=pulse.now(seconds=10))
    pulse.advance(11)
    assert pulse.reap().deadlines_failed == 1
    assert pulse.state(task.task_id) == "FAILED"


def test_revoking_a_session_lapses_its_leases_through_the_same_rules(pulse: PulseDriver) -> None:
    session = pulse.session()
    safe = pulse.submit(safety=Safety.SAFE)
    unsafe = pulse.submit(safety=Safety.UNSAFE)
    leased = pulse.submit()
    grants = {g.task_id: g for g in pulse.claim(limit=3)}
    pulse.start(grants[safe.task_id])
    pulse.start(grants[unsafe.task_id])
    pulse.revoke(session.id)
    assert pulse.reap().leases_lapsed == 3
    assert pulse.state(safe.task_id) == "WAITING"
    assert pulse.state(unsafe.task_id) == "NEEDS_REVIEW"
    assert pulse.state(leased.task_id) == "WAITING"


def test_a_session_not_renewed_in_time_expires_and_its_leases_lapse(pulse: PulseDriver) -> None:
    pulse.session(ttl_seconds=20)
    task = pulse.submit(safety=Safety.UNSAFE)
    pulse.start(pulse.claim_one())
    pulse.advance(21)
    report = pulse.reap()
    assert (report.sessions_expired, report.leases_lapsed) == (1, 1)
    assert pulse.state(task.task_id) == "NEEDS_REVIEW"


def test_a_lapsed_running_safe_task_with_a_cancel_request_ends_cancelled(
    pulse: PulseDriver,
) -> None:
    task = pulse.submit(safety=Safety.SAFE)
    pulse.start(pulse.claim_one())
    pulse.cancel(task.task_id)
    pulse.advance(31)
    pulse.reap()
    assert pulse.state(task.task_id) == "CANCELLED"
