"""The set-based paths a drain and a bulk submission go through cost a constant number of
statements per batch, not per item: measured for batches of 1, 8 and 64 of a bulk submission
(``bulk.submit_tasks``), a lease with start (``claim_tasks``) and a batch of reports
(``batches.complete_attempts``). Each item is still judged on its own (invariants 1, 3, 4, 6:
the other tests of these paths); these tests hold the cost. The figures are the ones
docs/performance.md quotes; a change that adds a statement per item fails here."""

from __future__ import annotations

import functools

import pytest
import sqlalchemy as sa

from orbit_store.db import run_transaction
from orbit_store.pulse import batches, cycle
from orbit_store.pulse.model import CompletionStatus, LeaseGrant, Outcome
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.pulse.submit.bulk import submit_tasks

from ...drivers.pulse_driver import PulseDriver
from ...drivers.sent_statements import sent_statements

pytestmark = pytest.mark.mariadb_only

SIZES = (1, 8, 64)
HANDLER = "test.noop"

#: Statements per batch, whatever its size from 8 items on (a batch of one may take a shorter
#: single-item path): what the drain and the bulk submission cost the database.
SUBMIT_STATEMENTS = 7
CLAIM_STATEMENTS = 7
COMPLETE_STATEMENTS = 8
#: A worker's cycle in one transaction (``cycle``): the session, the reports, the claim; the
#: task_events of both parts in one INSERT.
CYCLE_STATEMENTS = 14


def _submitted(pulse: PulseDriver, size: int) -> int:
    requests = [
        SubmitRequest(namespace=pulse.namespace, queue="default", handler=HANDLER, params={"n": n})
        for n in range(size)
    ]
    work = functools.partial(submit_tasks, namespace=pulse.namespace, requests=requests)
    with sent_statements(pulse.base_engine) as sent:
        results = run_transaction(pulse.engine, work)
    assert all(r.result is not None for r in results)
    return len(sent)


def _claimed(pulse: PulseDriver, size: int) -> tuple[int, list[LeaseGrant]]:
    pulse.submit_many(size, handler=HANDLER)
    pulse.session(handlers=[HANDLER])
    with sent_statements(pulse.base_engine) as sent:
        grants = pulse.claim(limit=size, start_handlers=(HANDLER,))
    assert len(grants) == size and all(g.started for g in grants)
    return len(sent), grants


def _completed(pulse: PulseDriver, grants: list[LeaseGrant]) -> int:
    items = [batches.CompletionItem(g.attempt_id, g.token, Outcome.SUCCEEDED) for g in grants]
    with sent_statements(pulse.base_engine) as sent:
        results = batches.run_batch(
            pulse.engine, batches.complete_attempts, namespace=pulse.namespace, items=items
        )
    assert {r.status for r in results.values()} == {CompletionStatus.APPLIED}  # type: ignore[union-attr]
    return len(sent)


def test_statements_per_bulk_submission_do_not_grow_with_its_size_inv1(
    mariadb_engine: sa.Engine,
) -> None:
    counts = {size: _submitted(PulseDriver(mariadb_engine), size) for size in SIZES}
    print(f"statements per bulk submission: {counts}")
    assert counts[64] == counts[8] == SUBMIT_STATEMENTS and counts[1] <= SUBMIT_STATEMENTS


def test_statements_per_lease_with_start_and_per_report_batch_do_not_grow_inv2_inv4(
    mariadb_engine: sa.Engine,
) -> None:
    claims, completes = {}, {}
    for size in SIZES:
        pulse = PulseDriver(mariadb_engine)
        claims[size], grants = _claimed(pulse, size)
        completes[size] = _completed(pulse, grants)
    print(f"statements per lease with start: {claims}; per report batch: {completes}")
    assert claims[64] == claims[8] == CLAIM_STATEMENTS and claims[1] <= CLAIM_STATEMENTS
    assert (
        completes[64] == completes[8] == COMPLETE_STATEMENTS and completes[1] <= COMPLETE_STATEMENTS
    )


def _cycled(pulse: PulseDriver, size: int) -> int:
    """A cycle reporting ``size`` attempts and claiming ``size`` tasks."""
    pulse.submit_many(2 * size, handler=HANDLER)
    session = pulse.session(handlers=[HANDLER])
    grants = pulse.claim(limit=size, start_handlers=(HANDLER,))
    items = [batches.CompletionItem(g.attempt_id, g.token, Outcome.SUCCEEDED) for g in grants]
    with sent_statements(pulse.base_engine) as sent:
        answers, granted = cycle.report_then_claim(
            pulse.engine,
            namespace=pulse.namespace,
            session_id=session.id,
            items=items,
            limit=size,
            start_handlers=(HANDLER,),
        )
    assert {r.status for r in answers.values()} == {CompletionStatus.APPLIED}  # type: ignore[union-attr]
    assert len(granted) == size
    return len(sent)


def test_statements_per_worker_cycle_do_not_grow_inv2_inv4(mariadb_engine: sa.Engine) -> None:
    counts = {size: _cycled(PulseDriver(mariadb_engine), size) for size in SIZES}
    print(f"statements per worker cycle (reports and claim): {counts}")
    assert counts[64] == counts[8] == CYCLE_STATEMENTS and counts[1] <= CYCLE_STATEMENTS
