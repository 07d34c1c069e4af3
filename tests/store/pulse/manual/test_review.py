"""Invariant 8: manual intervention keeps history, reason and identity, and never bypasses the
state machine; manual retry creates one linked successor and leaves the original as it was."""

from __future__ import annotations

import pytest

from orbit_store.errors import Conflict, InvalidRequest
from orbit_store.pulse.model import Outcome, Safety

from ...drivers.pulse_driver import PulseDriver


def _needs_review(pulse: PulseDriver) -> str:
    pulse.submit(safety=Safety.UNSAFE)
    grant = pulse.claim_one()
    pulse.start(grant)
    pulse.complete(grant, Outcome.UNKNOWN)
    return grant.task_id


def _failed(pulse: PulseDriver) -> str:
    pulse.submit()
    grant = pulse.claim_one()
    pulse.start(grant)
    pulse.fail(grant)
    return grant.task_id


def test_review_settles_a_task_with_evidence_identity_reason_and_audit_inv8(
    pulse: PulseDriver,
) -> None:
    task_id = _needs_review(pulse)
    assert pulse.review(task_id, "succeeded", evidence_ref="psp-charge-991") == "SUCCEEDED"
    last = pulse.events(task_id)[-1]
    assert (last.from_state, last.to_state, last.actor) == (
        "NEEDS_REVIEW",
        "SUCCEEDED",
        "alice@example.com",
    )
    assert last.details["evidence_ref"] == "psp-charge-991"
    [audit] = pulse.audit(task_id)
    assert (audit.action, audit.evidence_ref, audit.before, audit.after) == (
        "task.review",
        "psp-charge-991",
        {"state": "NEEDS_REVIEW"},
        {"state": "SUCCEEDED"},
    )


def test_review_against_a_stale_state_version_is_refused_inv8(pulse: PulseDriver) -> None:
    task_id = _needs_review(pulse)
    with pytest.raises(Conflict, match="changed since you looked"):
        pulse.review(task_id, "failed", expected_state_version=1)
    assert pulse.state(task_id) == "NEEDS_REVIEW"


@pytest.mark.parametrize(
    "missing", [{"evidence_ref": ""}, {"reason": " "}, {"actor": ""}, {"execution_ended": False}]
)
def test_review_without_evidence_reason_identity_or_declaration_is_refused_inv8(
    pulse: PulseDriver, missing: dict[str, object]
) -> None:
    task_id = _needs_review(pulse)
    with pytest.raises(InvalidRequest):
        pulse.review(task_id, "failed", **missing)
    assert pulse.state(task_id) == "NEEDS_REVIEW" and pulse.audit(task_id) == []


def test_only_tasks_awaiting_review_can_be_reviewed(pulse: PulseDriver) -> None:
    task_id = _failed(pulse)
    with pytest.raises(Conflict, match="only NEEDS_REVIEW"):
        pulse.review(task_id, "succeeded")


def test_manual_retry_creates_one_linked_successor_and_keeps_the_original_inv8(
    pulse: PulseDriver,
) -> None:
    task_id = _failed(pulse)
    retry = pulse.retry(task_id)
    assert pulse.state(task_id) == "FAILED", "the original keeps its terminal state"
    successor = pulse.task(retry.task_id)
    assert (successor.retry_of, successor.state, successor.submitted_by) == (
        task_id,
        "WAITING",
        "alice@example.com",
    )
    assert pulse.audit(task_id)[0].after == {"retry_task_id": retry.task_id}
    with pytest.raises(Conflict, match="already has its retry"):
        pulse.retry(task_id)


def test_manual_retry_needs_an_explicit_safe_to_retry_declaration(pulse: PulseDriver) -> None:
    task_id = _failed(pulse)
    with pytest.raises(InvalidRequest, match="safe_to_retry"):
        pulse.retry(task_id, safe_to_retry=False)


def test_a_task_awaiting_review_is_reviewed_before_it_can_be_retried(pulse: PulseDriver) -> None:
    task_id = _needs_review(pulse)
    with pytest.raises(Conflict, match="review"):
        pulse.retry(task_id)
    pulse.review(task_id, "failed")
    assert pulse.task(pulse.retry(task_id).task_id).retry_of == task_id


def test_a_cancelled_task_may_be_retried_by_hand_inv8(pulse: PulseDriver) -> None:
    task_id = pulse.submit().task_id
    pulse.cancel(task_id)
    assert pulse.state(task_id) == "CANCELLED"
    successor = pulse.task(pulse.retry(task_id).task_id)
    assert (successor.retry_of, successor.state) == (task_id, "WAITING")
    assert pulse.state(task_id) == "CANCELLED"


def test_a_succeeded_task_is_never_retried_by_hand_inv8(pulse: PulseDriver) -> None:
    pulse.submit()
    grant = pulse.claim_one()
    pulse.start(grant)
    pulse.succeed(grant, {"ok": True})
    with pytest.raises(Conflict, match="SUCCEEDED"):
        pulse.retry(grant.task_id)
    assert pulse.state(grant.task_id) == "SUCCEEDED"
