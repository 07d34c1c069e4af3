"""The timer loop's set pass (``timer_set``, invariants 9 and 12): the due timers of many
instances fired in one transaction for a constant number of statements — a sleep succeeds, a
signal wait that timed out follows its ``onTimeout``, the next step's task is created with it —
an instance the set cannot fire taken alone while the others fire, a paused instance not fired,
and a timer fired once however many passes run at the same time."""

from __future__ import annotations

import functools
import multiprocessing
import time

import pytest
import sqlalchemy as sa

from orbit_store.clock import CLOCK_SKEW_OPTION
from orbit_store.db import create_store_engine
from orbit_store.schema import workflow_steps, workflow_waits
from orbit_store.weave import service, timers
from orbit_store.weave.set_writes import SetOutcome
from orbit_store.weave.sets import timer_set

from ..drivers.opened_waits import end_state
from ..drivers.sent_statements import sent_statements
from ..drivers.weave_driver import WeaveDriver, task_step

SIZES = (1, 8, 64)

#: What a set costs the database, whatever its size: the instances locked; their steps, waits,
#: poll activations and signals read; the submission (queue scope, gates, three INSERTs); the
#: activations and events inserted; steps, activations, waits and instances updated.
SET_STATEMENTS = 16
#: A set whose next steps are sleeps: as above with no submission, the new waits inserted.
OPENING_STATEMENTS = 12


def nap_then_work(seconds: float = 5) -> dict[str, object]:
    return {
        "steps": [
            {"name": "nap", "sleep": {"seconds": seconds}},
            task_step("work", dependsOn=["nap"]),
        ]
    }


def timed_wait(on_timeout: str) -> dict[str, object]:
    return {
        "steps": [
            {
                "name": "approval",
                "wait": {"signal": "approved", "timeoutSeconds": 60, "onTimeout": on_timeout},
            },
            task_step("ship", dependsOn=["approval"]),
            task_step("escalate", dependsOn=["approval"]),
        ]
    }


def fire_set(weave: WeaveDriver, ids: list[str]) -> SetOutcome:
    work = functools.partial(timer_set.fire_set, namespace=weave.namespace, instance_ids=ids)
    return weave.tx(work)


def napping(weave: WeaveDriver, count: int) -> list[str]:
    """``count`` instances whose sleep is over."""
    ids = [weave.start_workflow("nap") for _ in range(count)]
    weave.advance(6)
    return ids


@pytest.mark.mariadb_only
def test_a_timer_set_costs_the_same_statements_for_1_8_and_64_instances(
    weave: WeaveDriver,
) -> None:
    weave.publish("nap", nap_then_work())
    counts = {}
    for size in SIZES:
        ids = napping(weave, size)
        with sent_statements(weave.base_engine) as sent:
            outcome = fire_set(weave, ids)
        assert (len(outcome.reports), outcome.alone) == (size, [])
        assert all(weave.step_states(wf) == {"nap": "SUCCEEDED", "work": "ACTIVE"} for wf in ids)
        counts[size] = len(sent)
    assert counts == dict.fromkeys(SIZES, SET_STATEMENTS), counts


def test_each_instance_in_a_timer_set_fires_as_alone_with_its_task_and_history_inv9(
    weave: WeaveDriver,
) -> None:
    """The sleep's wait ends SATISFIED, the step succeeds and the next step's task is created
    in the same set; the instance's next wake-up is its next timer; a second set finds
    nothing due."""
    weave.publish("nap", nap_then_work())
    ids = napping(weave, 3)
    outcome = fire_set(weave, ids)
    assert outcome.alone == [] and len(outcome.reports) == 3
    for wf in ids:
        task = weave.task_of(wf, "work")
        (activation,) = weave.activations(wf, "work")
        assert (activation.task_id, task.workflow_activation_id) == (task.id, activation.id)
        assert weave.history(wf)[-3:] == [
            "step.succeeded:nap",
            "step.activated:work",
            "task.created:work",
        ]
        assert _wait_states(weave, wf) == ["SATISFIED"]
        assert weave.instance(wf).wake_at is None, "no timer left"
    again = fire_set(weave, ids)
    assert (again.reports, again.alone) == ([], [])


def test_a_set_fires_the_due_sleep_and_keeps_the_later_one_as_the_next_wake_up(
    weave: WeaveDriver,
) -> None:
    spec = {
        "steps": [
            {"name": "short", "sleep": {"seconds": 5}},
            {"name": "long", "sleep": {"seconds": 100}},
        ]
    }
    weave.publish("two-naps", spec)
    wf = weave.start_workflow("two-naps")
    later = weave.instance(wf).wake_at
    weave.advance(6)
    outcome = fire_set(weave, [wf])
    assert outcome.alone == [] and len(outcome.reports) == 1
    assert weave.step_states(wf) == {"short": "SUCCEEDED", "long": "ACTIVE"}
    wake_at = weave.instance(wf).wake_at
    assert wake_at is not None and wake_at > later, "the long sleep's deadline"
    weave.advance(100)
    assert len(fire_set(weave, [wf]).reports) == 1
    assert weave.instance(wf).state == "SUCCEEDED"


@pytest.mark.parametrize(
    ("on_timeout", "states", "instance"),
    [
        ("continue", {"ship": "ACTIVE", "escalate": "ACTIVE"}, "RUNNING"),
        ("goto escalate", {"ship": "SKIPPED", "escalate": "ACTIVE"}, "RUNNING"),
        ("fail", {"ship": "CANCELLED", "escalate": "CANCELLED"}, "FAILED"),
    ],
)
def test_a_signal_wait_that_times_out_in_a_set_follows_its_on_timeout(
    weave: WeaveDriver, on_timeout: str, states: dict[str, str], instance: str
) -> None:
    weave.publish("timed", timed_wait(on_timeout))
    ids = [weave.start_workflow("timed") for _ in range(3)]
    weave.advance(61)
    outcome = fire_set(weave, ids)
    assert outcome.alone == [] and len(outcome.reports) == 3
    for wf in ids:
        assert weave.step_states(wf) == {"approval": "TIMED_OUT", **states}
        assert weave.instance(wf).state == instance
        assert _wait_states(weave, wf) == ["TIMED_OUT"]


def test_a_paused_instance_is_not_fired_by_a_set_inv12(weave: WeaveDriver) -> None:
    """Paused after the pass listed it: the set sees it paused under its lock and leaves its
    timer; resumed, the next pass fires it."""
    weave.publish("nap", nap_then_work())
    running, paused = napping(weave, 2)
    weave.control("pause", paused)
    outcome = fire_set(weave, [running, paused])
    assert (len(outcome.reports), outcome.alone) == (1, [])
    assert weave.step_states(running) == {"nap": "SUCCEEDED", "work": "ACTIVE"}
    assert weave.step_states(paused) == {"nap": "ACTIVE", "work": "PENDING"}
    assert _wait_states(weave, paused) == ["WAITING"]
    weave.control("resume", paused)
    weave.wake()
    assert weave.step_states(paused) == {"nap": "SUCCEEDED", "work": "ACTIVE"}


def test_a_poisoned_instance_is_taken_alone_and_the_others_fire(weave: WeaveDriver) -> None:
    """An instance whose firing raises (its sleep step's row says it already ended): the set
    leaves it alone, nothing of it written; the single path backs it off with the error; the
    others of the set fire; once repaired it fires on its retry."""
    weave.publish("nap", nap_then_work())
    *good, bad = napping(weave, 4)
    _set_step_state(weave, bad, "nap", "SUCCEEDED")
    outcome = fire_set(weave, [*good, bad])
    assert outcome.alone == [bad] and len(outcome.reports) == 3
    assert all(weave.step_states(wf) == {"nap": "SUCCEEDED", "work": "ACTIVE"} for wf in good)
    assert _wait_states(weave, bad) == ["WAITING"], "nothing of it written by the set"
    report = weave.wake()
    assert report.errors == 1
    row = weave.instance(bad)
    assert row.timer_failures == 1 and "ValueError" in row.timer_error
    _set_step_state(weave, bad, "nap", "ACTIVE")
    weave.advance(2)  # past its retry time
    assert weave.wake().errors == 0
    assert weave.step_states(bad) == {"nap": "SUCCEEDED", "work": "ACTIVE"}
    assert weave.instance(bad).timer_error is None


def nap_then_open(second: dict[str, object]) -> dict[str, object]:
    """A sleep whose next step is ``second`` (a sleep or a signal wait named ``second``)."""
    return {
        "steps": [
            {"name": "first", "sleep": {"seconds": 5}},
            {"name": "second", **second, "dependsOn": ["first"]},
        ]
    }


SECOND_SLEEP = {"sleep": {"seconds": 5}}
SECOND_WAIT = {"wait": {"signal": "go", "timeoutSeconds": 60, "onTimeout": "fail"}}


@pytest.mark.mariadb_only
def test_a_timer_set_opening_sleeps_costs_the_same_statements_for_1_8_and_64_instances(
    weave: WeaveDriver,
) -> None:
    """The new sleeps' activations and wait rows are inserted for the set at once."""
    weave.publish("naps", nap_then_open(SECOND_SLEEP))
    counts = {}
    for size in SIZES:
        ids = [weave.start_workflow("naps") for _ in range(size)]
        weave.advance(6)
        with sent_statements(weave.base_engine) as sent:
            outcome = fire_set(weave, ids)
        assert (len(outcome.reports), outcome.alone) == (size, [])
        assert all(
            weave.step_states(wf) == {"first": "SUCCEEDED", "second": "ACTIVE"} for wf in ids
        )
        counts[size] = len(sent)
    assert counts == dict.fromkeys(SIZES, OPENING_STATEMENTS), counts


@pytest.mark.parametrize("second", [SECOND_SLEEP, SECOND_WAIT], ids=["sleep", "signal_wait"])
def test_a_wait_opened_in_a_timer_set_ends_as_on_the_single_path_inv9(
    weave: WeaveDriver, second: dict[str, object]
) -> None:
    """Its activation and wait row, its history and its next wake-up (the new deadline) are
    what waking it alone gives; and the new wait then serves as one opened alone."""
    weave.publish("naps", nap_then_open(second))
    in_set, alone = weave.start_workflow("naps"), weave.start_workflow("naps")
    weave.advance(6)
    assert fire_set(weave, [in_set]).alone == []
    weave.tx(functools.partial(timers.wake_instance, namespace=weave.namespace, instance_id=alone))
    held = end_state(weave, in_set)
    assert held == end_state(weave, alone)
    assert held["wake_at_is_earliest_wait"] and held["waits"][-1][3:] == (
        "WAITING",
        5.0 if second is SECOND_SLEEP else 60.0,
        True,
    )
    if second is SECOND_WAIT:
        weave.signal(in_set, "go")
        weave.signal(alone, "go")
        weave.consume()
    else:
        weave.advance(6)
        assert len(weave.wake().reports) == 2
    assert end_state(weave, in_set) == end_state(weave, alone)
    assert weave.instance(in_set).state == "SUCCEEDED"


def _pass_at(url: str, namespace: str, skew: float, at: float) -> None:
    engine = create_store_engine(url).execution_options(**{CLOCK_SKEW_OPTION: skew})
    time.sleep(max(at - time.time(), 0))
    service.timer_pass(engine, namespace=namespace, limit=500, workers=2)
    engine.dispose()


def _passes_at_once(weave: WeaveDriver, mariadb_url: str, processes: int = 4) -> None:
    """``processes`` spawned processes run one timer pass each, all at the same instant."""
    ctx = multiprocessing.get_context("spawn")
    at = time.time() + 3
    running = [
        ctx.Process(target=_pass_at, args=(mariadb_url, weave.namespace, weave.skew, at))
        for _ in range(processes)
    ]
    for p in running:
        p.start()
    for p in running:
        p.join(120)
        assert p.exitcode == 0


@pytest.mark.mariadb_only
def test_a_sleep_fires_once_when_passes_run_at_the_same_time(
    weave: WeaveDriver, mariadb_url: str
) -> None:
    """Four processes run a timer pass over the same due sleeps at the same instant: each
    sleep ends once, its step succeeds once and the next step has one activation and one
    task."""
    weave.publish("nap", nap_then_work())
    ids = napping(weave, 40)
    _passes_at_once(weave, mariadb_url)
    for wf in ids:
        assert weave.step_states(wf) == {"nap": "SUCCEEDED", "work": "ACTIVE"}
        assert weave.history(wf).count("step.succeeded:nap") == 1
        assert len(weave.activations(wf, "work")) == 1
        assert [t.handler for t in weave.tasks_of(wf)] == ["test.work"]
        assert _wait_states(weave, wf) == ["SATISFIED"]


@pytest.mark.mariadb_only
def test_a_sleep_opens_once_when_passes_run_at_the_same_time(
    weave: WeaveDriver, mariadb_url: str
) -> None:
    """Four processes run a timer pass over the same instances whose next step is a sleep:
    each first sleep ends once and the second opens once — one activation, one wait — and
    the instance's next wake-up is that wait's deadline."""
    weave.publish("naps", nap_then_open(SECOND_SLEEP))
    ids = [weave.start_workflow("naps") for _ in range(40)]
    weave.advance(6)
    _passes_at_once(weave, mariadb_url)
    for wf in ids:
        state = end_state(weave, wf)
        assert state["steps"] == {"first": "SUCCEEDED", "second": "ACTIVE"}
        assert state["history"].count("step.activated:second") == 1
        assert [w[:4] for w in state["waits"]] == [
            ("first", "sleep", None, "SATISFIED"),
            ("second", "sleep", None, "WAITING"),
        ]
        assert state["wake_at_is_earliest_wait"]


def _wait_states(weave: WeaveDriver, wf: str) -> list[str]:
    query = sa.select(workflow_waits.c.state).where(workflow_waits.c.instance_id == wf)
    return list(weave.tx(lambda conn: conn.execute(query).scalars().all()))


def _set_step_state(weave: WeaveDriver, wf: str, step: str, state: str) -> None:
    weave.tx(
        lambda conn: conn.execute(
            workflow_steps.update()
            .where(workflow_steps.c.instance_id == wf, workflow_steps.c.name == step)
            .values(state=state)
        )
    )
