"""Pulse → Weave through the durable inbox (seed §6.3, invariants 9 and 10): outcomes are
persisted with the task's transition, consumed once, and advance only the activation their task
still serves; review parks a step; a consumption that fails is retried, never lost."""

from __future__ import annotations

import functools
import multiprocessing
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from orbit_store.db import create_store_engine, run_transaction
from orbit_store.ids import new_id
from orbit_store.pulse.limits.quota_declarations import QuotaSpec, put_quota
from orbit_store.pulse.model import Outcome
from orbit_store.schema import workflow_inbox
from orbit_store.weave.inbox import consume

from ..drivers.weave_driver import WeaveDriver, task_step

TWO_STEPS = {"steps": [task_step("first"), task_step("second", dependsOn=["first"])]}
HANDLERS = {"test.first": lambda p: {"n": 1}, "test.second": lambda p: {"n": 2}}


def finish_first(weave: WeaveDriver, wf: str, outcome: Outcome = Outcome.SUCCEEDED) -> None:
    weave.finish_task(weave.task_of(wf, "first").id, outcome, result={"n": 1})


def test_the_outcome_is_persisted_in_the_same_transaction_as_the_task(
    weave: WeaveDriver,
) -> None:
    weave.publish("two", TWO_STEPS)
    wf = weave.start_workflow("two")
    task = weave.task_of(wf, "first")
    finish_first(weave, wf)
    (message,) = weave.inbox(wf)
    assert message.source_event_id == f"task:{task.id}:v{weave.task(task.id).state_version}"
    assert (message.state, message.kind, message.payload["result"]) == (
        "PENDING",
        "task.succeeded",
        {"n": 1},
    )
    assert weave.step_states(wf)["second"] == "PENDING", "task finished, not yet advanced"
    weave.consume()
    assert weave.step_states(wf)["second"] == "ACTIVE"
    assert weave.inbox(wf)[0].state == "CONSUMED"


def _consume_at(url: str, namespace: str, instance_id: str, inbox_id: str, at: float) -> None:
    engine = create_store_engine(url)
    time.sleep(max(at - time.time(), 0))
    run_transaction(
        engine,
        functools.partial(consume, namespace=namespace, instance_id=instance_id, inbox_id=inbox_id),
    )
    engine.dispose()


@pytest.mark.mariadb_only
def test_a_duplicate_inbox_delivery_creates_one_follow_up_task_inv9(
    weave: WeaveDriver, mariadb_url: str
) -> None:
    """Four processes deliver the same inbox row at the same instant, then it is delivered
    again: exactly one task for the next step exists."""
    weave.publish("two", TWO_STEPS)
    wf = weave.start_workflow("two")
    finish_first(weave, wf)
    (message,) = weave.inbox(wf)
    ctx = multiprocessing.get_context("spawn")
    at = time.time() + 3
    processes = [
        ctx.Process(target=_consume_at, args=(mariadb_url, weave.namespace, wf, message.id, at))
        for _ in range(4)
    ]
    for p in processes:
        p.start()
    for p in processes:
        p.join(60)
        assert p.exitcode == 0
    weave.tx(
        functools.partial(consume, namespace=weave.namespace, instance_id=wf, inbox_id=message.id)
    )
    assert [t.handler for t in weave.tasks_of(wf)] == ["test.first", "test.second"]
    assert [(a.step_name, a.seq) for a in weave.activations(wf, "second")] == [("second", 1)]


def test_the_same_event_cannot_be_recorded_twice_inv9(weave: WeaveDriver) -> None:
    weave.publish("two", TWO_STEPS)
    wf = weave.start_workflow("two")
    finish_first(weave, wf)
    (message,) = weave.inbox(wf)
    copy = {**message._asdict(), "id": new_id()}
    with pytest.raises(sa.exc.IntegrityError):
        weave.tx(lambda conn: conn.execute(workflow_inbox.insert().values(**copy)))


def replay(weave: WeaveDriver, message: Any, **changes: Any) -> None:
    """The same outcome delivered again under another identity (e.g. after a restore)."""
    row = {**message._asdict(), "id": new_id(), "state": "PENDING", "consumed_at": None}
    row.update(source_event_id=f"replay:{new_id()}", outcome=None, **changes)
    weave.tx(lambda conn: conn.execute(workflow_inbox.insert().values(**row)))


def test_a_replayed_outcome_finds_its_step_settled_and_changes_nothing_inv9(
    weave: WeaveDriver,
) -> None:
    weave.publish("two", TWO_STEPS)
    wf = weave.start_workflow("two")
    finish_first(weave, wf)
    weave.consume()
    replay(weave, weave.inbox(wf)[0])
    weave.consume()
    assert len(weave.tasks_of(wf)) == 2
    assert weave.inbox(wf)[-1].outcome == "ignored: step first is SUCCEEDED"


def test_an_outcome_of_a_task_that_does_not_serve_the_step_advances_nothing_inv10(
    weave: WeaveDriver,
) -> None:
    weave.publish("two", TWO_STEPS)
    wf = weave.start_workflow("two")
    finish_first(weave, wf)
    (message,) = weave.inbox(wf)
    replay(weave, message, task_id=new_id())  # a stranger's result for the same activation
    later = weave.now(3600)
    weave.tx(
        lambda conn: conn.execute(
            workflow_inbox.update()
            .where(workflow_inbox.c.id == message.id)
            .values(next_attempt_at=later)
        )
    )
    weave.consume()
    assert weave.step_states(wf) == {"first": "ACTIVE", "second": "PENDING"}
    assert "no longer serves step first" in weave.inbox(wf)[-1].outcome
    weave.advance(3601)
    weave.consume()
    assert weave.step_states(wf)["second"] == "ACTIVE", "the real outcome still counts"


def test_a_task_awaiting_review_parks_its_step_until_review_settles_it(
    weave: WeaveDriver,
) -> None:
    weave.publish("two", TWO_STEPS)
    wf = weave.start_workflow("two")
    task_id = weave.task_of(wf, "first").id
    finish_first(weave, wf, Outcome.UNKNOWN)
    weave.consume()
    assert weave.step_states(wf) == {"first": "PARKED", "second": "PENDING"}
    weave.review(task_id, "succeeded")
    weave.consume()
    assert weave.step_states(wf) == {"first": "SUCCEEDED", "second": "ACTIVE"}
    weave.run_tasks(HANDLERS)
    assert weave.instance(wf).state == "SUCCEEDED"


def test_a_consumption_that_fails_is_retried_later_not_lost(weave: WeaveDriver) -> None:
    weave.publish("two", TWO_STEPS)
    wf = weave.start_workflow("two")
    quota = QuotaSpec(name="full", max_waiting=0)
    weave.tx(lambda conn: put_quota(conn, weave.namespace, quota))
    finish_first(weave, wf)
    report = weave.consume()
    assert report.errors == 1
    (message,) = weave.inbox(wf)
    assert (message.state, message.attempts) == ("PENDING", 1)
    assert "QuotaExceeded" in message.last_error
    weave.tx(lambda conn: put_quota(conn, weave.namespace, QuotaSpec(name="full", max_waiting=9)))
    assert weave.consume().reports == [], "backing off"
    weave.advance(2)
    weave.consume()
    assert weave.step_states(wf)["second"] == "ACTIVE"


def poison_outcome(weave: WeaveDriver, wf: str) -> str:
    """Finish the first step's task of ``wf``, its inbox row pointing nowhere (consuming it
    raises); the row's id."""
    finish_first(weave, wf)
    (message,) = weave.inbox(wf)
    weave.tx(
        lambda conn: conn.execute(
            workflow_inbox.update()
            .where(workflow_inbox.c.id == message.id)
            .values(instance_id=new_id())
        )
    )
    return str(message.id)


def test_consumption_is_per_row_one_bad_row_stops_nothing(
    weave: WeaveDriver, tmp_path: Path
) -> None:
    weave.publish("two", TWO_STEPS)
    good, bad = weave.start_workflow("two"), weave.start_workflow("two")
    finish_first(weave, good)
    poison_outcome(weave, bad)
    report = weave.consume()
    assert report.errors == 1 and len(report.reports) == 1
    assert weave.step_states(good)["second"] == "ACTIVE"
