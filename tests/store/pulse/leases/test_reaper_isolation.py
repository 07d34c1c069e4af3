"""The reaper isolates an item that keeps failing and serves every namespace in turn (ORBIT.md §3
"Per-item isolation in loops"; seed §3: a lease that lapses is decided by the reaper, invariant 4's
attempt bookkeeping stays with the task).

An item whose decision raises backs off alone — in this process's memory, on the database's
clock — and is left out of the next passes' windows until its retry time, so the items behind it
move; a burst of due items in one namespace never delays another namespace's. A defect we have not
found yet is played by making the item's own transaction raise."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from orbit.engines import reaper
from orbit.metrics.server import Metrics
from orbit_store.passes import ItemBackoff
from orbit_store.pulse import service
from orbit_store.pulse.claim import promote as promotion
from orbit_store.pulse.leases import expiry
from orbit_store.pulse.workers import sessions
from orbit_store.recovery.verify import verify

from ...drivers.pulse_driver import PulseDriver


def raising_for(real: Callable[..., Any], bad: Callable[..., bool]) -> Callable[..., Any]:
    """``real``, except that it raises for the calls ``bad`` picks."""

    def work(*args: Any, **kwargs: Any) -> Any:
        if bad(*args, **kwargs):
            raise RuntimeError("a defect in this one item")
        return real(*args, **kwargs)

    return work


def lapsed_pair(pulse: PulseDriver) -> tuple[str, str]:
    """(bad, good): two leases run out, the bad one first (it heads the reaper's window)."""
    bad = pulse.submit().task_id
    pulse.claim(limit=1)
    pulse.advance(1)
    good = pulse.submit().task_id
    pulse.claim(limit=1)
    pulse.advance(31)
    return bad, good


def test_a_lease_that_fails_backs_off_alone_and_the_next_pass_lapses_the_others(
    pulse: PulseDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad, good = lapsed_pair(pulse)
    real = expiry.lapse_attempt
    monkeypatch.setattr(
        expiry, "lapse_attempt", raising_for(real, lambda conn, lapsed: lapsed.task_id == bad)
    )
    backoff = ItemBackoff()

    first = service.reap(pulse.engine, limit=1, namespace=pulse.namespace, backoff=backoff)
    second = service.reap(pulse.engine, limit=1, namespace=pulse.namespace, backoff=backoff)

    assert (first.errors, first.leases_lapsed) == (1, 0)
    assert (second.errors, second.leases_lapsed) == (0, 1), "the bad lease left the window"
    assert pulse.state(good) == "WAITING" and pulse.state(bad) == "LEASED"

    monkeypatch.setattr(expiry, "lapse_attempt", real)
    assert service.reap(pulse.engine, namespace=pulse.namespace, backoff=backoff).leases_lapsed == 0
    pulse.advance(ItemBackoff.MAX_SECONDS)
    retried = service.reap(pulse.engine, namespace=pulse.namespace, backoff=backoff)
    assert (retried.errors, retried.leases_lapsed) == (0, 1), "retried once its backoff ran out"
    assert pulse.state(bad) == "WAITING" and backoff.backing_off(pulse.now()) == frozenset()


def test_a_backoff_doubles_while_the_item_keeps_failing(
    pulse: PulseDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad, _good = lapsed_pair(pulse)
    monkeypatch.setattr(
        expiry,
        "lapse_attempt",
        raising_for(expiry.lapse_attempt, lambda conn, lapsed: lapsed.task_id == bad),
    )
    backoff = ItemBackoff()
    delays = []
    for _ in range(3):
        start = pulse.now()
        assert service.reap(pulse.engine, namespace=pulse.namespace, backoff=backoff).errors == 1
        (retry_at,) = backoff.retry_times().values()
        delays.append((retry_at - start).total_seconds())
        pulse.advance(delays[-1] + 1)
    assert delays[0] < delays[1] < delays[2] <= ItemBackoff.MAX_SECONDS


def test_an_overdue_task_and_an_expired_session_that_fail_back_off_alone(
    pulse: PulseDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad_task = pulse.submit(deadline_at=pulse.now(5)).task_id
    good_task = pulse.submit(deadline_at=pulse.now(6)).task_id
    bad_session = pulse.session("worker-bad", ttl_seconds=5).id
    good_session = pulse.session("worker-good", ttl_seconds=6).id
    pulse.advance(10)
    monkeypatch.setattr(
        expiry,
        "fail_overdue_task",
        raising_for(expiry.fail_overdue_task, lambda conn, namespace, task_id: task_id == bad_task),
    )
    monkeypatch.setattr(
        sessions,
        "expire_session",
        raising_for(
            sessions.expire_session, lambda conn, expired: expired.session_id == bad_session
        ),
    )
    backoff = ItemBackoff()

    first = service.reap(pulse.engine, limit=1, namespace=pulse.namespace, backoff=backoff)
    second = service.reap(pulse.engine, limit=1, namespace=pulse.namespace, backoff=backoff)

    assert (first.errors, first.deadlines_failed, first.sessions_expired) == (2, 0, 0)
    assert (second.errors, second.deadlines_failed, second.sessions_expired) == (0, 1, 1)
    assert pulse.state(good_task) == "FAILED" and pulse.state(bad_task) == "WAITING"
    assert len(backoff.retry_times()) == 2 and good_session not in str(backoff.retry_times())


def test_the_reaper_loop_logs_and_counts_an_item_backing_off(
    pulse: PulseDriver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    bad, _good = lapsed_pair(pulse)
    monkeypatch.setattr(
        expiry,
        "lapse_attempt",
        raising_for(expiry.lapse_attempt, lambda conn, lapsed: lapsed.task_id == bad),
    )
    metrics = Metrics(pulse.engine)
    backoff = ItemBackoff()

    with caplog.at_level(logging.ERROR, logger="orbit.passes"):
        for _ in range(2):
            reaper.reaper_pass(pulse.engine, metrics, namespace=pulse.namespace, backoff=backoff)

    errors = metrics.registry.get_sample_value("orbit_engine_item_errors_total", {"loop": "reaper"})
    assert errors == 1, "tried once, then left alone while it backs off"
    (record,) = [r for r in caplog.records if bad in r.getMessage()]
    assert "backs off" in record.getMessage()


# --- one namespace's burst -------------------------------------------------------------------


@pytest.fixture
def two_namespaces(isolated_engine: sa.Engine) -> Iterator[tuple[PulseDriver, PulseDriver]]:
    a, b = PulseDriver(isolated_engine), PulseDriver(isolated_engine)
    yield a, b
    with isolated_engine.connect() as conn:
        report = verify(conn)
    assert report.clean, {k: v for k, v in report.as_dict()["checks"].items() if v["violations"]}


def advance_both(a: PulseDriver, b: PulseDriver, seconds: float) -> None:
    a.advance(seconds)
    b.advance(seconds)


def test_a_burst_of_lapses_in_one_namespace_does_not_delay_anothers(
    two_namespaces: tuple[PulseDriver, PulseDriver],
) -> None:
    a, b = two_namespaces
    a.submit_many(4)
    a.claim(limit=4)
    advance_both(a, b, 1)
    other = b.submit().task_id
    b.claim(limit=1)  # its lease runs out after all of A's
    advance_both(a, b, 31)

    report = service.reap(b.engine, limit=3)

    assert report.leases_lapsed == 3
    assert b.state(other) == "WAITING", "B's lapse is in the first pass"


def test_a_burst_of_deadlines_in_one_namespace_does_not_delay_anothers(
    two_namespaces: tuple[PulseDriver, PulseDriver],
) -> None:
    a, b = two_namespaces
    a.submit_many(4, deadline_at=a.now(5))
    other = b.submit(deadline_at=b.now(6)).task_id
    b.session("worker-b", ttl_seconds=7)
    a.session("worker-a", ttl_seconds=5)
    a.session("worker-a2", ttl_seconds=5)
    advance_both(a, b, 10)

    report = service.reap(b.engine, limit=2)

    assert report.deadlines_failed == 2 and b.state(other) == "FAILED"
    assert report.sessions_expired == 2
    assert [s.namespace for s in b.tx(sessions.find_expired_sessions)] == [a.namespace]


# --- the promoter ----------------------------------------------------------------------------


def test_a_burst_of_due_tasks_in_one_namespace_does_not_delay_anothers_promotion(
    isolated_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The promoter drained the first namespace (by name) batch after batch before it looked at
    the next one; now every namespace with due tasks gets a batch in each round."""
    a = PulseDriver(isolated_engine, namespace=f"a-{uuid.uuid4().hex[:8]}")
    b = PulseDriver(isolated_engine, namespace=f"b-{uuid.uuid4().hex[:8]}")
    a.submit_many(3, delay_seconds=10)
    other = b.submit(delay_seconds=10).task_id
    advance_both(a, b, 11)
    batches: list[str] = []
    real = promotion.promote_due

    def recorded(conn: sa.Connection, **kw: Any) -> int:
        placed = real(conn, **kw)
        batches.extend([kw["namespace"]] * placed)
        return placed

    monkeypatch.setattr(promotion, "promote_due", recorded)

    report = service.promote(b.engine, limit=1)

    assert report.promoted == 4 and b.task(other).wait_path == "READY"
    assert batches.index(b.namespace) == 1, "B's batch comes in the first round, after A's first"
