"""One namespace's workflows cannot stall another's timers (ORBIT.md §3 "Per-item isolation in
loops"): a workflow whose firing raises — its next step's task refused by a full quota — backs
off alone, with the reason on the instance and in a gauge, and the timer loop fires everyone
else's sleeps meanwhile; when the quota frees, the workflow goes on (invariant 9: the step's
task is created in the transaction that activates it, never lost)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from orbit.metrics.workflows import workflow_gauges
from orbit_store.clock import CLOCK_SKEW_OPTION
from orbit_store.recovery.verify import verify
from orbit_store.weave import queries, service

from ..drivers.weave_driver import WeaveDriver, task_step


def nap_then_work(seconds: float) -> dict[str, object]:
    return {
        "steps": [
            {"name": "nap", "sleep": {"seconds": seconds}},
            task_step("work", dependsOn=["nap"]),
        ]
    }


@pytest.fixture
def two_namespaces(isolated_engine: sa.Engine) -> Iterator[tuple[WeaveDriver, WeaveDriver]]:
    """Two namespaces on a database of their own (a timer pass sees every namespace)."""
    a, b = WeaveDriver(isolated_engine), WeaveDriver(isolated_engine)
    yield a, b
    with isolated_engine.connect() as conn:
        report = verify(conn)
    assert report.clean, {k: v for k, v in report.as_dict()["checks"].items() if v["violations"]}


def timer_pass(driver: WeaveDriver, limit: int) -> service.PassReport:
    """One timer pass over every namespace, seen at ``driver``'s clock."""
    return service.timer_pass(driver.engine, limit=limit)


def test_a_namespace_whose_timers_fail_does_not_stop_another_namespaces_timers(
    two_namespaces: tuple[WeaveDriver, WeaveDriver],
) -> None:
    a, b = two_namespaces
    a.publish("nap", nap_then_work(5))
    b.publish("nap", nap_then_work(6))  # A's sleeps end first
    stuck = [a.start_workflow("nap") for _ in range(3)]
    a.quota("full", max_waiting=0)
    other = b.start_workflow("nap")
    for driver in (a, b):
        driver.advance(10)

    first = timer_pass(b, limit=10)

    assert first.errors == 3, "A's firings are refused by its quota"
    assert b.step_states(other) == {"nap": "SUCCEEDED", "work": "ACTIVE"}
    # each backs off alone: no pass tries it again before its retry time
    retry_at = min(a.instance(wf).timer_retry_at for wf in stuck)
    before_retry = (retry_at - b.now()).total_seconds() - 0.5
    clock = b.base_engine.execution_options(**{CLOCK_SKEW_OPTION: b.skew + before_retry})
    assert service.timer_pass(clock, limit=10).errors == 0
    for wf in stuck:
        assert a.step_states(wf) == {"nap": "ACTIVE", "work": "PENDING"}
        with a.engine.connect() as conn:
            detail = queries.get_detail(conn, a.namespace, wf)
        assert detail is not None and detail.orchestration_error is not None
        assert "QuotaExceeded" in detail.orchestration_error
        assert detail.orchestration_retry_at is not None
    with a.engine.connect() as conn:
        gauges = {m.name: m for m in workflow_gauges(conn)}
    backing_off = {
        s.labels["namespace"]: s.value for s in gauges["orbit_workflow_timers_backing_off"].samples
    }
    assert backing_off == {a.namespace: 3, b.namespace: 0}

    a.quota("full", max_waiting=10)
    a.advance(2)  # past the first backoff
    assert timer_pass(a, limit=10).errors == 0
    for wf in stuck:
        assert a.step_states(wf) == {"nap": "SUCCEEDED", "work": "ACTIVE"}
        with a.engine.connect() as conn:
            detail = queries.get_detail(conn, a.namespace, wf)
        assert detail is not None and detail.orchestration_error is None


def test_a_namespace_with_many_due_timers_does_not_hold_back_another_namespaces(
    two_namespaces: tuple[WeaveDriver, WeaveDriver],
) -> None:
    """A pass takes every namespace's oldest due timers in turn, not the oldest of the
    database: a burst in one namespace does not delay another's by the length of the burst."""
    a, b = two_namespaces
    a.publish("nap", {"steps": [{"name": "nap", "sleep": {"seconds": 5}}]})
    b.publish("nap", {"steps": [{"name": "nap", "sleep": {"seconds": 6}}]})
    burst = [a.start_workflow("nap") for _ in range(4)]
    other = b.start_workflow("nap")
    for driver in (a, b):
        driver.advance(10)

    report = timer_pass(b, limit=3)

    assert report.errors == 0 and len(report.reports) == 3
    assert b.instance(other).state == "SUCCEEDED", "B's one timer is in the first pass"
    assert sum(a.instance(wf).state == "SUCCEEDED" for wf in burst) == 2
