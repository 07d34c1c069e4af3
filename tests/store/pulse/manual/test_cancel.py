"""Cancellation is a persisted intent; a RUNNING task ends CANCELLED only when its worker
confirms, and a confirmed success is never overwritten (seed §2)."""

from __future__ import annotations

import pytest

from orbit_store.errors import Conflict, NotFound
from orbit_store.pulse.model import CompletionStatus, Outcome, RenewStatus, StartRefusal
from orbit_store.schema import tasks

from ...drivers.pulse_driver import PulseDriver


def test_cancelling_a_waiting_task_cancels_it_at_once(pulse: PulseDriver) -> None:
    task = pulse.submit()
    result = pulse.cancel(task.task_id, reason="customer withdrew")
    assert (result.state, result.changed) == ("CANCELLED", True)
    assert pulse.claim() == []
    assert pulse.result_events(task.task_id)[0].kind == "task.cancelled"


def test_cancelling_a_leased_task_cancels_it_and_refuses_its_start(pulse: PulseDriver) -> None:
    task = pulse.submit()
    grant = pulse.claim_one()
    assert pulse.cancel(task.task_id).state == "CANCELLED"
    assert pulse.start(grant).refusal == "stale_attempt"
    assert pulse.attempts(task.task_id)[0].outcome == "CANCELLED"


def test_cancelling_a_running_task_only_requests_it_until_the_worker_confirms(
    pulse: PulseDriver,
) -> None:
    task = pulse.submit()
    grant = pulse.claim_one()
    pulse.start(grant)
    requested = pulse.cancel(task.task_id)
    assert (requested.state, requested.cancel_requested) == ("RUNNING", True)
    assert pulse.heartbeat(grant)[0].status is RenewStatus.CANCEL_REQUESTED
    assert pulse.complete(grant, Outcome.CANCELLED).task_state == "CANCELLED"


def test_a_success_racing_a_cancel_request_is_kept(pulse: PulseDriver) -> None:
    task = pulse.submit()
    grant = pulse.claim_one()
    pulse.start(grant)
    pulse.cancel(task.task_id)
    done = pulse.succeed(grant, result={"shipped": True})
    assert (done.status, done.task_state) == (CompletionStatus.APPLIED, "SUCCEEDED")
    after = pulse.cancel(task.task_id)
    assert (after.state, after.changed) == ("SUCCEEDED", False)


def test_a_failure_after_a_cancel_request_ends_cancelled_not_retried(pulse: PulseDriver) -> None:
    task = pulse.submit()
    grant = pulse.claim_one()
    pulse.start(grant)
    pulse.cancel(task.task_id)
    assert pulse.fail(grant, retryable=True).task_state == "CANCELLED"


def test_cancel_is_audited_with_identity_and_reason_inv8(pulse: PulseDriver) -> None:
    task = pulse.submit()
    pulse.cancel(task.task_id, actor="bob@example.com", reason="duplicate order")
    [audit] = pulse.audit(task.task_id)
    assert (audit.actor, audit.action, audit.reason) == (
        "bob@example.com",
        "task.cancel",
        "duplicate order",
    )
    assert audit.before == {"state": "WAITING"}


def test_a_task_awaiting_review_is_not_cancelled(pulse: PulseDriver) -> None:
    task = pulse.submit()
    grant = pulse.claim_one()
    pulse.start(grant)
    pulse.complete(grant, Outcome.UNKNOWN)
    with pytest.raises(Conflict, match="review"):
        pulse.cancel(task.task_id)


def test_cancelling_a_task_of_another_namespace_is_not_found(pulse: PulseDriver) -> None:
    from ...drivers.pulse_driver import PulseDriver as Driver

    task = pulse.submit()
    with pytest.raises(NotFound):
        Driver(pulse.base_engine).cancel(task.task_id)
    assert pulse.state(task.task_id) == "WAITING"


def test_a_start_finding_a_cancel_request_is_refused_and_the_task_cancelled(
    pulse: PulseDriver,
) -> None:
    """The guard in ``start_attempt`` (docs/reference/api.md ``409 cancel-requested``). Today only a
    RUNNING task is given a cancel request and none goes back to LEASED, so the request is
    written here directly: a row from another code version, or a future path, meets the guard."""
    task = pulse.submit()
    grant = pulse.claim_one()
    pulse.tx(
        lambda c: c.execute(
            tasks.update().where(tasks.c.id == task.task_id).values(cancel_requested=True)
        )
    )
    refused = pulse.start(grant)
    assert (refused.started, refused.refusal) == (False, StartRefusal.CANCEL_REQUESTED)
    assert pulse.state(task.task_id) == "CANCELLED"
    assert pulse.attempts(task.task_id)[0].outcome == "CANCELLED"
    assert pulse.heartbeat(grant)[0].status is RenewStatus.LOST
