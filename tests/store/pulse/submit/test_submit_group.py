"""Group commit of single submissions: concurrent submissions share a transaction and
each is answered as it would have been alone — invariants 1 and 6 per submission, including
when the group's transaction cannot tell each one's fate (a key taken meanwhile, a commit
whose outcome is unknown)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from orbit_store.db import create_store_engine
from orbit_store.errors import (
    CommitOutcomeUnknown,
    IdempotencyConflict,
    NotFound,
    QuotaExceeded,
)
from orbit_store.pulse import service
from orbit_store.pulse.model import SubmitResult
from orbit_store.pulse.submit.accept import SubmitRequest, submit_task
from orbit_store.pulse.submit_group import groupable, submit_group
from orbit_store.schema import namespaces, submission_keys, tasks

from ...drivers.pulse_driver import PulseDriver
from ...drivers.sent_statements import sent_statements


def _request(pulse: PulseDriver, key: str | None, **kw: Any) -> SubmitRequest:
    kw.setdefault("params", {"key": key})
    kw.setdefault("queue", "default")
    return SubmitRequest(namespace=pulse.namespace, handler="test.noop", idempotency_key=key, **kw)


def _tasks_in(pulse: PulseDriver) -> int:
    with pulse.engine.connect() as conn:
        count = conn.execute(
            sa.select(sa.func.count()).where(tasks.c.namespace == pulse.namespace)
        ).scalar_one()
    return int(count)


def _keys_in(pulse: PulseDriver) -> dict[str, str]:
    with pulse.engine.connect() as conn:
        rows = conn.execute(
            sa.select(submission_keys.c.idempotency_key, submission_keys.c.task_id).where(
                submission_keys.c.namespace == pulse.namespace
            )
        ).all()
    return {key: task_id for key, task_id in rows}


@pytest.fixture
def own_engine(engine: sa.Engine) -> Iterator[sa.Engine]:
    """An engine of the test's own, on the same database, whose commits can be made to fail."""
    own = create_store_engine(engine.url.render_as_string(hide_password=False))
    yield own
    own.dispose()


def _lose_next_commit(engine: sa.Engine, *, committed: bool) -> None:
    """The next COMMIT on ``engine`` reports a lost connection (2013), after committing or not:
    what the client sees when the server goes away with the COMMIT in flight."""
    dialect = engine.dialect
    real_commit = dialect.do_commit
    lost = dialect.loaded_dbapi.OperationalError  # the driver's own (PyMySQL or mysqlclient)

    def do_commit(dbapi_connection: Any) -> None:
        dialect.do_commit = real_commit  # type: ignore[method-assign]
        if committed:
            real_commit(dbapi_connection)
        else:
            real_commit.__self__.do_rollback(dbapi_connection)  # type: ignore[attr-defined]
        raise lost(2013, "Lost connection to server during query")

    dialect.do_commit = do_commit  # type: ignore[method-assign]


def test_a_group_answers_each_submission_in_order_as_alone_inv1_inv6(pulse: PulseDriver) -> None:
    earlier = service.submit(pulse.engine, _request(pulse, "old"))
    answers = submit_group(
        pulse.engine,
        pulse.namespace,
        [
            _request(pulse, "a"),
            _request(pulse, "old"),
            _request(pulse, "old", params={"other": 1}),
            _request(pulse, "b", queue="undeclared"),
            _request(pulse, None),
        ],
    )
    created, replayed, conflict, refused, unkeyed = answers
    assert isinstance(created, SubmitResult) and not created.replayed
    assert created.row is not None, "a new task is answered from what was written"
    assert isinstance(replayed, SubmitResult) and replayed.replayed
    assert replayed.task_id == earlier.task_id
    assert isinstance(conflict, IdempotencyConflict)
    assert isinstance(refused, NotFound)
    assert isinstance(unkeyed, SubmitResult) and not unkeyed.replayed
    assert _keys_in(pulse) == {"old": earlier.task_id, "a": created.task_id}
    assert _tasks_in(pulse) == 3
    [event] = pulse.events(created.task_id)
    assert (event.to_state, event.reason) == ("WAITING", "submitted")


def test_two_submissions_under_one_key_in_one_group_make_one_task_inv6(pulse: PulseDriver) -> None:
    first, again, different = submit_group(
        pulse.engine,
        pulse.namespace,
        [_request(pulse, "k"), _request(pulse, "k"), _request(pulse, "k", params={"n": 2})],
    )
    assert isinstance(first, SubmitResult) and isinstance(again, SubmitResult)
    assert (first.replayed, again.replayed) == (False, True)
    assert again.task_id == first.task_id
    assert isinstance(different, IdempotencyConflict)
    assert _tasks_in(pulse) == 1


def test_a_group_of_new_submissions_does_not_look_its_keys_up_first(pulse: PulseDriver) -> None:
    """Optimistic: most submissions are new, so a group sends no key lookup; a used key is
    found by the keys' INSERT instead (the test above)."""
    with sent_statements(pulse.base_engine) as statements:
        answers = submit_group(
            pulse.engine, pulse.namespace, [_request(pulse, "a"), _request(pulse, "b")]
        )
    assert all(isinstance(a, SubmitResult) and not a.replayed for a in answers)
    assert [s for s in statements if _reads_keys(s)] == []


def test_in_a_group_a_refused_submission_whose_key_was_used_is_its_replay_inv6(
    pulse: PulseDriver,
) -> None:
    """A replay is answered as the original task even when the request would be refused now
    (here: the waiting quota is full), as if its key had been looked up first."""
    pulse.quota("q", max_waiting=1)
    earlier = service.submit(pulse.engine, _request(pulse, "old"))
    replayed, refused = submit_group(
        pulse.engine, pulse.namespace, [_request(pulse, "old"), _request(pulse, "new")]
    )
    assert isinstance(replayed, SubmitResult) and replayed.replayed
    assert replayed.task_id == earlier.task_id
    assert isinstance(refused, QuotaExceeded)
    assert _tasks_in(pulse) == 1


def _reads_keys(statement: str) -> bool:
    return statement.lstrip().upper().startswith("SELECT") and "submission_keys" in statement


def test_a_submission_with_a_concurrency_key_is_never_grouped(pulse: PulseDriver) -> None:
    assert groupable(_request(pulse, "a"))
    assert not groupable(_request(pulse, "a", concurrency_key="tenant-1"))
    with pytest.raises(ValueError, match="groupable"):
        submit_group(
            pulse.engine,
            pulse.namespace,
            [_request(pulse, "a"), _request(pulse, "b", concurrency_key="tenant-1")],
        )


@pytest.mark.mariadb_only
def test_after_a_group_s_lost_commit_that_committed_keyed_submissions_replay_inv6(
    pulse: PulseDriver, own_engine: sa.Engine
) -> None:
    _lose_next_commit(own_engine, committed=True)
    keyed_a, keyed_b, unkeyed = submit_group(
        own_engine,
        pulse.namespace,
        [_request(pulse, "a"), _request(pulse, "b"), _request(pulse, None)],
    )
    assert isinstance(keyed_a, SubmitResult) and keyed_a.replayed, "found by its key"
    assert isinstance(keyed_b, SubmitResult) and keyed_b.replayed
    assert isinstance(unkeyed, CommitOutcomeUnknown), "no key: its fate cannot be told"
    assert _keys_in(pulse) == {"a": keyed_a.task_id, "b": keyed_b.task_id}
    assert _tasks_in(pulse) == 3, "the group committed once; nothing was accepted twice"


@pytest.mark.mariadb_only
def test_after_a_group_s_lost_commit_that_did_not_commit_keyed_submissions_are_accepted_inv1(
    pulse: PulseDriver, own_engine: sa.Engine
) -> None:
    _lose_next_commit(own_engine, committed=False)
    keyed, unkeyed = submit_group(
        own_engine, pulse.namespace, [_request(pulse, "a"), _request(pulse, None)]
    )
    assert isinstance(keyed, SubmitResult) and not keyed.replayed
    assert isinstance(unkeyed, CommitOutcomeUnknown)
    assert _keys_in(pulse) == {"a": keyed.task_id}
    assert _tasks_in(pulse) == 1


@pytest.mark.mariadb_only
def test_a_key_taken_by_another_transaction_meanwhile_is_answered_as_a_replay_inv6(
    pulse: PulseDriver,
) -> None:
    """The group looked its keys up, then waited on the namespace row while another submission
    took one of them: its insert collides, and each submission is answered alone."""
    service.submit(pulse.engine, _request(pulse, "warm-up"))  # the namespace row exists
    answers: list[Any] = []
    with pulse.engine.connect() as blocker:
        blocker.begin()
        blocker.execute(
            sa.select(namespaces.c.name)
            .where(namespaces.c.name == pulse.namespace)
            .with_for_update()
        )
        group = threading.Thread(
            target=lambda: answers.extend(
                submit_group(
                    pulse.engine, pulse.namespace, [_request(pulse, "x"), _request(pulse, "y")]
                )
            )
        )
        group.start()
        group.join(1.0)  # it has looked its keys up and waits for the namespace row
        assert group.is_alive()
        taken = submit_task(blocker, _request(pulse, "x"))
        blocker.commit()
    group.join(30)
    x, y = answers
    assert isinstance(x, SubmitResult) and x.replayed and x.task_id == taken.task_id
    assert isinstance(y, SubmitResult) and not y.replayed
    assert _keys_in(pulse) == {
        "warm-up": _keys_in(pulse)["warm-up"],
        "x": taken.task_id,
        "y": y.task_id,
    }
