"""The set path of batched starts and completions: statements per batch that do not
grow with its size, each item still judged on its own (invariant 3) inside a batch of valid
ones, and the fallback to item by item when a grouped update's count does not match."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa

from orbit_store.pulse import batches
from orbit_store.pulse.model import (
    CompletionResult,
    CompletionStatus,
    LeaseGrant,
    Outcome,
    StartRefusal,
    StartResult,
)
from orbit_store.schema import tasks

from ...drivers.delivery_driver import DeliveryDriver
from ...drivers.pulse_driver import PulseDriver
from ...drivers.sent_statements import sent_statements


def _start_many(pulse: PulseDriver, grants: list[LeaseGrant]) -> dict[str, Any]:
    items = [batches.StartItem(g.attempt_id, g.token) for g in grants]
    return batches.run_batch(
        pulse.engine, batches.start_attempts, namespace=pulse.namespace, items=items
    )


def _succeed_many(pulse: PulseDriver, grants: list[LeaseGrant]) -> dict[str, Any]:
    items = [
        batches.CompletionItem(g.attempt_id, g.token, Outcome.SUCCEEDED, {"n": n})
        for n, g in enumerate(grants)
    ]
    return batches.run_batch(
        pulse.engine, batches.complete_attempts, namespace=pulse.namespace, items=items
    )


def _running(pulse: PulseDriver, count: int) -> list[LeaseGrant]:
    for _ in range(count):
        pulse.submit(concurrency_key=None)
    grants = pulse.claim(limit=count)
    _start_many(pulse, grants)
    return grants


@contextmanager
def _first_match_misses(engine: sa.Engine, prefix: str) -> Iterator[list[str]]:
    """Make the first set-path statement starting with ``prefix`` (a grouped UPDATE: it names
    its rows with ``IN``) match no row, as if they had moved since they were read."""
    hit: list[str] = []

    def rewrite(
        conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool
    ) -> tuple[str, Any]:
        if not hit and statement.startswith(prefix) and " IN (" in statement:
            hit.append(statement)
            return statement + " AND 1 = 0", params
        return statement, params

    sa.event.listen(engine, "before_cursor_execute", rewrite, retval=True)
    try:
        yield hit
    finally:
        sa.event.remove(engine, "before_cursor_execute", rewrite)


def _per_batch(pulse: PulseDriver, size: int, work: Callable[[list[LeaseGrant]], Any]) -> int:
    for _ in range(size):
        pulse.submit()
    grants = pulse.claim(limit=size)
    with sent_statements(pulse.base_engine) as sent:
        work(grants)
    return len(sent)


def test_statements_per_start_batch_do_not_grow_with_its_size(pulse: PulseDriver) -> None:
    start = functools.partial(_start_many, pulse)
    small, large = _per_batch(pulse, 2, start), _per_batch(pulse, 40, start)
    print(f"statements per start batch: {small} (2 items), {large} (40 items)")
    assert small == large <= 12, (small, large)


def test_statements_per_completion_batch_do_not_grow_with_its_size(pulse: PulseDriver) -> None:
    DeliveryDriver(pulse).subscribe("results")

    def start_then_count(size: int) -> int:
        grants = _running(pulse, size)
        with sent_statements(pulse.base_engine) as sent:
            results = _succeed_many(pulse, grants)
        assert {r.status for r in results.values()} == {CompletionStatus.APPLIED}
        return len(sent)

    small, large = start_then_count(2), start_then_count(40)
    print(f"statements per completion batch: {small} (2 items), {large} (40 items)")
    assert small == large <= 16, (small, large)


def test_refusals_inside_a_batch_of_valid_starts_each_answer_alone_inv3_inv12(
    pulse: PulseDriver,
) -> None:
    gate = pulse.gate()
    plain = [pulse.submit().task_id for _ in range(3)]
    gated = pulse.submit(gate_id=gate).task_id
    cancelled = pulse.submit().task_id
    grants = {g.task_id: g for g in pulse.claim(limit=10)}
    pulse.set_gate(gate, allowed=False)
    pulse.tx(lambda c: _request_cancel(c, cancelled))
    wrong = grants[plain[2]]
    items = [batches.StartItem(g.attempt_id, g.token) for g in grants.values() if g is not wrong]
    items.append(batches.StartItem(wrong.attempt_id, "not-the-token"))
    results = pulse.tx(
        functools.partial(batches.start_attempts, namespace=pulse.namespace, items=items)
    )
    answer = {task_id: results[g.attempt_id] for task_id, g in grants.items()}
    assert answer[gated] == StartResult(False, StartRefusal.GATE_CLOSED)
    assert answer[cancelled] == StartResult(False, StartRefusal.CANCEL_REQUESTED)
    assert answer[plain[2]] == StartResult(False, StartRefusal.INVALID_TOKEN)
    for task_id in plain[:2]:
        assert answer[task_id].started and pulse.state(task_id) == "RUNNING"
    assert (pulse.state(gated), pulse.state(cancelled)) == ("WAITING", "CANCELLED")


def _request_cancel(conn: sa.Connection, task_id: str) -> None:
    """A cancel request on a LEASED task. Today only a RUNNING task is given one, so it is
    written directly (as in test_cancel.py): a row from another code version meets the guard."""
    conn.execute(tasks.update().where(tasks.c.id == task_id).values(cancel_requested=True))


def test_a_stale_generation_in_a_batch_of_valid_completions_changes_nothing_but_evidence_inv3(
    pulse: PulseDriver,
) -> None:
    pulse.submit()
    stale = pulse.claim_one()
    pulse.advance(31)
    pulse.reap()
    current = [pulse.claim_one(), *_running(pulse, 3)]
    _start_many(pulse, current[:1])
    results = _succeed_many(pulse, [stale, *current])
    late = results[stale.attempt_id]
    assert isinstance(late, CompletionResult) and late.status is CompletionStatus.SUPERSEDED
    assert all(results[g.attempt_id].status is CompletionStatus.APPLIED for g in current)
    assert pulse.attempts(stale.task_id)[0].late_outcome == "SUCCEEDED"
    assert pulse.task(stale.task_id).result == {"n": 1}, "the current attempt's own result"
    assert [e.to_state for e in pulse.events(stale.task_id)].count("SUCCEEDED") == 1


def test_a_start_count_that_does_not_match_rolls_back_and_goes_item_by_item(
    pulse: PulseDriver,
) -> None:
    for _ in range(3):
        pulse.submit()
    grants = pulse.claim(limit=3)
    before = batches.SET_PATH_FALLBACKS.snapshot().get("start", 0)
    with _first_match_misses(pulse.base_engine, "UPDATE task_attempts") as hit:
        results = _start_many(pulse, grants)
    assert hit, "the set path ran its grouped update"
    assert batches.SET_PATH_FALLBACKS.snapshot()["start"] == before + 1
    for grant in grants:
        assert results[grant.attempt_id].started and not results[grant.attempt_id].already_started
        assert [e.to_state for e in pulse.events(grant.task_id)] == ["WAITING", "LEASED", "RUNNING"]


def test_a_completion_count_that_does_not_match_rolls_back_and_goes_item_by_item(
    pulse: PulseDriver,
) -> None:
    DeliveryDriver(pulse).subscribe("results")
    grants = _running(pulse, 3)
    before = batches.SET_PATH_FALLBACKS.snapshot().get("complete", 0)
    with _first_match_misses(pulse.base_engine, "UPDATE tasks") as hit:
        results = _succeed_many(pulse, grants)
    assert hit, "the set path ran its grouped update"
    assert batches.SET_PATH_FALLBACKS.snapshot()["complete"] == before + 1
    for n, grant in enumerate(grants):
        assert results[grant.attempt_id] == CompletionResult(
            CompletionStatus.APPLIED, "SUCCEEDED", "succeeded", queue="default"
        )
        assert pulse.task(grant.task_id).result == {"n": n}
        assert [r.kind for r in pulse.result_events(grant.task_id)] == ["task.succeeded"]
        attempt = pulse.attempts(grant.task_id)[0]
        assert (attempt.outcome, attempt.result) == ("SUCCEEDED", {"n": n})


@contextmanager
def _connection_killed_at_first(engine: sa.Engine, prefix: str) -> Iterator[list[str]]:
    """Kill the session (``KILL``, from another connection) the first time a grouped statement
    starting with ``prefix`` is about to be sent: the batch loses its connection mid-way."""
    hit: list[str] = []

    def kill(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not hit and statement.startswith(prefix) and " IN (" in statement:
            hit.append(statement)
            victim = conn.connection.dbapi_connection.thread_id()
            with engine.connect() as admin:
                admin.exec_driver_sql(f"KILL {int(victim)}")

    sa.event.listen(engine, "before_cursor_execute", kill)
    try:
        yield hit
    finally:
        sa.event.remove(engine, "before_cursor_execute", kill)


@pytest.mark.mariadb_only
def test_a_batch_that_loses_its_connection_before_commit_is_run_again_not_an_error(
    pulse: PulseDriver,
) -> None:
    """Nothing of a transaction whose connection died before COMMIT was committed, so
    ``run_transaction`` runs it again (a database restart, a proxy cutting connections). The
    batch must let that connection-lost error through as it is: the worker's report is then
    applied, not answered with a 500 that leaves its lease to lapse and the task to run again."""
    grants = _running(pulse, 3)
    with _connection_killed_at_first(pulse.base_engine, "UPDATE tasks") as hit:
        answers = _succeed_many(pulse, grants)
    assert hit, "the kill never happened: the set path sent no grouped task UPDATE"
    assert {a.status for a in answers.values()} == {CompletionStatus.APPLIED}
    assert {pulse.state(g.task_id) for g in grants} == {"SUCCEEDED"}
