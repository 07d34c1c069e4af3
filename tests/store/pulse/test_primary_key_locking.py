"""Statements that change or lock task and attempt rows by id go through the primary key (the
lock order's second rule, ``orbit_store/pulse/__init__.py``).

Found by the lock-order race (``test_lock_order.py``) in CI: a single start's ``UPDATE
task_attempts … WHERE id = ? AND state = 'LEASED' AND lease_expires_at > ?`` was planned by
MariaDB as a range scan of ``ix_task_attempts_lease_reaper`` (state, lease_expires_at). The scan
locked the index entry after its range — another attempt's, which a batched completion was
finishing at that moment — and then waited for that attempt's row, which the completion held,
while the completion waited for the entry: a deadlock. Which index the optimizer picks depends
on its statistics of the moment, so this test checks the statements themselves: every UPDATE,
DELETE or waiting locking read of ``tasks`` or ``task_attempts`` that names its rows by id
carries ``FORCE INDEX (PRIMARY)``. A SKIP LOCKED read never waits, so it cannot close a cycle.
"""

from __future__ import annotations

import functools
import re

import pytest

from orbit_store.pulse import batches
from orbit_store.pulse.leases.unreceived import hand_back_unreceived
from orbit_store.pulse.model import Outcome, Safety

from ..drivers.pulse_driver import PulseDriver
from ..drivers.sent_statements import sent_statements

pytestmark = pytest.mark.mariadb_only

_TABLE = r"(?P<table>tasks|task_attempts)"
_CHANGES = re.compile(rf"^\s*(UPDATE|DELETE FROM) {_TABLE}\b(?P<rest>.*)$", re.S | re.I)
_LOCKING_READ = re.compile(r"\b(FOR UPDATE|FOR SHARE|LOCK IN SHARE MODE)\b", re.I)
_FROM = re.compile(rf"\bFROM {_TABLE}\b(?P<rest>.*)$", re.S | re.I)


def _by_id_without_primary(statement: str) -> bool:
    """Whether ``statement`` changes or waits to lock tasks/attempts named by id, and leaves the
    index to the optimizer."""
    found = _CHANGES.match(statement)
    if found is None and _LOCKING_READ.search(statement) and "SKIP LOCKED" not in statement:
        found = _FROM.search(statement)
    if found is None:
        return False
    table, rest = found["table"], found["rest"]
    names_ids = re.search(rf"\b{table}\.id (=|IN\b)", rest, re.I)
    return bool(names_ids) and not rest.lstrip().upper().startswith("FORCE INDEX (PRIMARY)")


def _whole_lifecycle(pulse: PulseDriver) -> None:
    """Every path that moves a task or an attempt: starts and completions one by one and in
    batches, retries and their promotion, heartbeats, leases with start and hand-backs, the
    reaper and a late report, a review, cancels of waiting and running tasks, a revoked session, a
    manual retry, concurrency keys and gates."""
    pulse.queue("default", lease_seconds=30)
    pulse.submit(safety=Safety.UNSAFE)
    unsure = pulse.claim_one()
    pulse.start(unsure)
    pulse.complete(unsure, Outcome.UNKNOWN)
    pulse.review(unsure.task_id)
    gate = pulse.gate("g")
    for n in range(8):
        pulse.submit(concurrency_key="k", concurrency_limit=1 if n % 2 else None)
        pulse.submit(gate_id=gate, backoff_initial_ms=1)
    session = pulse.session()
    one, two, three = pulse.claim(limit=3)
    pulse.start(one)
    pulse.heartbeat(one)
    pulse.succeed(one)
    pulse.start(two)
    pulse.fail(two, retryable=True)
    pulse.start(three)
    pulse.fail(three, retryable=False)
    pulse.advance(5)
    pulse.promote()
    grants = pulse.claim(limit=4)
    batch = [batches.StartItem(g.attempt_id, g.token) for g in grants]
    pulse.tx(lambda c: batches.start_attempts(c, namespace=pulse.namespace, items=batch))
    reports = [
        batches.CompletionItem(g.attempt_id, g.token, outcome, {"r": 1}, None, True)
        for g, outcome in zip(grants, [Outcome.SUCCEEDED, Outcome.FAILED] * 2, strict=True)
    ]
    pulse.tx(lambda c: batches.complete_attempts(c, namespace=pulse.namespace, items=reports))
    started = pulse.claim(limit=2, start_handlers=("test.noop",))
    for grant in started:
        pulse.tx(
            functools.partial(
                hand_back_unreceived,
                namespace=pulse.namespace,
                attempt_id=grant.attempt_id,
                token=grant.token,
            )
        )
    late = pulse.claim_one()
    pulse.start(late)
    pulse.set_gate(gate, allowed=False)
    pulse.set_gate(gate, allowed=True)
    pulse.advance(60)
    pulse.reap()
    pulse.succeed(late)  # a late report of a lapsed attempt: kept, never applied
    running = pulse.claim_one()
    pulse.start(running)
    pulse.cancel(running.task_id)
    pulse.cancel(pulse.submit().task_id)
    pulse.retry(three.task_id)
    pulse.claim(limit=2)
    pulse.revoke(session.id)


def test_task_and_attempt_rows_named_by_id_are_changed_and_locked_through_the_primary_key(
    pulse: PulseDriver,
) -> None:
    with sent_statements(pulse.base_engine) as sent:
        _whole_lifecycle(pulse)
    offending = sorted({" ".join(s.split())[:220] for s in sent if _by_id_without_primary(s)})
    assert len(sent) > 100, "the lifecycle ran"
    assert not offending, "\n".join(offending)


@pytest.mark.parametrize(
    ("statement", "flagged"),
    [
        ("UPDATE task_attempts SET state=%s WHERE task_attempts.id = %s", True),
        (
            "UPDATE task_attempts FORCE INDEX (PRIMARY) SET state=%s WHERE task_attempts.id = %s",
            False,
        ),
        ("UPDATE tasks SET x=%s WHERE tasks.id IN (%s, %s)", True),
        ("SELECT tasks.id FROM tasks WHERE tasks.id = %s FOR UPDATE", True),
        ("SELECT tasks.id FROM tasks FORCE INDEX (PRIMARY) WHERE tasks.id = %s FOR UPDATE", False),
        ("SELECT tasks.id FROM tasks WHERE tasks.id IN (%s) FOR UPDATE SKIP LOCKED", False),
        ("SELECT tasks.id FROM tasks WHERE tasks.id = %s", False),  # a plain read locks nothing
        ("UPDATE task_attempts SET x=%s WHERE task_attempts.task_id = %s", False),
        ("DELETE FROM tasks WHERE tasks.id = %s", True),
    ],
)
def test_the_check_tells_a_statement_by_id_that_leaves_the_index_to_the_optimizer(
    statement: str, flagged: bool
) -> None:
    assert _by_id_without_primary(statement) is flagged
