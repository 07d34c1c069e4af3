"""Completion: invariant 4 (outcome, attempt, permits, events commit together) and 7 (an unknown
outcome is reviewed, never blindly re-run)."""

from __future__ import annotations

import pytest

from orbit_store.errors import InvalidRequest
from orbit_store.pulse.model import CompletionStatus, Outcome, TaskState

from ...drivers.pulse_driver import PulseDriver


def _running(pulse: PulseDriver, **submit: object):  # type: ignore[no-untyped-def]
    pulse.submit(**submit)
    grant = pulse.claim_one()
    assert pulse.start(grant).started
    return grant


def test_success_commits_attempt_result_task_state_and_both_events_together_inv4(
    pulse: PulseDriver,
) -> None:
    grant = _running(pulse, concurrency_key="acct-1")
    pulse.succeed(grant, result={"receipt": "r-1"})
    [attempt] = pulse.attempts(grant.task_id)
    assert (attempt.state, attempt.outcome, attempt.result) == (
        "FINISHED",
        "SUCCEEDED",
        {"receipt": "r-1"},
    )
    assert pulse.task(grant.task_id).result == {"receipt": "r-1"}
    assert pulse.events(grant.task_id)[-1].to_state == "SUCCEEDED"
    [event] = pulse.result_events(grant.task_id)
    assert (event.kind, event.payload["result"]) == ("task.succeeded", {"receipt": "r-1"})


def test_retryable_failure_waits_out_its_backoff_and_runs_again(pulse: PulseDriver) -> None:
    grant = _running(pulse, backoff_initial_ms=10_000)
    done = pulse.fail(grant, retryable=True, error={"type": "Timeout", "message": "upstream"})
    assert done.task_state is TaskState.WAITING
    assert pulse.claim() == [], "backoff not over yet"
    pulse.advance(11)
    again = pulse.claim_one()
    assert again.task_id == grant.task_id and again.generation > grant.generation
    assert pulse.result_events(grant.task_id) == [], "a retry is not an outcome"


def test_retryable_failure_with_attempts_used_up_fails(pulse: PulseDriver) -> None:
    grant = _running(pulse, max_attempts=1)
    done = pulse.fail(grant, retryable=True)
    assert done.task_state is TaskState.FAILED
    assert "budget exhausted" in (done.reason or "")


def test_retry_that_would_land_after_the_deadline_fails_now(pulse: PulseDriver) -> None:
    grant = _running(pulse, backoff_initial_ms=60_000, deadline_at=pulse.now(seconds=30))
    assert pulse.fail(grant, retryable=True).task_state is TaskState.FAILED


def test_non_retryable_failure_fails_with_the_error_recorded(pulse: PulseDriver) -> None:
    grant = _running(pulse)
    pulse.fail(grant, error={"type": "ValueError", "message": "bad amount"})
    row = pulse.task(grant.task_id)
    assert row.state == "FAILED" and row.error == {"type": "ValueError", "message": "bad amount"}
    assert pulse.result_events(grant.task_id)[0].kind == "task.failed"


def test_unknown_outcome_goes_to_needs_review_and_is_not_rerun_inv7(pulse: PulseDriver) -> None:
    grant = _running(pulse)
    done = pulse.complete(grant, Outcome.UNKNOWN, error={"type": "Timeout"})
    assert done.task_state is TaskState.NEEDS_REVIEW
    pulse.advance(3600)
    pulse.reap()
    assert pulse.claim(session_id=pulse.session("worker-2").id) == []
    assert pulse.state(grant.task_id) == "NEEDS_REVIEW"
    assert pulse.result_events(grant.task_id)[0].kind == "task.needs_review"


def test_repeating_the_same_completion_is_idempotent(pulse: PulseDriver) -> None:
    grant = _running(pulse)
    assert pulse.succeed(grant).status is CompletionStatus.APPLIED
    again = pulse.succeed(grant)
    assert again.status is CompletionStatus.DUPLICATE and again.task_state is TaskState.SUCCEEDED
    assert len(pulse.events(grant.task_id)) == 4


def test_a_success_is_never_overwritten_by_a_later_report(pulse: PulseDriver) -> None:
    grant = _running(pulse)
    pulse.succeed(grant)
    late = pulse.fail(grant)
    assert late.status is CompletionStatus.SUPERSEDED
    assert pulse.state(grant.task_id) == "SUCCEEDED"
    assert pulse.attempts(grant.task_id)[0].late_outcome == "FAILED"


def test_reporting_an_outcome_before_start_is_refused(pulse: PulseDriver) -> None:
    pulse.submit()
    grant = pulse.claim_one()
    with pytest.raises(InvalidRequest, match="start the attempt"):
        pulse.succeed(grant)
    assert pulse.state(grant.task_id) == "LEASED"


def test_releasing_an_unstarted_lease_makes_the_task_available_again(pulse: PulseDriver) -> None:
    pulse.submit()
    grant = pulse.claim_one()
    assert pulse.complete(grant, Outcome.RELEASED).task_state is TaskState.WAITING
    again = pulse.claim_one()
    assert again.generation > grant.generation
    assert pulse.task(grant.task_id).attempts_used == 1, "a released lease is not spent"


def test_a_cancelled_outcome_needs_a_cancel_request(pulse: PulseDriver) -> None:
    grant = _running(pulse)
    with pytest.raises(InvalidRequest, match="cancel request"):
        pulse.complete(grant, Outcome.CANCELLED)
