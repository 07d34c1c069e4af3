"""Handler routing: a worker session that declares its handlers is granted only their tasks,
without scanning the others (they have lanes of their own in the READY index), and a task no
live worker can run says so."""

from __future__ import annotations

import functools

import pytest
import sqlalchemy as sa

from orbit_store.pulse.claim.claim import claim_tasks
from orbit_store.pulse.views.queries import get_task, get_task_view, list_tasks
from orbit_store.pulse.views.routing import unrunnable_counts

from ...conftest import rows_read
from ...drivers.pulse_driver import PulseDriver


def test_a_session_is_granted_only_the_handlers_it_declared(pulse: PulseDriver) -> None:
    pulse.submit(handler="shop.refund", priority=-1)
    mine = pulse.submit(handler="shop.echo")
    session = pulse.session(handlers=["shop.echo"])
    assert [g.task_id for g in pulse.claim(session_id=session.id)] == [mine.task_id]
    assert pulse.claim(session_id=session.id) == []


def test_a_session_without_handlers_takes_any_handler(pulse: PulseDriver) -> None:
    pulse.submit(handler="a")
    pulse.submit(handler="b")
    assert len(pulse.claim(session_id=pulse.session(handlers=None).id)) == 2


def test_a_session_declaring_no_handler_at_all_gets_nothing(pulse: PulseDriver) -> None:
    pulse.submit(handler="a")
    assert pulse.claim(session_id=pulse.session(handlers=[]).id) == []


def test_several_handlers_are_claimed_in_task_priority_order(pulse: PulseDriver) -> None:
    order = [
        pulse.submit(handler="a", priority=3),
        pulse.submit(handler="b", priority=1),
        pulse.submit(handler="c", priority=2),
        pulse.submit(handler="b", priority=4),
    ]
    session = pulse.session(handlers=["a", "b", "c", "unused"])
    grants = pulse.claim(limit=3, session_id=session.id)
    assert [g.task_id for g in grants] == [order[1].task_id, order[2].task_id, order[0].task_id]


@pytest.mark.mariadb_only
def test_tasks_of_other_handlers_are_not_scanned(engine: sa.Engine) -> None:
    """600 READY tasks of a handler this session does not run, ahead of its one task, cost its
    claim nothing."""

    def cost(others: int) -> int:
        pulse = PulseDriver(engine)
        pulse.submit_many(others, handler="someone.else", priority=-5)
        pulse.submit(handler="mine.a")
        pulse.submit(handler="mine.b")
        session = pulse.session(handlers=["mine.a", "mine.b"])
        claim = functools.partial(
            claim_tasks,
            namespace=pulse.namespace,
            queues_=["default"],
            limit=2,
            worker_session_id=session.id,
        )
        return rows_read(engine, claim)

    small, large = cost(10), cost(600)
    assert large <= small + 2, (small, large)


def test_a_task_no_live_worker_can_run_says_so(pulse: PulseDriver) -> None:
    nobody = pulse.submit(handler="shop.refund")
    served = pulse.submit(handler="shop.echo")
    pulse.session(handlers=["shop.echo"])

    def view(task_id: str) -> tuple[str | None, bool | None]:
        with pulse.engine.connect() as conn:
            detail = get_task(conn, pulse.namespace, task_id)
        assert detail is not None
        return detail.task.waiting_reason, detail.task.runnable_by_live_worker

    assert view(nobody.task_id) == ("ready", False)
    assert view(served.task_id) == ("ready", True)
    with pulse.engine.connect() as conn:
        page, _ = list_tasks(conn, pulse.namespace)
        plain = get_task_view(conn, pulse.namespace, nobody.task_id)
        counts = [c for c in unrunnable_counts(conn) if c[0] == pulse.namespace]
    assert {t.id: t.runnable_by_live_worker for t in page} == {
        nobody.task_id: False,
        served.task_id: True,
    }
    assert plain is not None and plain.runnable_by_live_worker is None, "not computed here"
    assert counts == [(pulse.namespace, "default", 1)]


def test_a_draining_or_expired_session_runs_nothing_new(pulse: PulseDriver) -> None:
    task = pulse.submit(handler="h")
    session = pulse.session(handlers=["h"], ttl_seconds=5)
    pulse.drain(session.id)
    with pulse.engine.connect() as conn:
        detail = get_task(conn, pulse.namespace, task.task_id)
    assert detail is not None and detail.task.runnable_by_live_worker is False
