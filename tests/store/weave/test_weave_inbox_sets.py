"""The inbox consumer's set pass (``inbox_set``, seed §6.3, invariants 6, 9 and 10): many
instances' outcomes consumed in one transaction for a constant number of statements, each
instance's outcomes in order, and an instance the set cannot decide — a task Pulse refuses, a
decision that raises — taken alone while the others of its set advance."""

from __future__ import annotations

import functools

import pytest
import sqlalchemy as sa

from orbit_store.pulse.limits.quota_declarations import QuotaSpec, put_quota
from orbit_store.pulse.model import Outcome
from orbit_store.schema import submission_keys, workflow_inbox
from orbit_store.weave import inbox
from orbit_store.weave.sets import inbox_set

from ..drivers.opened_waits import end_state
from ..drivers.sent_statements import sent_statements
from ..drivers.weave_driver import WeaveDriver, task_step

TWO_STEPS = {"steps": [task_step("first"), task_step("second", dependsOn=["first"])]}
#: The second step's queue comes from the input: one instance can name a queue that refuses.
ROUTED = {
    "steps": [
        task_step("first"),
        task_step("second", dependsOn=["first"], queue="${input.queue}"),
    ]
}
SIZES = (1, 8, 64)

#: What a set costs the database, whatever its size: the instances locked; their steps, inbox
#: rows, activations and signals read; the submission (queue scope, gates, three INSERTs); the
#: activations and events inserted; steps, activations and instances updated; rows consumed.
SET_STATEMENTS = 16


def _finish_first(weave: WeaveDriver, wf: str) -> None:
    weave.finish_task(weave.task_of(wf, "first").id, Outcome.SUCCEEDED, result={"n": 1})


def _consume_set(weave: WeaveDriver, ids: list[str]) -> inbox_set.SetOutcome:
    work = functools.partial(inbox_set.consume_set, namespace=weave.namespace, instance_ids=ids)
    return weave.tx(work)


@pytest.mark.mariadb_only
def test_a_set_costs_the_same_statements_for_1_8_and_64_instances(weave: WeaveDriver) -> None:
    weave.publish("two", TWO_STEPS)
    counts = {}
    for size in SIZES:
        ids = [weave.start_workflow("two") for _ in range(size)]
        firsts = [weave.task_of(wf, "first").id for wf in ids]
        weave.finish_tasks(firsts, Outcome.SUCCEEDED, result={"n": 1})
        with sent_statements(weave.base_engine) as sent:
            outcome = _consume_set(weave, ids)
        assert (len(outcome.reports), outcome.alone, outcome.consumed) == (size, [], size)
        assert all(
            weave.step_states(wf) == {"first": "SUCCEEDED", "second": "ACTIVE"} for wf in ids
        )
        assert all(m.state == "CONSUMED" for wf in ids for m in weave.inbox(wf))
        counts[size] = len(sent)
    assert counts == dict.fromkeys(SIZES, SET_STATEMENTS), counts


@pytest.mark.parametrize(
    "second",
    [{"sleep": {"seconds": 30}}, {"wait": {"signal": "go", "timeoutSeconds": 60}}],
    ids=["sleep", "signal_wait"],
)
def test_a_wait_opened_in_an_inbox_set_ends_as_on_the_single_path_inv9(
    weave: WeaveDriver, second: dict[str, object]
) -> None:
    """A task whose next step is a sleep or a signal wait: the set opens it — activation,
    wait row, history, the instance's next wake-up — as consuming the outcome alone does."""
    weave.publish(
        "opens",
        {"steps": [task_step("first"), {"name": "second", **second, "dependsOn": ["first"]}]},
    )
    in_set, alone = weave.start_workflow("opens"), weave.start_workflow("opens")
    _finish_first(weave, in_set)
    _finish_first(weave, alone)
    outcome = _consume_set(weave, [in_set])
    assert (outcome.alone, outcome.consumed) == ([], 1)
    (message,) = weave.inbox(alone)
    weave.tx(
        functools.partial(
            inbox.consume, namespace=weave.namespace, instance_id=alone, inbox_id=message.id
        )
    )
    held = end_state(weave, in_set)
    assert held == end_state(weave, alone)
    assert held["steps"] == {"first": "SUCCEEDED", "second": "ACTIVE"}
    assert held["wake_at_is_earliest_wait"] and held["waits"][0][3] == "WAITING"


def test_a_signal_sent_before_its_wait_opens_is_taken_alone_inv10(weave: WeaveDriver) -> None:
    """A pending signal under the instance lock: the wait opening in the set would consume
    it, which the set does not hold back; the instance is consumed alone, the signal once."""
    spec = {
        "steps": [
            task_step("first"),
            {"name": "second", "wait": {"signal": "go"}, "dependsOn": ["first"]},
        ]
    }
    weave.publish("opens", spec)
    wf = weave.start_workflow("opens")
    weave.signal(wf, "go", {"ok": True})
    _finish_first(weave, wf)
    assert _consume_set(weave, [wf]).alone == [wf]
    weave.consume()
    assert weave.step_states(wf) == {"first": "SUCCEEDED", "second": "SUCCEEDED"}
    assert [s.state for s in weave.signals(wf)] == ["CONSUMED"]
    assert weave.history(wf).count("signal.consumed:second") == 1


def test_each_instance_in_a_set_moves_as_alone_with_its_task_and_history(
    weave: WeaveDriver,
) -> None:
    """The follow-up task carries the activation's key (invariant 6) and the history names it;
    the consumed row says what it did; a second pass finds nothing to do."""
    weave.publish("two", TWO_STEPS)
    ids = [weave.start_workflow("two") for _ in range(3)]
    for wf in ids:
        _finish_first(weave, wf)
    outcome = _consume_set(weave, ids)
    assert outcome.alone == [] and len(outcome.reports) == 3
    for wf in ids:
        task = weave.task_of(wf, "second")
        (activation,) = weave.activations(wf, "second")
        assert (activation.task_id, task.workflow_activation_id) == (task.id, activation.id)
        key = weave.tx(
            lambda c, task_id=task.id: c.execute(
                sa.select(submission_keys.c.idempotency_key).where(
                    submission_keys.c.task_id == task_id
                )
            ).scalar_one()
        )
        assert key == f"wf:{wf}:second:1"
        assert weave.history(wf)[-4:] == [
            "task.outcome:first",
            "step.succeeded:first",
            "step.activated:second",
            "task.created:second",
        ]
        (message,) = weave.inbox(wf)
        assert (message.state, message.outcome) == ("CONSUMED", "step first SUCCEEDED")
    again = _consume_set(weave, ids)
    assert (again.reports, again.alone, again.consumed) == ([], [], 0)


def test_an_instances_outcomes_are_applied_in_order_in_one_set(weave: WeaveDriver) -> None:
    """Both outcomes of a parallel pair in one set: the join step starts once, after both."""
    spec = {
        "steps": [
            task_step("left"),
            task_step("right"),
            task_step("join", dependsOn=["left", "right"]),
        ]
    }
    weave.publish("pair", spec)
    wf = weave.start_workflow("pair")
    for name in ("left", "right"):
        weave.finish_task(weave.task_of(wf, name).id, Outcome.SUCCEEDED, result={"n": name})
    outcome = _consume_set(weave, [wf])
    assert outcome.consumed == 2
    assert weave.step_states(wf)["join"] == "ACTIVE"
    assert len(weave.activations(wf, "join")) == 1
    history = weave.history(wf)
    assert history.count("step.activated:join") == 1
    joined = history.index("step.activated:join")
    assert history.index("task.outcome:left") < joined
    assert history.index("task.outcome:right") < joined


def test_a_refused_task_takes_its_instance_alone_and_the_others_advance(
    weave: WeaveDriver,
) -> None:
    """One instance's next task goes to a queue whose quota is full: the set leaves it to the
    single path, where the row backs off with the quota's error; the rest of the set advance."""
    weave.queue("full")
    weave.tx(lambda c: put_quota(c, weave.namespace, QuotaSpec("q", queue="full", max_waiting=0)))
    weave.publish("routed", ROUTED)
    good = [weave.start_workflow("routed", input={"queue": "default"}) for _ in range(4)]
    bad = weave.start_workflow("routed", input={"queue": "full"})
    for wf in [*good, bad]:
        _finish_first(weave, wf)
    report = weave.consume()
    assert report.errors == 1 and len(report.reports) == 4
    assert all(weave.step_states(wf)["second"] == "ACTIVE" for wf in good)
    assert weave.step_states(bad)["second"] == "PENDING"
    (message,) = weave.inbox(bad)
    assert (message.state, message.attempts) == ("PENDING", 1)
    assert "QuotaExceeded" in message.last_error


def test_a_poisoned_instance_is_taken_alone_and_the_others_advance(weave: WeaveDriver) -> None:
    """An instance whose decision raises (its outcome row is unreadable): the set leaves it
    alone, nothing of it written; the single path records the error on its row and backs it
    off; the others of the set advance."""
    weave.publish("two", TWO_STEPS)
    good = [weave.start_workflow("two") for _ in range(3)]
    bad = weave.start_workflow("two")
    for wf in [*good, bad]:
        _finish_first(weave, wf)
    (message,) = weave.inbox(bad)
    weave.tx(
        lambda conn: conn.execute(
            workflow_inbox.update().where(workflow_inbox.c.id == message.id).values(payload={})
        )
    )
    outcome = _consume_set(weave, [*good, bad])
    assert outcome.alone == [bad] and len(outcome.reports) == 3
    assert all(weave.step_states(wf)["second"] == "ACTIVE" for wf in good)
    assert weave.inbox(bad)[0].state == "PENDING", "nothing of it written by the set"
    assert weave.history(bad)[-1] == "task.created:first"
    report = weave.consume()
    assert report.errors == 1
    (row,) = weave.inbox(bad)
    assert (row.state, row.attempts) == ("PENDING", 1)
    assert "KeyError" in row.last_error
    assert weave.step_states(bad)["second"] == "PENDING"


def test_a_paused_instance_is_left_to_the_single_path(weave: WeaveDriver) -> None:
    """Paused (invariant 12): its continuation row is recorded alone, the follow-ups wait."""
    weave.publish("two", TWO_STEPS)
    running, paused = weave.start_workflow("two"), weave.start_workflow("two")
    for wf in (running, paused):
        _finish_first(weave, wf)
    weave.control("pause", paused)
    outcome = _consume_set(weave, [running, paused])
    assert outcome.alone == [paused]
    weave.consume()
    assert weave.step_states(paused) == {"first": "SUCCEEDED", "second": "PENDING"}
    assert weave.inbox(paused)[0].outcome.startswith("deferred: instance paused")


@pytest.mark.mariadb_only
def test_a_start_creates_its_first_tasks_in_the_same_statements_however_many(
    weave: WeaveDriver,
) -> None:
    """The first steps' tasks of a start go through one set-based submission (``advance_held``):
    a workflow opening with one task step costs what one opening with six does."""
    counts = {}
    for width in (1, 6):
        weave.publish(f"wide{width}", {"steps": [task_step(f"s{i}") for i in range(width)]})
        weave.start_workflow(f"wide{width}")  # definitions read and cached
        with sent_statements(weave.base_engine) as sent:
            wf = weave.start_workflow(f"wide{width}")
        assert set(weave.step_states(wf).values()) == {"ACTIVE"}
        assert len(weave.tasks_of(wf)) == width
        counts[width] = len(sent)
    assert counts[1] == counts[6], counts


def test_a_start_whose_first_task_is_refused_fails_that_step_as_before(
    weave: WeaveDriver,
) -> None:
    """A first task Pulse refuses (its queue is not declared): the held start falls back to
    the single path, which fails the step with the refusal; the instance fails."""
    spec = {"steps": [task_step("ok"), task_step("lost", queue="nowhere")]}
    weave.publish("refused", spec)
    wf = weave.start_workflow("refused")
    steps = weave.steps(wf)
    assert steps["lost"].state == "FAILED"
    assert steps["lost"].error["type"] == "task_refused"
    assert weave.instance(wf).state == "FAILED"
