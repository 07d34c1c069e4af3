"""One namespace's backlog of outcomes does not hold back another's (ORBIT.md §3): a consumer
pass takes every namespace's oldest due inbox rows in turn, not the oldest of the database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from orbit_store.recovery.verify import verify
from orbit_store.weave import service

from ..drivers.weave_driver import WeaveDriver
from .test_weave_inbox import TWO_STEPS, finish_first


@pytest.fixture
def two_namespaces(isolated_engine: sa.Engine) -> Iterator[tuple[WeaveDriver, WeaveDriver]]:
    a, b = WeaveDriver(isolated_engine), WeaveDriver(isolated_engine)
    yield a, b
    with isolated_engine.connect() as conn:
        report = verify(conn)
    assert report.clean, {k: v for k, v in report.as_dict()["checks"].items() if v["violations"]}


def test_a_backlog_in_one_namespace_does_not_hold_back_anothers_outcomes(
    two_namespaces: tuple[WeaveDriver, WeaveDriver],
) -> None:
    a, b = two_namespaces
    for driver in (a, b):
        driver.publish("two", TWO_STEPS)
    backlog = [a.start_workflow("two") for _ in range(4)]
    for wf in backlog:
        finish_first(a, wf)
    other = b.start_workflow("two")
    finish_first(b, other)  # persisted after all of A's

    report = service.consume_pass(b.engine, limit=3)

    assert report.errors == 0 and len(report.reports) == 3
    assert b.step_states(other)["second"] == "ACTIVE", "B's outcome is in the first pass"
    assert sum(a.step_states(wf)["second"] == "ACTIVE" for wf in backlog) == 2
