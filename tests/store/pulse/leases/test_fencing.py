"""Invariant 3: every call must present the current attempt and its secret token; a stale
holder is refused and can never overwrite newer state."""

from __future__ import annotations

from orbit_store.pulse.model import CompletionStatus, LeaseGrant, RenewStatus

from ...drivers.pulse_driver import PulseDriver


def _reclaimed(pulse: PulseDriver) -> tuple[LeaseGrant, LeaseGrant]:
    """A task whose first lease lapsed and which a second claim now holds."""
    pulse.submit()
    stale = pulse.claim_one()
    pulse.advance(31)
    pulse.reap()
    return stale, pulse.claim_one()


def test_stale_attempt_cannot_start_after_the_task_was_reclaimed_inv3(pulse: PulseDriver) -> None:
    stale, current = _reclaimed(pulse)
    refused = pulse.start(stale)
    assert not refused.started and refused.refusal == "stale_attempt"
    assert pulse.start(current).started


def test_stale_attempt_cannot_heartbeat_after_the_task_was_reclaimed_inv3(
    pulse: PulseDriver,
) -> None:
    stale, current = _reclaimed(pulse)
    pulse.start(current)
    before = pulse.attempts(current.task_id)[-1].lease_expires_at
    [result] = pulse.heartbeat(stale)
    assert result.status is RenewStatus.LOST
    assert pulse.attempts(current.task_id)[-1].lease_expires_at == before


def test_stale_attempt_cannot_complete_and_its_late_result_is_kept_as_evidence_inv3(
    pulse: PulseDriver,
) -> None:
    stale, current = _reclaimed(pulse)
    pulse.start(current)
    version = pulse.task(current.task_id).state_version
    late = pulse.succeed(stale, result={"charged": True})
    assert late.status is CompletionStatus.SUPERSEDED
    row = pulse.task(current.task_id)
    assert (row.state, row.state_version) == ("RUNNING", version)
    evidence = pulse.attempts(current.task_id)[0]
    assert evidence.outcome == "LAPSED", "the recorded outcome is never overwritten"
    assert (evidence.late_outcome, evidence.late_result) == ("SUCCEEDED", {"charged": True})
    assert pulse.succeed(current).status is CompletionStatus.APPLIED


def test_stale_attempt_cannot_complete_after_release(pulse: PulseDriver) -> None:
    from orbit_store.pulse.model import Outcome

    task = pulse.submit()
    grant = pulse.claim_one()
    assert pulse.complete(grant, Outcome.RELEASED).task_state == "WAITING"
    pulse.start(grant)
    assert pulse.succeed(grant).status is CompletionStatus.SUPERSEDED
    assert pulse.state(task.task_id) == "WAITING"


def test_a_wrong_token_is_refused_by_start_heartbeat_and_complete_inv3(
    pulse: PulseDriver,
) -> None:
    task = pulse.submit()
    grant = pulse.claim_one()
    assert pulse.start(grant, token="guess").refusal == "invalid_token"
    pulse.start(grant)
    assert pulse.heartbeat(grant, token="guess")[0].status is RenewStatus.LOST
    assert pulse.complete(grant, "succeeded", token="guess").status is CompletionStatus.REFUSED  # type: ignore[arg-type]
    assert pulse.state(task.task_id) == "RUNNING"


def test_heartbeat_extends_the_lease_from_database_time(pulse: PulseDriver) -> None:
    pulse.submit()
    grant = pulse.claim_one()
    pulse.start(grant)
    pulse.advance(20)
    [renewed] = pulse.heartbeat(grant)
    assert renewed.status is RenewStatus.EXTENDED
    pulse.advance(20)  # 40 s after start: alive only because of the renewal
    assert pulse.reap().leases_lapsed == 0
    assert pulse.state(grant.task_id) == "RUNNING"


def test_heartbeat_batch_reports_each_item(pulse: PulseDriver) -> None:
    pulse.submit()
    pulse.submit()
    first, second = pulse.claim(limit=2)
    pulse.start(first)
    pulse.cancel(first.task_id)
    pulse.cancel(second.task_id)  # LEASED: cancelled at once, so its lease is gone
    statuses = [r.status for r in pulse.heartbeat(first, second)]
    assert statuses == [RenewStatus.CANCEL_REQUESTED, RenewStatus.LOST]


def test_a_revoked_session_cannot_renew_its_leases(pulse: PulseDriver) -> None:
    session = pulse.session()
    pulse.submit()
    grant = pulse.claim_one()
    pulse.start(grant)
    pulse.revoke(session.id)
    assert pulse.heartbeat(grant)[0].status is RenewStatus.LOST


def test_renewal_never_extends_past_the_attempt_timeout(pulse: PulseDriver) -> None:
    pulse.queue("short", lease_seconds=30, attempt_timeout_seconds=45)
    pulse.submit(queue="short")
    grant = pulse.claim_one(queues=["short"])
    pulse.start(grant)
    pulse.advance(25)
    [renewed] = pulse.heartbeat(grant)
    assert renewed.status is RenewStatus.EXTENDED
    pulse.advance(21)  # 46 s after start
    assert pulse.heartbeat(grant)[0].status is RenewStatus.LOST


def test_renewal_never_extends_a_lease_past_the_tasks_deadline(pulse: PulseDriver) -> None:
    task = pulse.submit(deadline_at=pulse.now(seconds=40))
    deadline = pulse.task(task.task_id).deadline_at
    grant = pulse.claim_one()
    pulse.start(grant)
    pulse.advance(25)  # a 30 s renewal would run to 55 s; the deadline is at 40 s
    [renewed] = pulse.heartbeat(grant)
    assert renewed.status is RenewStatus.EXTENDED and renewed.lease_expires_at == deadline
    pulse.advance(16)
    [lost] = pulse.heartbeat(grant)
    assert lost.status is RenewStatus.LOST and lost.lease_expires_at is None
    assert pulse.reap().leases_lapsed == 1
    assert pulse.state(task.task_id) == "FAILED", "no retry can run before the deadline"
