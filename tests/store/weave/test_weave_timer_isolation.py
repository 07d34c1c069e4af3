"""One namespace's workflows cannot stall another's timers (ORBIT.md §3 "Per-item isolation in
loops"): a workflow whose firing raises — its next step's task refused by a full quota — backs
off alone, with the reason on the instance and in a gauge, and the timer loop fires everyone
else's sleeps meanwhile; when the quota frees, the workflow goes on (invariant 9: the step's
task is created in the transaction that activates it, never lost)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from orbit.metrics_workflows import workflow_gauges
from orbit_store.verify import verify
from orbit_store.weave import queries, service

from ..weave_driver import WeaveDriver, task_step


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
    b.publish("nap", nap_then_work(6))  # A's sleeps end first: the oldest due timers
    stuck = [a.start_workflow("nap") for _ in range(3)]
    a.quota("full", max_waiting=0)
    other = b.start_workflow("nap")
    for driver in (a, b):
        driver.advance(10)

    first = timer_pass(b, limit=3)
    second = timer_pass(b, limit=3)

    assert first.errors == 3, "A's firings are refused by its quota"
    assert second.errors == 0, "and they back off instead of taking the next pass"
    assert b.step_states(other) == {"nap": "SUCCEEDED", "work": "ACTIVE"}
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
