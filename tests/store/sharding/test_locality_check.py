"""The namespace-locality check itself (tests/locality): a deliberately cross-namespace
transaction, a statement bounded by no namespace, a join into every namespace — each fails it;
a one-namespace transaction passes. ORBIT.md §3 "one namespace per transaction"; seed §4 (the
routing unit of future shards: cross-database updates must not assume one database's atomicity).

The SQL here is sent by this module, which the watch under test counts as the store's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from locality.watch import LocalityWatch

from orbit_store.pulse.leases.expiry import find_lapsed_attempts

from ..drivers.pulse_driver import PulseDriver

pytestmark = pytest.mark.mariadb_only


@pytest.fixture
def watch() -> Iterator[LocalityWatch]:
    """A watch that judges this module's SQL as the store's (the suite's watch does not)."""
    own = LocalityWatch(also=(__name__,))
    own.install()
    yield own
    own.uninstall()


@pytest.fixture
def two(mariadb_engine: sa.Engine) -> tuple[PulseDriver, PulseDriver]:
    """Two namespaces with a queue and a waiting task each, written before the watch began
    (so the check learns their rows' namespaces from the database, not from the INSERTs)."""
    drivers = (PulseDriver(mariadb_engine), PulseDriver(mariadb_engine))
    for driver in drivers:
        driver.queue()
        driver.submit()
    return drivers


def _queue_row(conn: sa.Connection, namespace: str) -> None:
    conn.execute(
        sa.text("UPDATE queues SET paused = paused WHERE namespace = :ns AND name = 'default'"),
        {"ns": namespace},
    )


def test_a_transaction_that_touches_two_namespaces_fails_the_check(
    watch: LocalityWatch, two: tuple[PulseDriver, PulseDriver]
) -> None:
    first, second = two
    with first.base_engine.begin() as conn:
        _queue_row(conn, first.namespace)
        _queue_row(conn, second.namespace)
    assert len(watch.violations) == 1
    assert "one transaction touched 2 namespaces" in watch.violations[0].what
    assert first.namespace in watch.violations[0].what
    assert second.namespace in watch.violations[0].what


def test_a_row_named_by_its_id_counts_in_the_namespace_it_belongs_to(
    watch: LocalityWatch, two: tuple[PulseDriver, PulseDriver]
) -> None:
    """The task's namespace is not in the statement: the check reads it from the row."""
    first, second = two
    with first.base_engine.connect() as conn:
        task_id = conn.execute(
            sa.text("SELECT id FROM tasks WHERE namespace = :ns"), {"ns": first.namespace}
        ).scalar_one()
    with first.base_engine.begin() as conn:
        conn.execute(sa.text("SELECT id FROM tasks WHERE id = :id FOR UPDATE"), {"id": task_id})
        _queue_row(conn, second.namespace)
    assert [v.what[: len("one transaction touched 2 namespaces")] for v in watch.violations] == [
        "one transaction touched 2 namespaces"
    ]


def test_a_statement_bounded_by_no_namespace_fails_the_check(
    watch: LocalityWatch, mariadb_engine: sa.Engine
) -> None:
    with mariadb_engine.begin() as conn:
        conn.execute(sa.text("SELECT id FROM tasks WHERE state = 'WAITING' LIMIT 1 FOR UPDATE"))
    assert [v.what for v in watch.violations] == [
        f"{__name__}:{test_a_statement_bounded_by_no_namespace_fails_the_check.__name__}"
        " (select tasks) is bounded by no namespace value and no unique key"
    ]


def test_a_join_into_every_namespace_fails_the_check(
    watch: LocalityWatch, two: tuple[PulseDriver, PulseDriver]
) -> None:
    """Tasks of any namespace whose queue has the same name: not bounded by the first."""
    first, _second = two
    with first.base_engine.begin() as conn:
        conn.execute(
            sa.text(
                "SELECT u.id FROM tasks t JOIN tasks u ON u.queue = t.queue WHERE t.namespace = :ns"
            ),
            {"ns": first.namespace},
        )
    assert len(watch.violations) == 1
    assert "is bounded by no namespace value" in watch.violations[0].what


def test_a_listed_cross_namespace_read_inside_a_write_fails_the_check(
    watch: LocalityWatch, two: tuple[PulseDriver, PulseDriver]
) -> None:
    """The reaper's finder may read every namespace, but never inside a writing transaction."""
    first, _second = two
    with first.base_engine.begin() as conn:
        _queue_row(conn, first.namespace)
        find_lapsed_attempts(conn)
    assert [v.what for v in watch.violations] == [
        "the cross-namespace read orbit_store.pulse.leases.expiry:find_lapsed_attempts ran in a"
        " writing transaction"
    ]


def test_one_namespace_by_value_by_key_and_through_its_references_passes(
    watch: LocalityWatch, two: tuple[PulseDriver, PulseDriver]
) -> None:
    first, _second = two
    with first.base_engine.begin() as conn:
        task_id = conn.execute(
            sa.text("SELECT id FROM tasks WHERE namespace = :ns FOR UPDATE"),
            {"ns": first.namespace},
        ).scalar_one()
        conn.execute(
            sa.text(
                "SELECT e.id FROM tasks t JOIN task_events e ON e.task_id = t.id WHERE t.id = :id"
            ),
            {"id": task_id},
        )
        _queue_row(conn, first.namespace)
    with first.base_engine.connect() as conn:
        find_lapsed_attempts(conn)  # a listed read, alone in its transaction
    assert watch.violations == []
    assert watch.counts["routed"] >= 2 and watch.counts["by_key"] >= 1
    assert watch.counts["joined"] >= 1 and watch.counts["scatter"] >= 1
