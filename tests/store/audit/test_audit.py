"""Invariant 8 / seed §2: every admin action appends its audit row in the same transaction as the
change — rolled back together, committed together — and history is corrected only by new linked
rows. Each test runs the action once in a transaction that is rolled back (neither the change nor
its audit row survives, though the row was there inside it) and once for real (both are there)."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from orbit_store.access.credentials import create_token, list_credentials, revoke_credential
from orbit_store.audit import AuditQuery, correct_audit, list_audit
from orbit_store.delivery.model import Mode, SubscriptionSpec
from orbit_store.delivery.pull import pull_events
from orbit_store.delivery.redrive import redrive_parked
from orbit_store.delivery.subscriptions import (
    delete_subscription,
    get_subscription,
    put_subscription,
)
from orbit_store.errors import InvalidRequest, NotFound
from orbit_store.pulse.manual.cancel import cancel_task
from orbit_store.pulse.manual.review import ReviewDecision, retry_task, review_task
from orbit_store.schema import audit_log

from ..drivers.delivery_driver import DeliveryDriver
from ..drivers.pulse_driver import PulseDriver
from ..pulse.manual.test_review import _needs_review

Work = Callable[[sa.Connection], Any]


def _audit_actions(conn: sa.Connection, namespace: str) -> list[str]:
    rows = conn.execute(
        sa.select(audit_log.c.action)
        .where(audit_log.c.namespace == namespace)
        .order_by(audit_log.c.at, audit_log.c.id)
    )
    return list(rows.scalars())


def assert_audited_with_the_change(
    pulse: PulseDriver, action: str | list[str], work: Work, changed: Callable[[], bool]
) -> None:
    """``work`` must write its ``action`` audit row(s) in the transaction that makes
    ``changed()`` true: inside it the rows are visible, after a rollback neither survives,
    after a commit both."""
    expected = sorted([action] if isinstance(action, str) else action)
    before = pulse.tx(lambda c: _audit_actions(c, pulse.namespace))

    def added(conn: sa.Connection) -> list[str]:
        actions = _audit_actions(conn, pulse.namespace)
        assert actions[: len(before)] == before
        return sorted(actions[len(before) :])

    with pulse.engine.connect() as conn:
        trans = conn.begin()
        work(conn)
        assert added(conn) == expected
        trans.rollback()
    assert pulse.tx(lambda c: _audit_actions(c, pulse.namespace)) == before
    assert not changed(), "rolled back, yet the change is there"
    pulse.tx(work)
    assert pulse.tx(added) == expected
    assert changed()


def test_cancel_is_audited_with_the_change(pulse: PulseDriver) -> None:
    task_id = pulse.submit().task_id
    work = functools.partial(
        cancel_task, namespace=pulse.namespace, task_id=task_id, actor="bob", reason="dup order"
    )
    assert_audited_with_the_change(
        pulse, "task.cancel", work, lambda: pulse.state(task_id) == "CANCELLED"
    )


def test_review_is_audited_with_the_change(pulse: PulseDriver) -> None:
    task_id = _needs_review(pulse)
    work = functools.partial(
        review_task,
        namespace=pulse.namespace,
        task_id=task_id,
        decision=ReviewDecision.SUCCEEDED,
        actor="alice",
        reason="provider shows the charge",
        evidence_ref="psp-1",
        expected_state_version=pulse.task(task_id).state_version,
        execution_ended=True,
    )
    assert_audited_with_the_change(
        pulse, "task.review", work, lambda: pulse.state(task_id) == "SUCCEEDED"
    )


def test_manual_retry_is_audited_with_the_change(pulse: PulseDriver) -> None:
    task_id = pulse.submit().task_id
    pulse.cancel(task_id)
    work = functools.partial(
        retry_task,
        namespace=pulse.namespace,
        task_id=task_id,
        actor="alice",
        reason="customer asked again",
        expected_state_version=pulse.task(task_id).state_version,
        safe_to_retry=True,
    )

    def retried() -> bool:
        return any(a.action == "task.retry" for a in pulse.audit(task_id))

    assert_audited_with_the_change(pulse, "task.retry", work, retried)


def test_token_creation_and_revocation_are_audited_without_the_token(pulse: PulseDriver) -> None:
    def exists() -> bool:
        return any(c.name == "ci" for c in pulse.tx(lambda c: list_credentials(c, pulse.namespace)))

    create = functools.partial(
        create_token,
        namespace=pulse.namespace,
        name="ci",
        roles=["submit"],
        actor="alice",
        reason="CI pipeline",
        token="orb_" + "x" * 40,
    )
    assert_audited_with_the_change(pulse, "credential.create", create, exists)

    def revoked() -> bool:
        creds = pulse.tx(lambda c: list_credentials(c, pulse.namespace))
        return any(c.name == "ci" and c.revoked_at is not None for c in creds)

    revoke = functools.partial(
        revoke_credential, namespace=pulse.namespace, name="ci", actor="alice", reason="leaked"
    )
    assert_audited_with_the_change(pulse, "credential.revoke", revoke, revoked)
    rows = pulse.tx(lambda c: list_audit(c, AuditQuery(namespace=pulse.namespace), limit=10))
    assert all("x" * 40 not in str(r.after) for r in rows)
    assert rows[0].after == {"roles": ["submit"], "source": "cli"}


def test_subscription_changes_and_redrive_are_audited_with_the_change(
    pulse: PulseDriver, delivery: DeliveryDriver
) -> None:
    delivery.subscribe(max_attempts=1)
    delivery.succeeded_task()
    delivery.pull(deadline=1)
    pulse.advance(2)
    assert delivery.pull().parked == 1
    redrive = functools.partial(
        redrive_parked, namespace=pulse.namespace, name="results", actor="ops", reason="fixed"
    )
    assert_audited_with_the_change(
        pulse,
        "subscription.redrive",
        redrive,
        lambda: delivery.deliveries()[0].state == "PENDING",
    )
    pulse.tx(
        functools.partial(
            pull_events,
            namespace=pulse.namespace,
            name="results",
            limit=1,
            ack_deadline_seconds=1,
        )
    )
    delete = functools.partial(
        delete_subscription,
        namespace=pulse.namespace,
        name="results",
        actor="ops",
        reason="moved to a webhook",
        discard_undelivered=True,
    )

    def gone() -> bool:
        try:
            delivery.get()
        except NotFound:
            return True
        return False

    assert_audited_with_the_change(pulse, "subscription.delete", delete, gone)


def test_a_correction_is_a_new_row_linked_to_the_one_it_corrects(pulse: PulseDriver) -> None:
    task_id = pulse.submit().task_id
    pulse.cancel(task_id, actor="bob", reason="wrong order")
    (original,) = pulse.audit(task_id)
    correction = pulse.tx(
        lambda c: correct_audit(
            c,
            namespace=pulse.namespace,
            audit_id=original.id,
            actor="bob",
            reason="the order number in the reason was wrong: it is 1042",
            correction={"reason": "duplicate of order 1042"},
        )
    )
    rows = pulse.audit(task_id)
    assert [r.id for r in rows] == [original.id, correction]
    assert rows[0].reason == "wrong order", "the original row is never rewritten"
    assert (rows[1].action, rows[1].corrects_id) == ("audit.correct", original.id)


def test_audit_list_filters_by_actor_action_resource_and_time(pulse: PulseDriver) -> None:
    first = pulse.submit(params={"n": 1}).task_id
    second = pulse.submit(params={"n": 2}).task_id
    pulse.cancel(first, actor="alice")
    pulse.advance(3600)
    pulse.cancel(second, actor="bob")
    later = pulse.now(-1800)

    def listed(**filters: Any) -> list[tuple[str, str]]:
        query = AuditQuery(namespace=pulse.namespace, **filters)
        rows = pulse.tx(lambda c: list_audit(c, query, limit=50))
        return [(r.actor, r.resource_id) for r in rows]

    assert listed() == [("bob", second), ("alice", first)]
    assert listed(actor="alice") == [("alice", first)]
    assert listed(action="task.*") == listed(action="task.cancel") == listed()
    assert listed(action="task.review") == []
    assert listed(resource_kind="task", resource_id=second) == [("bob", second)]
    assert listed(since=later) == [("bob", second)]
    assert listed(until=later) == [("alice", first)]


def test_audit_pages_never_repeat_or_skip_a_row(pulse: PulseDriver) -> None:
    for n in range(5):
        pulse.cancel(pulse.submit(params={"n": n}).task_id)
    query = AuditQuery(namespace=pulse.namespace, newest_first=False)
    seen: list[str] = []
    after: tuple[dt.datetime, str] | None = None
    while True:
        page = pulse.tx(functools.partial(list_audit, query=query, limit=2, after=after))
        if not page:
            break
        seen += [r.id for r in page]
        after = (page[-1].at, page[-1].id)
    everything = pulse.tx(lambda c: list_audit(c, query, limit=100))
    assert seen == [r.id for r in everything] and len(seen) == 5


@pytest.mark.parametrize("field", ["actor", "reason"])
def test_a_correction_needs_an_actor_and_a_reason(pulse: PulseDriver, field: str) -> None:
    task_id = pulse.submit().task_id
    pulse.cancel(task_id)
    (row,) = pulse.audit(task_id)
    values = {"actor": "bob", "reason": "typo", field: " "}
    with pytest.raises(InvalidRequest):
        pulse.tx(lambda c: correct_audit(c, namespace=pulse.namespace, audit_id=row.id, **values))


def test_declaring_a_subscription_is_audited_with_the_change(pulse: PulseDriver) -> None:
    spec = SubscriptionSpec(name="results", mode=Mode.PULL)
    work = functools.partial(
        put_subscription, namespace=pulse.namespace, spec=spec, actor="ops", reason="billing"
    )

    def exists() -> bool:
        try:
            pulse.tx(lambda c: get_subscription(c, pulse.namespace, "results"))
        except NotFound:
            return False
        return True

    assert_audited_with_the_change(pulse, "subscription.create", work, exists)
