"""Accepting tasks: invariant 1 (durable before acknowledged) and 6 (dedupe by key)."""

from __future__ import annotations

import multiprocessing

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from orbit_store.db import create_store_engine, run_transaction
from orbit_store.errors import Conflict, InvalidRequest, NotFound, QuotaExceeded
from orbit_store.pulse import service
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.schema import submission_keys, task_events, tasks

from ...drivers.pulse_driver import PulseDriver
from ...drivers.sent_statements import sent_statements


def _count(engine: sa.Engine, table: sa.Table, namespace: str) -> int:
    with engine.connect() as conn:
        query = sa.select(sa.func.count()).select_from(table).where(table.c.namespace == namespace)
        return int(conn.execute(query).scalar_one())


def _quota(pulse: PulseDriver, **limits: object) -> None:
    pulse.quota("q", **limits)


def test_acknowledged_task_has_its_key_and_accepted_event_durable_inv1(pulse: PulseDriver) -> None:
    """Invariant 1: once submit returns, task, idempotency record and event are committed."""
    result = pulse.submit(idempotency_key="order-1")
    fresh = create_store_engine(pulse.engine.url.render_as_string(hide_password=False))
    try:
        with fresh.connect() as conn:
            assert (
                conn.execute(
                    sa.select(tasks.c.state).where(tasks.c.id == result.task_id)
                ).scalar_one()
                == "WAITING"
            )
            key = conn.execute(
                sa.select(submission_keys).where(submission_keys.c.namespace == pulse.namespace)
            ).one()
            assert key.task_id == result.task_id and key.expires_at > key.created_at
            events = conn.execute(
                sa.select(task_events).where(task_events.c.task_id == result.task_id)
            ).all()
            assert [(e.state_version, e.to_state) for e in events] == [(1, "WAITING")]
    finally:
        fresh.dispose()


def test_same_key_and_same_request_returns_the_original_task_as_a_replay_inv6(
    pulse: PulseDriver,
) -> None:
    first = pulse.submit(idempotency_key="k", params={"amount": 5})
    again = pulse.submit(idempotency_key="k", params={"amount": 5})
    assert again.task_id == first.task_id and again.replayed and not first.replayed
    assert _count(pulse.engine, tasks, pulse.namespace) == 1


def test_same_key_with_a_different_request_is_a_typed_conflict_inv6(pulse: PulseDriver) -> None:
    pulse.submit(idempotency_key="k", params={"amount": 5})
    with pytest.raises(Conflict, match="different request"):
        pulse.submit(idempotency_key="k", params={"amount": 6})
    assert _count(pulse.engine, tasks, pulse.namespace) == 1


def test_the_same_key_in_another_namespace_is_a_different_submission_inv6(
    pulse: PulseDriver,
) -> None:
    other = PulseDriver(pulse.base_engine)
    assert pulse.submit(idempotency_key="k").task_id != other.submit(idempotency_key="k").task_id


def test_submitting_to_an_undeclared_queue_is_refused_and_writes_nothing(
    pulse: PulseDriver,
) -> None:
    with pytest.raises(NotFound, match="not declared"):
        pulse.submit(queue="nope", idempotency_key="k")
    assert _count(pulse.engine, tasks, pulse.namespace) == 0
    assert _count(pulse.engine, submission_keys, pulse.namespace) == 0


def test_declared_queue_policy_is_snapshotted_into_the_task(pulse: PulseDriver) -> None:
    pulse.queue("payments", lease_seconds=90, priority=3)
    task = pulse.task(pulse.submit(queue="payments").task_id)
    assert (task.lease_seconds, task.priority, task.max_attempts) == (90, 3, 3)


def test_invalid_submission_is_refused(pulse: PulseDriver) -> None:
    with pytest.raises(InvalidRequest):
        pulse.submit(max_attempts=0)
    with pytest.raises(InvalidRequest):
        pulse.submit(concurrency_limit=2)


def test_max_waiting_quota_refuses_with_a_typed_error_and_writes_nothing(
    pulse: PulseDriver,
) -> None:
    _quota(pulse, max_waiting=2)
    pulse.submit()
    pulse.submit()
    with pytest.raises(QuotaExceeded, match="limit is 2"):
        pulse.submit(idempotency_key="third")
    assert _count(pulse.engine, tasks, pulse.namespace) == 2
    assert _count(pulse.engine, submission_keys, pulse.namespace) == 0


def test_submit_rate_quota_refills_from_database_time(pulse: PulseDriver) -> None:
    _quota(pulse, submit_rate_per_second=1.0, submit_burst=2)
    pulse.submit()
    pulse.submit()
    with pytest.raises(QuotaExceeded, match="rate"):
        pulse.submit()
    pulse.advance(1.5)
    pulse.submit()


def test_commit_with_unknown_outcome_is_resolved_by_the_key_not_a_new_task_inv6(
    pulse: PulseDriver,
) -> None:
    """The connection drops after COMMIT reached the server: the caller finds the same task."""
    engine = create_store_engine(pulse.engine.url.render_as_string(hide_password=False))
    lost = engine.dialect.loaded_dbapi.OperationalError  # the driver's own
    lost_once = []

    @event.listens_for(engine, "commit")
    def _commit_then_lose_the_reply(conn: sa.Connection) -> None:
        if lost_once:
            return
        lost_once.append(True)
        conn.connection.dbapi_connection.commit()  # type: ignore[union-attr]
        raise sa.exc.OperationalError("COMMIT", {}, lost(2013, "Lost connection during query"))

    request = SubmitRequest(
        namespace=pulse.namespace, queue="default", handler="h", idempotency_key="pay-7"
    )
    try:
        result = service.submit(engine, request)
    finally:
        engine.dispose()
    assert lost_once and result.replayed
    assert _count(pulse.engine, tasks, pulse.namespace) == 1


def _submit_in_process(url: str, namespace: str, barrier: object) -> str:
    engine = create_store_engine(url)
    barrier.wait()  # type: ignore[attr-defined]
    request = SubmitRequest(
        namespace=namespace, queue="default", handler="h", params={"n": 1}, idempotency_key="same"
    )
    try:
        return service.submit(engine, request).task_id
    finally:
        engine.dispose()


@pytest.mark.mariadb_only
def test_concurrent_identical_submissions_from_many_processes_create_one_task_inv6(
    pulse: PulseDriver,
) -> None:
    url = pulse.engine.url.render_as_string(hide_password=False)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(8)
        with ctx.Pool(8) as pool:
            ids = pool.starmap(_submit_in_process, [(url, pulse.namespace, barrier)] * 8)
    assert len(set(ids)) == 1
    assert _count(pulse.engine, tasks, pulse.namespace) == 1
    assert (
        run_transaction(
            pulse.engine,
            lambda c: c.execute(
                sa.select(sa.func.count())
                .select_from(task_events)
                .where(task_events.c.namespace == pulse.namespace)
            ).scalar_one(),
        )
        == 1
    )


def test_replaying_a_key_does_not_check_quotas_again_inv6(pulse: PulseDriver) -> None:
    _quota(pulse, max_waiting=1, submit_rate_per_second=0.001, submit_burst=1)
    first = pulse.submit(idempotency_key="k")
    with pytest.raises(QuotaExceeded):
        pulse.submit(idempotency_key="another")  # both limits are used up now
    again = pulse.submit(idempotency_key="k")
    assert again.replayed and again.task_id == first.task_id
    assert _count(pulse.engine, tasks, pulse.namespace) == 1


def test_a_new_keyed_submission_does_not_look_its_key_up_first(pulse: PulseDriver) -> None:
    """Optimistic: a used key is found by the key's INSERT and then looked up in a new
    transaction (the replay tests above), so a new submission saves that statement."""
    with sent_statements(pulse.base_engine) as statements:
        result = pulse.submit(idempotency_key="fresh")
    assert not result.replayed
    key_reads = [
        s for s in statements if s.lstrip().upper().startswith("SELECT") and "submission_keys" in s
    ]
    assert key_reads == []


def test_a_submission_reads_the_time_with_its_queue_scope_not_apart(pulse: PulseDriver) -> None:
    """The time the task is dated by (seed §3: database time) comes from the statement that
    locks its queue scope: no round trip of its own."""
    pulse.submit()  # the namespace row exists: the scope is one statement
    skew_before = pulse.now()
    with sent_statements(pulse.base_engine) as statements:
        pulse.submit(idempotency_key="k")
    time_alone = [
        s
        for s in statements
        if "FROM" not in s.upper() and ("UTC_TIMESTAMP" in s.upper() or "STRFTIME" in s.upper())
    ]
    assert time_alone == []
    with pulse.engine.connect() as conn:
        created = conn.execute(
            sa.select(sa.func.max(tasks.c.created_at)).where(tasks.c.namespace == pulse.namespace)
        ).scalar_one()
    assert created >= skew_before, "dated by the database clock this driver sees"


def test_a_submission_s_time_follows_the_connection_s_clock_skew(pulse: PulseDriver) -> None:
    pulse.advance(3600)
    result = pulse.submit()
    with pulse.engine.connect() as conn:
        created = conn.execute(
            sa.select(tasks.c.created_at).where(tasks.c.id == result.task_id)
        ).scalar_one()
    assert created >= pulse.now(-60), "the skew of the submitting connection applies"
