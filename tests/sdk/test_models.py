"""The SDK's models accept what a newer server may send: extra fields, new enum values."""

from __future__ import annotations

import pytest

from orbit_sdk import (
    SETTLED_STATES,
    CompletionResponse,
    HeartbeatResponse,
    Lease,
    LeaseBatch,
    Problem,
    Session,
    Task,
    TaskContext,
    TaskDetail,
    TaskPage,
)

from .conftest import task_body

LEASE = {
    "task_id": "t1",
    "attempt_id": "a1",
    "generation": 3,
    "token": "s3cret-attempt-token",
    "lease_expires_at": "2025-01-01T00:00:30Z",
    "namespace": "shop",
    "queue": "default",
    "handler": "shop.echo",
    "params": {"x": 1},
    "safety": "safe",
    "state_version": 2,
    "deadline_at": None,
}
SESSION = {
    "id": "s1",
    "namespace": "shop",
    "worker_name": "w",
    "generation": 1,
    "state": "ACTIVE",
    "expires_at": "2025-01-01T00:01:00Z",
}


def test_every_response_model_ignores_fields_it_does_not_know() -> None:
    extra = {"added_in_v2": {"anything": [1, 2]}, "another": True}
    task = Task.model_validate(task_body(**extra))
    assert not hasattr(task, "added_in_v2")
    detail = TaskDetail.model_validate(
        task_body(
            attempts=[
                {
                    "id": "a1",
                    "generation": 1,
                    "state": "FINISHED",
                    "leased_at": "2025-01-01T00:00:00Z",
                    "lease_expires_at": "2025-01-01T00:00:30Z",
                    **extra,
                }
            ],
            events=[
                {
                    "state_version": 1,
                    "to_state": "WAITING",
                    "reason": "submitted",
                    "at": "2025-01-01T00:00:00Z",
                    **extra,
                }
            ],
            **extra,
        )
    )
    assert detail.attempts[0].generation == 1 and detail.events[0].to_state == "WAITING"
    TaskPage.model_validate({"items": [task_body(**extra)], "next_page_token": "p2", **extra})
    LeaseBatch.model_validate({"leases": [{**LEASE, **extra}], **extra})
    Session.model_validate({**SESSION, **extra})
    HeartbeatResponse.model_validate(
        {
            "results": [{"attempt_id": "a1", "status": "extended", **extra}],
            "session": {**SESSION, **extra},
            **extra,
        }
    )
    CompletionResponse.model_validate({"status": "applied", "task_state": "SUCCEEDED", **extra})


def test_new_enum_values_from_a_newer_server_still_parse() -> None:
    task = Task.model_validate(task_body(state="ARCHIVED", safety="paranoid"))
    assert task.state == "ARCHIVED" and not task.is_terminal and not task.is_settled
    beat = {"results": [{"attempt_id": "a", "status": "paused"}]}
    answer = HeartbeatResponse.model_validate(beat)
    assert answer.results[0].status == "paused"


@pytest.mark.parametrize("state", ["SUCCEEDED", "FAILED", "CANCELLED", "NEEDS_REVIEW"])
def test_settled_states_end_a_wait(state: str) -> None:
    assert Task.model_validate(task_body(state=state)).is_settled
    assert state in SETTLED_STATES


def test_the_attempt_token_never_shows_in_repr() -> None:
    lease = Lease.model_validate(LEASE)
    assert lease.token == "s3cret-attempt-token"
    assert "s3cret" not in repr(lease) and "s3cret" not in str(lease)


def test_problem_keeps_extension_members() -> None:
    problem = Problem.model_validate(
        {
            "type": "https://orbit.dev/problems/quota-exceeded",
            "title": "Quota exceeded",
            "status": 429,
            "quota": "waiting-tasks",
            "limit": 1000,
        }
    )
    assert problem.model_extra == {"quota": "waiting-tasks", "limit": 1000}


def test_the_fencing_token_is_the_restore_epoch_and_the_generation() -> None:
    ctx = TaskContext(Lease.model_validate({**LEASE, "epoch": 1_796_000_000_000_000}))
    assert ctx.fencing_token == (1_796_000_000_000_000, 3)
    # A grant after a restore repeats generation 3 under a larger epoch: a larger token.
    assert ctx.fencing_token > (1_795_000_000_000_000, 9)


def test_a_lease_from_a_server_without_restore_fencing_has_epoch_zero() -> None:
    assert TaskContext(Lease.model_validate(LEASE)).fencing_token == (0, 3)
