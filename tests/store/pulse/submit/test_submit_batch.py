"""Bulk submission: invariants 1 and 6 per item — an item answered created has its
task, key and accepted event durable; a used key replays or conflicts; an item refused writes
nothing and never fails its neighbours."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from orbit_store.errors import IdempotencyConflict, NotFound, QuotaExceeded
from orbit_store.pulse import service
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.schema import submission_keys, tasks

from ...drivers.pulse_driver import PulseDriver


def _request(pulse: PulseDriver, key: str | None, **kw: Any) -> SubmitRequest:
    kw.setdefault("params", {"key": key})
    kw.setdefault("queue", "default")
    return SubmitRequest(namespace=pulse.namespace, handler="test.noop", idempotency_key=key, **kw)


def _submit_many(pulse: PulseDriver, *requests: SubmitRequest) -> list[Any]:
    return service.submit_many(pulse.engine, pulse.namespace, list(requests))


def test_every_created_item_has_its_task_key_and_accepted_event_inv1(pulse: PulseDriver) -> None:
    results = _submit_many(pulse, *[_request(pulse, f"k{i}") for i in range(250)])
    assert [r.error for r in results] == [None] * 250
    ids = [r.result.task_id for r in results]
    assert len(set(ids)) == 250
    with pulse.engine.connect() as conn:
        keyed = dict(
            conn.execute(
                sa.select(submission_keys.c.idempotency_key, submission_keys.c.task_id).where(
                    submission_keys.c.namespace == pulse.namespace
                )
            ).all()
        )
        params = dict(conn.execute(sa.select(tasks.c.id, tasks.c.params)).all())
    assert keyed == {f"k{i}": ids[i] for i in range(250)}
    assert [params[task_id] for task_id in ids] == [{"key": f"k{i}"} for i in range(250)]
    for task_id in (ids[0], ids[-1]):
        [event] = pulse.events(task_id)
        assert (event.to_state, event.reason, event.state_version) == ("WAITING", "submitted", 1)
    assert {pulse.task(task_id).wait_path for task_id in ids} == {"READY"}


def test_a_key_used_before_replays_the_same_request_and_conflicts_for_another_inv6(
    pulse: PulseDriver,
) -> None:
    first = pulse.submit(idempotency_key="used", params={"key": "used"})
    same, other, new = _submit_many(
        pulse,
        _request(pulse, "used"),
        _request(pulse, "used", params={"different": True}),
        _request(pulse, "new"),
    )
    assert (same.result.task_id, same.result.replayed) == (first.task_id, True)
    assert isinstance(other.error, IdempotencyConflict) and other.result is None
    assert new.result is not None and not new.result.replayed


def test_a_key_repeated_inside_one_batch_is_a_replay_of_its_first_item_inv6(
    pulse: PulseDriver,
) -> None:
    first, again, different = _submit_many(
        pulse,
        _request(pulse, "twice"),
        _request(pulse, "twice"),
        _request(pulse, "twice", params={"different": True}),
    )
    assert not first.result.replayed
    assert (again.result.task_id, again.result.replayed) == (first.result.task_id, True)
    assert isinstance(different.error, IdempotencyConflict)
    with pulse.engine.connect() as conn:
        count = conn.execute(
            sa.select(sa.func.count()).where(tasks.c.namespace == pulse.namespace)
        ).scalar_one()
    assert count == 1, "one key, one task"


def test_a_quota_refuses_items_one_by_one_and_counts_the_accepted(pulse: PulseDriver) -> None:
    pulse.quota("q", max_waiting=2)
    results = _submit_many(pulse, *[_request(pulse, f"q{i}") for i in range(4)])
    assert [r.error is None for r in results] == [True, True, False, False]
    assert all(isinstance(r.error, QuotaExceeded) for r in results[2:])
    with pulse.engine.connect() as conn:
        states = conn.execute(
            sa.select(tasks.c.quota_counted).where(tasks.c.namespace == pulse.namespace)
        ).scalars()
        assert list(states) == [True, True]


def test_an_item_for_an_undeclared_queue_is_refused_and_its_neighbours_are_accepted(
    pulse: PulseDriver,
) -> None:
    good, bad, also_good = _submit_many(
        pulse, _request(pulse, "a"), _request(pulse, "b", queue="nope"), _request(pulse, "c")
    )
    assert isinstance(bad.error, NotFound) and "nope" in str(bad.error)
    assert good.result is not None and also_good.result is not None
    assert pulse.state(good.result.task_id) == "WAITING"


def test_items_with_a_concurrency_key_get_their_permit_or_wait_for_it(pulse: PulseDriver) -> None:
    results = _submit_many(
        pulse,
        *[_request(pulse, f"c{i}", concurrency_key="acct", concurrency_limit=1) for i in range(3)],
    )
    paths = [pulse.task(r.result.task_id).wait_path for r in results]
    assert paths == ["READY", "BLOCKED_KEY", "BLOCKED_KEY"]
