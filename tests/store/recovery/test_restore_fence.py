"""Restore fencing (seed §7; invariants 3, 7, 8): after `orbit admin restore-fence`, every grant
issued before can neither start, renew nor complete, nothing is leased until the reopen, and the
fence's cut leases are settled by the lease rules. Each test has a database of its own: a fence
closes dispatch for the whole database."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import sqlalchemy as sa

from orbit_store import fencing
from orbit_store.errors import Conflict, DispatchClosed, InvalidRequest
from orbit_store.pulse import service
from orbit_store.pulse.model import CompletionStatus, RenewStatus, Safety, StartRefusal
from orbit_store.recovery.restore_fence import FenceReport, restore_fence
from orbit_store.recovery.verify import verify
from orbit_store.schema import audit_log, server_replicas, worker_sessions

from ..drivers.pulse_driver import PulseDriver
from ..drivers.sent_statements import sent_statements


def _fence(pulse: PulseDriver, reason: str = "restored backup of 02:00") -> FenceReport:
    return restore_fence(pulse.engine, reason=reason, actor="oncall@example.com")


def _reopen(pulse: PulseDriver, reason: str = "reconciled with the ledger") -> fencing.RestoreFence:
    return pulse.tx(lambda c: fencing.reopen_dispatch(c, reason=reason, actor="oncall@example.com"))


def test_a_grant_from_before_the_fence_cannot_start_inv3(isolated_pulse: PulseDriver) -> None:
    isolated_pulse.submit()
    grant = isolated_pulse.claim_one()
    _fence(isolated_pulse)
    refused = isolated_pulse.start(grant)
    assert not refused.started and refused.refusal is StartRefusal.RESTORE_FENCED


def test_a_single_start_and_completion_read_the_fence_beside_their_attempt(
    pulse: PulseDriver,
) -> None:
    """The restore epoch comes with the attempt's own read, not in a round trip of its own:
    each single-item body reads the fence row in one statement, its attempt read."""
    pulse.submit()
    grant = pulse.claim_one()
    for call in (pulse.start, pulse.succeed):
        with sent_statements(pulse.base_engine) as sent:
            call(grant)
        reads = [s for s in sent if "dispatch_fence" in s]
        assert len(reads) == 1 and "task_attempts" in reads[0], reads


def test_a_grant_from_before_the_fence_cannot_renew_inv3(isolated_pulse: PulseDriver) -> None:
    isolated_pulse.submit()
    grant = isolated_pulse.claim_one()
    assert isolated_pulse.start(grant).started
    _fence(isolated_pulse)
    [renewal] = isolated_pulse.heartbeat(grant)
    assert renewal.status is RenewStatus.LOST
    assert renewal.reason is not None and "restore fence" in renewal.reason


def test_a_report_from_before_the_fence_is_kept_as_evidence_never_applied_inv3(
    isolated_pulse: PulseDriver,
) -> None:
    task = isolated_pulse.submit(safety=Safety.UNSAFE)
    grant = isolated_pulse.claim_one()
    assert isolated_pulse.start(grant).started
    _fence(isolated_pulse)
    reported = isolated_pulse.succeed(grant, result={"charged": True})
    assert reported.status is CompletionStatus.FENCED
    assert isolated_pulse.state(task.task_id) == "NEEDS_REVIEW"  # the fence's verdict stands
    [attempt] = isolated_pulse.attempts(task.task_id)
    assert (attempt.late_outcome, attempt.late_result) == ("SUCCEEDED", {"charged": True})


def test_nothing_is_leased_while_dispatch_is_closed(isolated_pulse: PulseDriver) -> None:
    isolated_pulse.submit()
    _fence(isolated_pulse)
    with pytest.raises(DispatchClosed, match="restored backup of 02:00"):
        isolated_pulse.claim(session_id=isolated_pulse.session("after-the-fence").id)


def test_after_the_reopen_grants_carry_the_new_epoch_and_run(isolated_pulse: PulseDriver) -> None:
    task = isolated_pulse.submit()
    report = _fence(isolated_pulse)
    _reopen(isolated_pulse)
    grant = isolated_pulse.claim_one(session_id=isolated_pulse.session("after-the-reopen").id)
    assert grant.epoch == report.fence.epoch
    assert isolated_pulse.start(grant).started
    assert isolated_pulse.succeed(grant).status is CompletionStatus.APPLIED
    assert isolated_pulse.state(task.task_id) == "SUCCEEDED"


def test_the_fence_settles_cut_leases_by_the_lease_rules_inv7(isolated_pulse: PulseDriver) -> None:
    leased = isolated_pulse.submit(handler="leased")
    safe = isolated_pulse.submit(handler="safe", safety=Safety.SAFE)
    unsafe = isolated_pulse.submit(handler="unsafe", safety=Safety.UNSAFE)
    grants = {g.task_id: g for g in isolated_pulse.claim(limit=3)}
    assert isolated_pulse.start(grants[safe.task_id]).started
    assert isolated_pulse.start(grants[unsafe.task_id]).started

    report = _fence(isolated_pulse)

    assert isolated_pulse.state(leased.task_id) == "WAITING"  # never started: simply again
    assert isolated_pulse.state(safe.task_id) == "WAITING"  # idempotent: retried after the reopen
    assert isolated_pulse.state(unsafe.task_id) == "NEEDS_REVIEW"  # side effects unknown
    assert report.settled == {"WAITING": 2, "NEEDS_REVIEW": 1}
    [mine] = [n for n in report.namespaces if n.namespace == isolated_pulse.namespace]
    assert (mine.sessions_ended, mine.leases_cut) == (1, 3)


def test_the_fence_ends_every_live_worker_session(isolated_pulse: PulseDriver) -> None:
    sessions = [isolated_pulse.session(f"worker-{i}") for i in range(3)]
    _fence(isolated_pulse)
    with isolated_pulse.engine.connect() as conn:
        rows = conn.execute(
            sa.select(worker_sessions.c.state, worker_sessions.c.end_reason).where(
                worker_sessions.c.id.in_([s.id for s in sessions])
            )
        ).all()
    assert {row.state for row in rows} == {"REVOKED"}
    assert all("restore fence" in row.end_reason for row in rows)


def test_each_fence_gets_a_larger_epoch_than_every_one_before(isolated_pulse: PulseDriver) -> None:
    first = _fence(isolated_pulse).fence
    second = _fence(isolated_pulse, "restored again").fence
    assert 0 < first.epoch < second.epoch
    assert second.previous_epoch == first.epoch
    # Database time in microseconds: a fence of a restored database outgrows the lost ones.
    assert first.epoch >= fencing._micros(first.fenced_at)


def test_fence_and_reopen_are_audited_with_the_change_inv8(isolated_pulse: PulseDriver) -> None:
    isolated_pulse.submit()
    isolated_pulse.claim_one()
    fence = _fence(isolated_pulse).fence
    _reopen(isolated_pulse)
    rows = isolated_pulse.audit(fence.id)
    by_place = {(row.namespace, row.action): row for row in rows}
    assert set(by_place) == {
        (fencing.SYSTEM_NAMESPACE, "restore.fence"),
        (isolated_pulse.namespace, "restore.fence"),
        (fencing.SYSTEM_NAMESPACE, "restore.reopen"),
    }
    system = by_place[(fencing.SYSTEM_NAMESPACE, "restore.fence")]
    assert (system.actor, system.reason) == ("oncall@example.com", "restored backup of 02:00")
    assert system.after == {"epoch": fence.epoch, "dispatch_open": False}
    namespace_row = by_place[(isolated_pulse.namespace, "restore.fence")]
    assert namespace_row.after == {"epoch": fence.epoch, "sessions_ended": 1, "leases_cut": 1}
    reopened = by_place[(fencing.SYSTEM_NAMESPACE, "restore.reopen")]
    assert reopened.reason == "reconciled with the ledger"
    [history] = isolated_pulse.tx(fencing.fence_history)
    assert (history.reopened_by, history.reopen_reason) == (
        "oncall@example.com",
        "reconciled with the ledger",
    )


def test_reopening_an_open_dispatch_is_refused_and_writes_nothing_inv8(
    isolated_pulse: PulseDriver,
) -> None:
    with pytest.raises(Conflict, match="already open"):
        _reopen(isolated_pulse)
    with isolated_pulse.engine.connect() as conn:
        count = conn.execute(
            sa.select(sa.func.count()).where(audit_log.c.action == "restore.reopen")
        ).scalar_one()
    assert count == 0


def test_a_fence_needs_a_reason(isolated_pulse: PulseDriver) -> None:
    with pytest.raises(InvalidRequest, match="reason is required"):
        _fence(isolated_pulse, reason="  ")
    assert isolated_pulse.tx(fencing.fence_state).dispatch_open


def test_verify_finds_a_grant_a_fence_left_live_and_a_second_fence_settles_it(
    isolated_pulse: PulseDriver,
) -> None:
    """A fence interrupted after its epoch bump (before its per-namespace pass) is visible."""
    isolated_pulse.submit()
    grant = isolated_pulse.claim_one()
    isolated_pulse.tx(lambda c: fencing.raise_fence(c, reason="interrupted", actor="oncall"))
    with isolated_pulse.engine.connect() as conn:
        found = verify(conn).checks["live_attempt_before_restore_fence"]
    assert (found.violations, found.examples) == (1, [grant.task_id])
    _fence(
        isolated_pulse, "fenced again"
    )  # the isolated_pulse fixture verifies the database afterwards


def test_a_fence_right_after_service_resumed_still_settles_its_cut_leases_inv7(
    isolated_pulse: PulseDriver,
) -> None:
    """The outage grace (a lease that ran out while no replica served is extended) is not for
    leases the fence cut on purpose: a server restarted after the restore must not keep them."""
    now = isolated_pulse.now()
    isolated_pulse.tx(
        lambda c: c.execute(
            server_replicas.insert().values(
                id="just-restarted",
                host="h",
                pid=1,
                started_at=now - dt.timedelta(seconds=1),
                last_seen_at=now,
            )
        )
    )
    safe = isolated_pulse.submit(safety=Safety.SAFE)
    grant = isolated_pulse.claim_one()
    assert isolated_pulse.start(grant).started

    report = _fence(isolated_pulse)

    assert isolated_pulse.state(safe.task_id) == "WAITING"
    assert report.settled == {"WAITING": 1}


def test_the_report_counts_leases_the_server_s_reaper_settled_first(
    isolated_pulse: PulseDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's reaper loop runs beside the fence: when it lapses a cut lease before the
    fence's own pass, the report still says what became of that task (it said nothing)."""
    task = isolated_pulse.submit()
    assert isolated_pulse.start(isolated_pulse.claim_one()).started
    reap = service.reap

    def the_loop_first(engine: sa.Engine, **kw: Any) -> Any:
        reap(engine, **kw)  # the server's reaper loop got there first
        return reap(engine, **kw)

    monkeypatch.setattr(service, "reap", the_loop_first)
    assert _fence(isolated_pulse).settled == {"WAITING": 1}
    assert isolated_pulse.state(task.task_id) == "WAITING"
