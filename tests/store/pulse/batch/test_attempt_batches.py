"""Batched starts and completions: one transaction for many attempts, and each item
still under invariant 3 (its own current attempt and token) and invariant 4 (an applied outcome
commits with its events) — one item's refusal never fails its neighbours."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from orbit_store.pulse import batches
from orbit_store.pulse.model import (
    CompletionResult,
    CompletionStatus,
    LeaseGrant,
    Outcome,
    StartRefusal,
    StartResult,
)
from orbit_store.pulse.state.transitions import LostRace

from ...drivers.pulse_driver import PulseDriver
from ...drivers.sent_statements import sent_statements


def _start_many(pulse: PulseDriver, items: list[batches.StartItem]) -> dict[str, object]:
    return dict(
        pulse.tx(functools.partial(batches.start_attempts, namespace=pulse.namespace, items=items))
    )


def _complete_many(pulse: PulseDriver, items: list[batches.CompletionItem]) -> dict[str, object]:
    return dict(
        pulse.tx(
            functools.partial(batches.complete_attempts, namespace=pulse.namespace, items=items)
        )
    )


def _ok(grant: LeaseGrant) -> batches.CompletionItem:
    return batches.CompletionItem(grant.attempt_id, grant.token, Outcome.SUCCEEDED, {"ok": 1})


def _stale_and_fresh(pulse: PulseDriver) -> tuple[LeaseGrant, list[LeaseGrant]]:
    """A stale attempt (its lease lapsed and the task was claimed again, now running), and
    three fresh running attempts."""
    pulse.submit()
    stale = pulse.claim_one()
    pulse.advance(31)
    pulse.reap()
    reclaimed = pulse.claim_one()
    for _ in range(3):
        pulse.submit()
    fresh = pulse.claim(limit=3)
    for grant in [reclaimed, *fresh]:
        assert pulse.start(grant).started
    return stale, [reclaimed, *fresh]


def test_a_batch_starts_every_valid_attempt_and_refuses_a_wrong_token_alone_inv3(
    pulse: PulseDriver,
) -> None:
    for _ in range(3):
        pulse.submit()
    first, second, third = pulse.claim(limit=3)
    results = _start_many(
        pulse,
        [
            batches.StartItem(first.attempt_id, first.token),
            batches.StartItem(second.attempt_id, "not-the-token"),
            batches.StartItem(third.attempt_id, third.token),
        ],
    )
    started = results[first.attempt_id]
    assert isinstance(started, StartResult)
    assert started == StartResult(
        True,
        lease_expires_at=started.lease_expires_at,
        lease_remaining_seconds=started.lease_remaining_seconds,
    )
    assert started.lease_remaining_seconds and started.lease_remaining_seconds > 0
    assert results[second.attempt_id] == StartResult(False, StartRefusal.INVALID_TOKEN)
    assert isinstance(results[third.attempt_id], StartResult)
    assert [pulse.state(g.task_id) for g in (first, second, third)] == [
        "RUNNING",
        "LEASED",
        "RUNNING",
    ]


def test_a_stale_generation_among_valid_completions_is_kept_as_evidence_only_inv3(
    pulse: PulseDriver,
) -> None:
    stale, current = _stale_and_fresh(pulse)
    results = _complete_many(pulse, [_ok(stale), *map(_ok, current)])
    late = results[stale.attempt_id]
    assert isinstance(late, CompletionResult) and late.status is CompletionStatus.SUPERSEDED
    for grant in current:
        applied = results[grant.attempt_id]
        assert isinstance(applied, CompletionResult)
        assert (applied.status, applied.task_state) == (CompletionStatus.APPLIED, "SUCCEEDED")
    assert pulse.attempts(stale.task_id)[0].late_outcome == "SUCCEEDED"
    assert pulse.task(stale.task_id).result == {"ok": 1}, "the current attempt's own result"


def test_each_applied_item_commits_with_its_events_inv4(pulse: PulseDriver) -> None:
    _, current = _stale_and_fresh(pulse)
    _complete_many(pulse, list(map(_ok, current)))
    for grant in current:
        assert [e.to_state for e in pulse.events(grant.task_id)][-1] == "SUCCEEDED"
        assert [r.kind for r in pulse.result_events(grant.task_id)] == ["task.succeeded"]


def test_a_mix_of_outcomes_each_follows_its_own_rule(pulse: PulseDriver) -> None:
    pulse.submit(max_attempts=3)
    pulse.submit(max_attempts=1)
    pulse.submit()
    retried, failed, unknown = pulse.claim(limit=3)
    for grant in (retried, failed, unknown):
        pulse.start(grant)
    results = _complete_many(
        pulse,
        [
            batches.CompletionItem(
                retried.attempt_id, retried.token, Outcome.FAILED, None, {"e": 1}, True
            ),
            batches.CompletionItem(
                failed.attempt_id, failed.token, Outcome.FAILED, None, {"e": 2}, True
            ),
            batches.CompletionItem(unknown.attempt_id, unknown.token, Outcome.UNKNOWN),
        ],
    )
    states = {g.task_id: results[g.attempt_id].task_state for g in (retried, failed, unknown)}  # type: ignore[attr-defined]
    assert states == {
        retried.task_id: "WAITING",
        failed.task_id: "FAILED",
        unknown.task_id: "NEEDS_REVIEW",
    }


def test_an_invalid_item_is_rolled_back_alone_and_its_neighbours_apply(
    pulse: PulseDriver,
) -> None:
    """Reporting an outcome for an attempt never started is a request error for that item."""
    pulse.submit()
    pulse.submit()
    unstarted, running = pulse.claim(limit=2)
    pulse.start(running)
    results = _complete_many(pulse, [_ok(unstarted), _ok(running)])
    refused = results[unstarted.attempt_id]
    assert isinstance(refused, batches.ItemRefused) and refused.kind == "invalid"
    assert pulse.state(unstarted.task_id) == "LEASED"
    assert pulse.state(running.task_id) == "SUCCEEDED"


def test_a_repeated_batch_answers_duplicate_for_every_applied_item(pulse: PulseDriver) -> None:
    _, current = _stale_and_fresh(pulse)
    _complete_many(pulse, list(map(_ok, current)))
    again = _complete_many(pulse, list(map(_ok, current)))
    assert {r.status for r in again.values()} == {CompletionStatus.DUPLICATE}  # type: ignore[attr-defined]


def _run_batch(pulse: PulseDriver, apply: Any, items: list[Any]) -> dict[str, Any]:
    return batches.run_batch(pulse.engine, apply, namespace=pulse.namespace, items=items)


def test_a_batch_of_one_item_takes_no_savepoint(pulse: PulseDriver) -> None:
    """Its transaction holds nothing else, so the SAVEPOINT and RELEASE would be two statements
    spent on nothing (a worker's batches are of one under a trickle of tasks)."""
    pulse.submit()
    grant = pulse.claim_one()
    start = batches.StartItem(grant.attempt_id, grant.token)
    with sent_statements(pulse.base_engine) as sent:
        started = _run_batch(pulse, batches.start_attempts, [start])
        done = _run_batch(pulse, batches.complete_attempts, [_ok(grant)])
    assert started[grant.attempt_id].started
    assert done[grant.attempt_id].status is CompletionStatus.APPLIED
    assert not [s for s in sent if "SAVEPOINT" in s.upper()], sent


def test_a_refused_item_alone_in_its_batch_answers_its_refusal(pulse: PulseDriver) -> None:
    pulse.submit()
    unstarted = pulse.claim_one()
    events = len(pulse.events(unstarted.task_id))
    refused = _run_batch(pulse, batches.complete_attempts, [_ok(unstarted)])[unstarted.attempt_id]
    assert isinstance(refused, batches.ItemRefused) and refused.kind == "invalid"
    assert pulse.state(unstarted.task_id) == "LEASED"
    assert len(pulse.events(unstarted.task_id)) == events


def test_a_lone_item_refused_after_its_writes_leaves_none_of_them_inv4(
    pulse: PulseDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a SAVEPOINT, the refusal must roll back the whole transaction: here the item's
    completion is written (attempt finished, task SUCCEEDED, events) and then loses a race."""
    pulse.submit()
    grant = pulse.claim_one()
    assert pulse.start(grant).started
    events = len(pulse.events(grant.task_id))
    real = batches.complete_attempt

    def applied_then_lost(conn: Any, **kw: Any) -> Any:
        real(conn, **kw)
        raise LostRace("the task moved meanwhile")

    monkeypatch.setattr(batches, "complete_attempt", applied_then_lost)
    refused = _run_batch(pulse, batches.complete_attempts, [_ok(grant)])[grant.attempt_id]
    assert isinstance(refused, batches.ItemRefused) and refused.kind == "lost_race"
    assert pulse.state(grant.task_id) == "RUNNING"
    assert [a.state for a in pulse.attempts(grant.task_id)] == ["RUNNING"]
    assert len(pulse.events(grant.task_id)) == events
    assert pulse.result_events(grant.task_id) == []
