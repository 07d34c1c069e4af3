"""Reading a task with its history (`GET /v1/namespaces/{ns}/tasks/{id}`, ``get_task``): the
task, its attempts and its events describe one committed state (seed invariant 4: state,
attempt and event commit together, so a reader must not see them apart)."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from orbit_store.pulse.views import queries

from ...drivers.pulse_driver import PulseDriver


def _commit_once_before_the_attempts_read(conn: sa.Connection, work: Any) -> None:
    """Run ``work`` (in its own transaction) just before ``conn`` reads the task's attempts."""
    fired: list[bool] = []

    def before(_c: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if not fired and "FROM task_attempts" in statement:
            fired.append(True)
            work()

    sa.event.listen(conn, "before_cursor_execute", before)


@pytest.mark.mariadb_only  # on SQLite the reading connection would block the writer
def test_a_lapse_committing_between_the_reads_is_not_shown_half_applied(
    pulse: PulseDriver,
) -> None:
    pulse.queue(lease_seconds=1)
    pulse.submit()
    grant = pulse.claim_one()
    pulse.advance(5)  # the lease has passed: the reaper lapses the attempt

    with pulse.engine.connect() as conn:
        _commit_once_before_the_attempts_read(conn, pulse.reap)
        detail = queries.get_task(conn, pulse.namespace, grant.task_id)

    assert detail is not None
    assert detail.task.state == "WAITING"
    assert [a.outcome for a in detail.attempts] == ["LAPSED"]
    assert detail.events[-1].state_version == detail.task.state_version


def test_a_quiet_task_is_read_at_once(pulse: PulseDriver) -> None:
    pulse.queue()
    pulse.submit()
    grant = pulse.claim_one()
    with pulse.engine.connect() as conn:
        detail = queries.get_task(conn, pulse.namespace, grant.task_id)
    assert detail is not None
    assert detail.task.state == "LEASED"
    assert [a.id for a in detail.attempts] == [grant.attempt_id]


def test_the_detail_shows_each_attempt_s_heartbeat_and_a_late_report_as_evidence_inv3(
    pulse: PulseDriver,
) -> None:
    """What a reviewer needs (seed §2): when each attempt last renewed its lease, and what a
    superseded attempt reported late — kept, never applied."""
    pulse.submit()
    stale = pulse.claim_one()
    pulse.start(stale)
    pulse.heartbeat(stale)
    pulse.advance(31)
    pulse.reap()  # a safe task: back to WAITING, then claimed again once its backoff ends
    pulse.advance(3600)
    current = pulse.claim_one()
    pulse.succeed(stale, result={"charged": True})

    with pulse.engine.connect() as conn:
        detail = queries.get_task(conn, pulse.namespace, current.task_id)
    assert detail is not None
    first, second = detail.attempts
    assert first.heartbeat_at is not None and second.heartbeat_at is None
    assert (first.outcome, first.late_outcome, first.late_result) == (
        "LAPSED",
        "SUCCEEDED",
        {"charged": True},
    )
    assert detail.task.state == "LEASED" and second.late_result is None
