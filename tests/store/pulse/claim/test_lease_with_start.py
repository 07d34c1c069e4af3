"""A lease with start: the claim starts the grants of handlers the worker declared safe.

The grant must be exactly what a claim followed by a start makes — RUNNING with a started
attempt, the LEASED and RUNNING events (invariant 4: state, attempt and events commit together),
the lease from now — and every case a start would refuse must not start (invariant 3: live
session, open restore fence; invariant 12: open gate; a cancel request). Unsafe handlers keep
the two-step protocol (invariant 7). The ``pulse`` fixture checks ``verify`` after each test.
"""

from __future__ import annotations

import datetime as dt

import pytest

from orbit_store.errors import Conflict, DispatchClosed
from orbit_store.pulse.leases.unreceived import hand_back_unreceived
from orbit_store.pulse.model import Safety
from orbit_store.recovery.restore_fence import restore_fence

from ...drivers.pulse_driver import PulseDriver

SAFE = ("shop.receipt",)


def test_a_started_grant_is_running_with_a_started_attempt_inv3(pulse: PulseDriver) -> None:
    task = pulse.submit(handler="shop.receipt")
    [grant] = pulse.claim(start_handlers=SAFE)
    assert grant.started
    assert pulse.state(task.task_id) == "RUNNING"
    [attempt] = pulse.attempts(task.task_id)
    assert attempt.state == "RUNNING"
    assert attempt.started_at == attempt.leased_at == grant.leased_at
    assert grant.state_version == pulse.task(task.task_id).state_version == 3


def test_a_started_grant_writes_the_leased_and_the_running_event_inv4(pulse: PulseDriver) -> None:
    task = pulse.submit(handler="shop.receipt")
    [grant] = pulse.claim(start_handlers=SAFE)
    events = pulse.events(task.task_id)
    steps = [(e.from_state, e.to_state, e.reason, e.state_version) for e in events]
    assert steps == [
        (None, "WAITING", steps[0][2], 1),
        ("WAITING", "LEASED", "claimed", 2),
        ("LEASED", "RUNNING", "started", 3),
    ]
    assert {e.attempt_id for e in events[1:]} == {grant.attempt_id}


def test_a_started_grant_runs_its_lease_from_the_claim(pulse: PulseDriver) -> None:
    pulse.queue("default", lease_seconds=45)
    pulse.submit(handler="shop.receipt")
    [grant] = pulse.claim(start_handlers=SAFE)
    assert grant.leased_at is not None
    assert grant.lease_expires_at - grant.leased_at == dt.timedelta(seconds=45)


def test_a_start_call_on_a_started_grant_answers_already_started(pulse: PulseDriver) -> None:
    pulse.submit(handler="shop.receipt")
    [grant] = pulse.claim(start_handlers=SAFE)
    again = pulse.start(grant)
    assert again.started and again.already_started


def test_a_started_grant_completes_like_a_started_one(pulse: PulseDriver) -> None:
    task = pulse.submit(handler="shop.receipt")
    [grant] = pulse.claim(start_handlers=SAFE)
    assert pulse.succeed(grant, result={"ok": True}).task_state == "SUCCEEDED"
    assert pulse.state(task.task_id) == "SUCCEEDED"


def test_tasks_of_handlers_not_declared_safe_are_leased_only_inv7(pulse: PulseDriver) -> None:
    safe = pulse.submit(handler="shop.receipt")
    unsafe = pulse.submit(handler="shop.refund")
    grants = {g.task_id: g for g in pulse.claim(start_handlers=SAFE)}
    assert grants[safe.task_id].started and not grants[unsafe.task_id].started
    assert pulse.state(unsafe.task_id) == "LEASED"
    assert [a.state for a in pulse.attempts(unsafe.task_id)] == ["LEASED"]
    # One claim, two steps: the started grant moved two versions, the leased one one.
    assert pulse.task(safe.task_id).state_version == grants[safe.task_id].state_version == 3
    assert pulse.task(unsafe.task_id).state_version == grants[unsafe.task_id].state_version == 2


def test_a_lease_without_start_handlers_starts_nothing(pulse: PulseDriver) -> None:
    task = pulse.submit(handler="shop.receipt")
    [grant] = pulse.claim()
    assert not grant.started and pulse.state(task.task_id) == "LEASED"


def test_an_unsafe_task_is_leased_only_even_for_a_safe_handler_inv7(pulse: PulseDriver) -> None:
    """Started, a lost answer would lapse it into review although nothing ran."""
    task = pulse.submit(handler="shop.receipt", safety=Safety.UNSAFE)
    [grant] = pulse.claim(start_handlers=SAFE)
    assert not grant.started and pulse.state(task.task_id) == "LEASED"
    pulse.advance(31)
    pulse.reap()
    assert pulse.state(task.task_id) == "WAITING"  # never started: simply again


def test_a_lapsed_started_safe_grant_is_retried_inv7(pulse: PulseDriver) -> None:
    task = pulse.submit(handler="shop.receipt")
    pulse.claim(start_handlers=SAFE)
    pulse.advance(31)
    pulse.reap()
    assert pulse.state(task.task_id) == "WAITING"


def test_a_closed_gate_starts_nothing_inv12(pulse: PulseDriver) -> None:
    gate = pulse.gate()
    pulse.set_gate(gate, allowed=False)
    task = pulse.submit(handler="shop.receipt", gate_id=gate)
    assert pulse.claim(start_handlers=SAFE) == []
    assert pulse.state(task.task_id) == "WAITING"


def test_a_gate_closed_after_the_started_claim_lets_the_run_finish_inv12(
    pulse: PulseDriver,
) -> None:
    """Like a start that committed before the gate closed: a RUNNING task finishes."""
    gate = pulse.gate()
    task = pulse.submit(handler="shop.receipt", gate_id=gate)
    [grant] = pulse.claim(start_handlers=SAFE)
    pulse.set_gate(gate, allowed=False)
    assert pulse.succeed(grant).task_state == "SUCCEEDED"
    assert pulse.state(task.task_id) == "SUCCEEDED"


def test_a_task_cancelled_before_the_claim_is_not_started(pulse: PulseDriver) -> None:
    task = pulse.submit(handler="shop.receipt")
    pulse.cancel(task.task_id)
    assert pulse.claim(start_handlers=SAFE) == []
    assert pulse.state(task.task_id) == "CANCELLED"


def test_a_draining_session_is_refused_before_anything_starts(pulse: PulseDriver) -> None:
    session = pulse.session()
    task = pulse.submit(handler="shop.receipt")
    pulse.drain(session.id)
    with pytest.raises(Conflict, match="DRAINING"):
        pulse.claim(session_id=session.id, start_handlers=SAFE)
    assert pulse.state(task.task_id) == "WAITING"


def test_a_revoked_session_lapses_its_started_grants_inv3(pulse: PulseDriver) -> None:
    session = pulse.session()
    task = pulse.submit(handler="shop.receipt")
    [grant] = pulse.claim(session_id=session.id, start_handlers=SAFE)
    pulse.revoke(session.id)
    pulse.reap()
    assert pulse.state(task.task_id) == "WAITING"  # safe: retried, as after a start
    assert pulse.heartbeat(grant)[0].status == "lost"


def test_nothing_is_started_while_dispatch_is_fenced_inv3(isolated_pulse: PulseDriver) -> None:
    task = isolated_pulse.submit(handler="shop.receipt")
    restore_fence(isolated_pulse.engine, reason="restored backup", actor="oncall@example.com")
    with pytest.raises(DispatchClosed):
        isolated_pulse.claim(
            session_id=isolated_pulse.session("after-the-fence").id, start_handlers=SAFE
        )
    assert isolated_pulse.state(task.task_id) == "WAITING"


def test_a_fence_settles_a_started_grant_by_the_lease_rules_inv7(
    isolated_pulse: PulseDriver,
) -> None:
    task = isolated_pulse.submit(handler="shop.receipt")
    [grant] = isolated_pulse.claim(start_handlers=SAFE)
    restore_fence(isolated_pulse.engine, reason="restored backup", actor="oncall@example.com")
    assert isolated_pulse.state(task.task_id) == "WAITING"  # safe: retried after the reopen
    assert isolated_pulse.heartbeat(grant)[0].status == "lost"


def test_max_running_quota_counts_started_grants(pulse: PulseDriver) -> None:
    pulse.quota("run", queue="default", max_running=1)
    pulse.submit(handler="shop.receipt")
    pulse.submit(handler="shop.receipt")
    assert len(pulse.claim(start_handlers=SAFE)) == 1
    assert pulse.claim(start_handlers=SAFE) == []


# --- grants that never reached their worker ----------------------------------------------------


def _hand_back(pulse: PulseDriver, attempt_id: str, token: str) -> str | None:
    state = pulse.tx(
        lambda c: hand_back_unreceived(
            c, namespace=pulse.namespace, attempt_id=attempt_id, token=token
        )
    )
    return None if state is None else state.value


def test_an_undelivered_started_grant_goes_back_unspent(pulse: PulseDriver) -> None:
    """Its handler provably never ran: WAITING again, the attempt RELEASED, not counted."""
    task = pulse.submit(handler="shop.receipt", max_attempts=1)
    [grant] = pulse.claim(start_handlers=SAFE)
    assert _hand_back(pulse, grant.attempt_id, grant.token) == "WAITING"
    assert pulse.task(task.task_id).attempts_used == 0
    assert [a.outcome for a in pulse.attempts(task.task_id)] == ["RELEASED"]
    assert len(pulse.claim(start_handlers=SAFE)) == 1  # its only attempt is still to come


def test_an_undelivered_leased_grant_goes_back_unspent(pulse: PulseDriver) -> None:
    task = pulse.submit(handler="shop.refund")
    [grant] = pulse.claim(start_handlers=SAFE)
    assert _hand_back(pulse, grant.attempt_id, grant.token) == "WAITING"
    assert pulse.task(task.task_id).attempts_used == 0


def test_an_undelivered_grant_cancelled_meanwhile_is_cancelled(pulse: PulseDriver) -> None:
    task = pulse.submit(handler="shop.receipt")
    [grant] = pulse.claim(start_handlers=SAFE)
    pulse.cancel(task.task_id)
    assert _hand_back(pulse, grant.attempt_id, grant.token) == "CANCELLED"
    assert pulse.state(task.task_id) == "CANCELLED"


def test_handing_back_a_grant_no_longer_current_changes_nothing(pulse: PulseDriver) -> None:
    task = pulse.submit(handler="shop.receipt")
    [grant] = pulse.claim(start_handlers=SAFE)
    pulse.succeed(grant)
    assert _hand_back(pulse, grant.attempt_id, grant.token) is None
    assert _hand_back(pulse, grant.attempt_id, "wrong-token") is None
    assert pulse.state(task.task_id) == "SUCCEEDED"
