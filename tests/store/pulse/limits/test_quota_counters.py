"""Quotas are O(1): counters kept by the transitions replace counting the
backlog, are exact at every step (``verify`` compares them with a real count after each test),
and namespaces without quotas never touch them."""

from __future__ import annotations

import functools

import pytest
import sqlalchemy as sa

from orbit_store.errors import QuotaExceeded
from orbit_store.pulse.model import Outcome
from orbit_store.pulse.submit.accept import SubmitRequest, submit_task
from orbit_store.schema import quotas

from ...conftest import rows_read
from ...drivers.pulse_driver import PulseDriver


def _counters(pulse: PulseDriver, name: str = "q") -> tuple[int, int]:
    with pulse.engine.connect() as conn:
        row = conn.execute(
            sa.select(quotas.c.waiting, quotas.c.running).where(
                quotas.c.namespace == pulse.namespace, quotas.c.name == name
            )
        ).one()
    return row.waiting, row.running


@pytest.mark.mariadb_only
def test_submit_count_does_not_grow_with_backlog(engine: sa.Engine) -> None:
    """Defect 2: a submission under a max-waiting quota reads as many rows with 600 tasks
    waiting as with 20."""

    def cost(backlog: int) -> int:
        pulse = PulseDriver(engine)
        # Declared over the backlog, the quota counts it (tested below): the backlog is then
        # written in bulk rather than entered under the quota one item at a time.
        pulse.submit_many(backlog)
        pulse.quota("q", max_waiting=10_000)
        request = SubmitRequest(namespace=pulse.namespace, queue="default", handler="h")
        return rows_read(engine, functools.partial(submit_task, request=request))

    small, large = cost(20), cost(600)
    assert large <= small + 2, (small, large)


def test_counters_follow_every_transition(pulse: PulseDriver) -> None:
    pulse.quota("q", max_waiting=100, max_running=100)
    for _ in range(4):
        pulse.submit(backoff_initial_ms=1)
    assert _counters(pulse) == (4, 0)
    a, b, c, d = pulse.claim(limit=4)
    assert _counters(pulse) == (0, 4)
    for grant in (a, b, c):
        pulse.start(grant)
    pulse.succeed(a)
    pulse.fail(b, retryable=True)
    pulse.complete(d, Outcome.RELEASED)
    assert _counters(pulse) == (2, 1)
    pulse.cancel(d.task_id)
    pulse.advance(31)
    pulse.reap()  # c lapses while running: retried
    assert _counters(pulse) == (2, 0)


def test_a_quota_declared_over_a_backlog_counts_it(pulse: PulseDriver) -> None:
    pulse.submit_many(3)
    pulse.claim_one()
    pulse.quota("q", max_waiting=2)
    assert _counters(pulse) == (2, 1)
    with pytest.raises(QuotaExceeded, match="2 tasks waiting"):
        pulse.submit()


def test_a_namespace_quota_and_a_queue_quota_both_count(pulse: PulseDriver) -> None:
    pulse.queue("mail")
    pulse.quota("all", max_running=5)
    pulse.submit(queue="mail")
    pulse.quota("mail-only", queue="mail", max_running=1)
    pulse.submit(queue="mail")
    pulse.claim(queues=["mail"], limit=5)
    assert _counters(pulse, "all") == (1, 1)
    assert _counters(pulse, "mail-only") == (1, 1)


def test_max_running_counts_across_queues_in_the_namespace(pulse: PulseDriver) -> None:
    pulse.queue("a")
    pulse.queue("b")
    pulse.quota("all", max_running=3)
    pulse.submit_many(3, queue="a")
    pulse.submit_many(3, queue="b")
    assert len(pulse.claim(queues=["a", "b"], limit=10)) == 3
    assert pulse.claim(queues=["a", "b"], limit=10) == []


def test_deleting_the_last_quota_stops_counting_new_tasks(pulse: PulseDriver) -> None:
    from orbit_store.pulse.limits.quota_declarations import delete_quota

    pulse.quota("q", max_waiting=1)
    pulse.submit()
    pulse.tx(lambda c: delete_quota(c, pulse.namespace, "q"))
    fresh = pulse.submit()
    assert not pulse.task(fresh.task_id).quota_counted
    pulse.claim(limit=5)
