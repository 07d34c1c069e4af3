"""A busy worker's cycle — its reports, then its claim — in one transaction
(``pulse.cycle.report_then_claim``, worker protocol 4), and in two whenever one part answers on
its own: each report is still judged with its own token and fencing (invariants 3, 4), each grant
is still one grant per state_version (invariant 2), and the slots the reports free are the ones
the claim fills, also under a concurrency key."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from orbit_store.errors import Conflict
from orbit_store.pulse import batches, cycle
from orbit_store.pulse.model import (
    CompletionResult,
    CompletionStatus,
    LeaseGrant,
    Outcome,
    TaskState,
)

from ...drivers.pulse_driver import PulseDriver
from ...drivers.sent_statements import sent_statements

pytestmark = pytest.mark.mariadb_only

HANDLER = "test.noop"


@contextmanager
def commits(engine: sa.Engine) -> Iterator[list[int]]:
    """Every COMMIT the engine's connections send meanwhile."""
    seen: list[int] = []

    def record(conn: sa.Connection) -> None:
        seen.append(1)

    sa.event.listen(engine, "commit", record)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "commit", record)


def _cycle(
    pulse: PulseDriver, reports: list[batches.CompletionItem], limit: int = 8
) -> tuple[dict[str, CompletionResult | batches.ItemRefused], list[LeaseGrant]]:
    session = pulse.session(handlers=[HANDLER]) if pulse._session is None else pulse._session
    return cycle.report_then_claim(
        pulse.engine,
        namespace=pulse.namespace,
        session_id=session.id,
        items=reports,
        limit=limit,
        start_handlers=(HANDLER,),
    )


def _succeeded(grants: list[LeaseGrant]) -> list[batches.CompletionItem]:
    return [batches.CompletionItem(g.attempt_id, g.token, Outcome.SUCCEEDED) for g in grants]


def test_a_cycle_reports_and_claims_in_one_commit_inv2_inv4(mariadb_engine: sa.Engine) -> None:
    pulse = PulseDriver(mariadb_engine)
    task_ids = pulse.submit_many(16, handler=HANDLER)
    _, first = _cycle(pulse, [])
    with commits(mariadb_engine) as committed, sent_statements(mariadb_engine) as sent:
        answers, grants = _cycle(pulse, _succeeded(first))
    print(f"a cycle of 8 reports and 8 grants: {len(sent)} statements")
    assert len(committed) == 1
    assert {a.status for a in answers.values()} == {CompletionStatus.APPLIED}  # type: ignore[union-attr]
    assert len(grants) == 8 and all(g.started for g in grants)
    assert {g.task_id for g in grants}.isdisjoint(g.task_id for g in first)
    assert {pulse.state(g.task_id) for g in first} == {TaskState.SUCCEEDED.value}
    assert len({g.task_id for g in first + grants}) == len(task_ids)


def test_a_report_refused_alone_answers_and_the_claim_still_grants_inv3(
    mariadb_engine: sa.Engine,
) -> None:
    pulse = PulseDriver(mariadb_engine)
    pulse.submit_many(2, handler=HANDLER)
    _, (grant,) = _cycle(pulse, [], limit=1)
    wrong = batches.CompletionItem(grant.attempt_id, "not-the-token", Outcome.SUCCEEDED)
    answers, grants = _cycle(pulse, [wrong], limit=1)
    refused = answers[grant.attempt_id]
    assert isinstance(refused, CompletionResult) and refused.status is CompletionStatus.REFUSED
    assert pulse.state(grant.task_id) == TaskState.RUNNING.value
    assert len(grants) == 1 and grants[0].task_id != grant.task_id


def test_a_report_that_frees_a_key_permit_lets_the_claim_grant_its_waiter(
    mariadb_engine: sa.Engine,
) -> None:
    """The report gives the key's only permit back (key rows: its own commit), and the claim
    of the same cycle grants the task that waited for it."""
    pulse = PulseDriver(mariadb_engine)
    keyed = {"concurrency_key": "k", "concurrency_limit": 1}
    first_id, second_id = (pulse.submit(HANDLER, **keyed).task_id for _ in range(2))
    _, (grant,) = _cycle(pulse, [])
    assert grant.task_id == first_id
    with commits(mariadb_engine) as committed:
        answers, grants = _cycle(pulse, _succeeded([grant]))
    assert answers[grant.attempt_id].status is CompletionStatus.APPLIED  # type: ignore[union-attr]
    assert [g.task_id for g in grants] == [second_id]
    assert len(committed) == 2


def test_reports_of_a_draining_session_apply_though_its_claim_is_refused_inv4(
    mariadb_engine: sa.Engine,
) -> None:
    """A draining session's claim is refused; its running attempts' reports still apply."""
    pulse = PulseDriver(mariadb_engine)
    pulse.submit_many(3, handler=HANDLER)
    _, grants = _cycle(pulse, [], limit=2)
    assert pulse._session is not None
    pulse.drain(pulse._session.id)
    with pytest.raises(Conflict):
        _cycle(pulse, _succeeded(grants))
    assert {pulse.state(g.task_id) for g in grants} == {TaskState.SUCCEEDED.value}
