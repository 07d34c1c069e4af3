"""Claiming: invariant 2 (one valid grant per state version) and the conditions a claim checks."""

from __future__ import annotations

import pytest

from orbit_store.errors import Conflict
from orbit_store.pulse.model import CompletionStatus, RenewStatus

from ...drivers.pulse_driver import PulseDriver


def _gate(pulse: PulseDriver, allowed: bool) -> str:
    gate_id = pulse.gate()
    if not allowed:
        pulse.set_gate(gate_id, allowed=False)
    return gate_id


def _set_gate(pulse: PulseDriver, gate_id: str, allowed: bool) -> None:
    pulse.set_gate(gate_id, allowed=allowed)


def test_a_task_is_granted_once_per_state_version_inv2(pulse: PulseDriver) -> None:
    """Invariant 2: a second claimer finds nothing while the first grant is valid."""
    task = pulse.submit()
    grant = pulse.claim_one()
    assert pulse.claim(session_id=pulse.session("worker-2").id) == []
    assert len(pulse.attempts(task.task_id)) == 1
    assert grant.state_version == pulse.task(task.task_id).state_version == 2


def test_each_attempt_gets_a_higher_generation_and_its_own_secret(pulse: PulseDriver) -> None:
    pulse.submit()
    first = pulse.claim_one()
    pulse.advance(31)
    pulse.reap()
    second = pulse.claim_one()
    assert second.task_id == first.task_id
    assert second.generation > first.generation
    assert second.token != first.token
    stored = pulse.attempts(first.task_id)
    assert all(first.token not in (a.token_hash or "") for a in stored), "tokens stored hashed"


def test_claim_respects_the_batch_limit(pulse: PulseDriver) -> None:
    for _ in range(5):
        pulse.submit()
    assert len(pulse.claim(limit=3)) == 3
    assert len(pulse.claim(limit=3)) == 2


def test_paused_queue_is_not_claimed_until_resumed(pulse: PulseDriver) -> None:
    pulse.queue("reports", paused=True)
    pulse.submit(queue="reports")
    assert pulse.claim(queues=["reports"]) == []
    pulse.queue("reports", paused=False)
    assert len(pulse.claim(queues=["reports"])) == 1


def test_queues_are_claimed_in_queue_priority_order(pulse: PulseDriver) -> None:
    pulse.queue("bulk", priority=10)
    pulse.queue("urgent", priority=-10)
    bulk = pulse.submit(queue="bulk")
    urgent = pulse.submit(queue="urgent")
    grants = pulse.claim(queues=["bulk", "urgent"], limit=2)
    assert [g.task_id for g in grants] == [urgent.task_id, bulk.task_id]


def test_closed_execution_gate_blocks_new_grants_inv12(pulse: PulseDriver) -> None:
    gate = _gate(pulse, allowed=False)
    pulse.submit(gate_id=gate)
    assert pulse.claim() == []
    _set_gate(pulse, gate, True)
    assert len(pulse.claim()) == 1


def test_gate_closed_between_claim_and_start_hands_the_task_back_inv12(
    pulse: PulseDriver,
) -> None:
    gate = _gate(pulse, allowed=True)
    task = pulse.submit(gate_id=gate)
    grant = pulse.claim_one()
    _set_gate(pulse, gate, False)
    refused = pulse.start(grant)
    assert not refused.started and refused.refusal == "gate_closed"
    assert pulse.state(task.task_id) == "WAITING"


def test_concurrency_key_allows_at_most_k_holders_and_frees_permits_on_completion(
    pulse: PulseDriver,
) -> None:
    for _ in range(3):
        pulse.submit(concurrency_key="customer-7", concurrency_limit=2)
    grants = pulse.claim(limit=10)
    assert len(grants) == 2
    assert pulse.claim() == []
    pulse.start(grants[0])
    pulse.succeed(grants[0])
    assert len(pulse.claim()) == 1


def test_lapsed_lease_frees_its_concurrency_permit(pulse: PulseDriver) -> None:
    pulse.submit(concurrency_key="k")
    pulse.submit(concurrency_key="k")
    pulse.claim_one()
    assert pulse.claim() == []
    pulse.advance(31)
    pulse.reap()
    assert len(pulse.claim(limit=5)) == 1


def test_max_running_quota_limits_how_many_are_leased(pulse: PulseDriver) -> None:
    pulse.quota("run", queue="default", max_running=2)
    for _ in range(4):
        pulse.submit()
    assert len(pulse.claim(limit=10)) == 2
    assert pulse.claim(limit=10) == []


def test_a_draining_session_cannot_lease(pulse: PulseDriver) -> None:
    session = pulse.session()
    pulse.submit()
    pulse.drain(session.id)
    with pytest.raises(Conflict, match="DRAINING"):
        pulse.claim(session_id=session.id)


def test_claim_fails_a_waiting_task_whose_deadline_passed(pulse: PulseDriver) -> None:
    task = pulse.submit(deadline_at=pulse.now(seconds=5))
    pulse.advance(6)
    assert pulse.claim() == []
    assert pulse.state(task.task_id) == "FAILED"
    assert pulse.task(task.task_id).error["type"] == "deadline_exceeded"


def test_pausing_a_queue_does_not_interrupt_its_running_attempts(pulse: PulseDriver) -> None:
    pulse.queue("reports")
    task = pulse.submit(queue="reports")
    grant = pulse.claim_one(queues=["reports"])
    pulse.start(grant)
    pulse.queue("reports", paused=True)
    pulse.advance(25)
    assert pulse.heartbeat(grant)[0].status is RenewStatus.EXTENDED
    pulse.advance(25)  # past the first lease: alive by its renewal
    assert pulse.reap().leases_lapsed == 0
    assert pulse.succeed(grant, {"ok": True}).status is CompletionStatus.APPLIED
    assert pulse.state(task.task_id) == "SUCCEEDED"
