"""The transaction helper: lost connections before COMMIT, deadlocks and lock-wait timeouts are
retried by running the whole transaction again; other errors are raised at once."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

import pytest
import sqlalchemy as sa

from orbit_store.db import TRANSACTION_RETRIES, create_store_engine, retry_sleep, run_transaction
from orbit_store.schema import namespaces

T = TypeVar("T")


@pytest.mark.mariadb_only
def test_a_connection_killed_while_idle_in_the_pool_is_replaced_transparently(
    engine: sa.Engine,
) -> None:
    url = engine.url.render_as_string(hide_password=False)
    small = create_store_engine(url, pool_size=1, max_overflow=0)
    try:
        victim = run_transaction(
            small, lambda c: c.exec_driver_sql("SELECT CONNECTION_ID()").scalar_one()
        )
        with engine.connect() as admin:
            admin.exec_driver_sql(f"KILL {int(victim)}")
        again = run_transaction(
            small, lambda c: c.exec_driver_sql("SELECT CONNECTION_ID()").scalar_one()
        )
        assert again != victim
    finally:
        small.dispose()


def in_thread(work: Callable[[], T]) -> tuple[threading.Thread, list[T | BaseException]]:
    """Run ``work`` in a thread; its result (or exception) lands in the returned list."""
    outcome: list[T | BaseException] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # the test asserts on it
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def new_namespaces(engine: sa.Engine, count: int) -> list[str]:
    names = [f"tx-{uuid.uuid4().hex[:8]}" for _ in range(count)]
    with engine.begin() as conn:
        for name in names:
            conn.execute(namespaces.insert().values(name=name, created_at=sa.func.now()))
    return names


def lock_row(conn: sa.Connection, name: str) -> None:
    conn.execute(sa.select(namespaces.c.name).where(namespaces.c.name == name).with_for_update())


@pytest.mark.mariadb_only
def test_a_deadlock_is_retried_jittered_and_counted_by_reason(engine: sa.Engine) -> None:
    """Two connections lock two rows in opposite orders: MariaDB aborts one (1213), and
    run_transaction runs it again from the start until it commits, counting it
    (orbit_db_transaction_retries_total{reason="deadlock"}) — the counter the lock-order test
    expects to stay at zero."""
    first, second = new_namespaces(engine, 2)
    barrier = threading.Barrier(2)
    runs: list[str] = []

    def opposite_orders(a: str, b: str) -> Callable[[], str]:
        def work(conn: sa.Connection) -> str:
            runs.append(a)
            lock_row(conn, a)
            if runs.count(a) == 1:
                barrier.wait(10)  # both hold their first row before either asks for its second
            lock_row(conn, b)
            return a

        return lambda: run_transaction(engine, work)

    before = TRANSACTION_RETRIES.snapshot().get("deadlock", 0)
    threads = [in_thread(opposite_orders(first, second)), in_thread(opposite_orders(second, first))]
    for thread, _ in threads:
        thread.join(30)
    assert [outcome for _, outcome in threads] == [[first], [second]], "both committed"
    assert len(runs) == 3 and {runs.count(first), runs.count(second)} == {1, 2}, runs
    assert TRANSACTION_RETRIES.snapshot().get("deadlock", 0) == before + 1
    sleeps = {retry_sleep(3) for _ in range(20)}
    assert len(sleeps) > 1 and all(0 <= s <= 0.04 for s in sleeps), "jittered, capped"


@pytest.mark.mariadb_only
def test_a_lock_wait_timeout_is_retried_until_the_lock_is_free(engine: sa.Engine) -> None:
    """Another connection holds the row past innodb_lock_wait_timeout (1205): the transaction
    is run again, and commits once the holder lets go."""
    [name] = new_namespaces(engine, 1)
    url = engine.url.render_as_string(hide_password=False)
    waiter = create_store_engine(url, pool_size=1, max_overflow=0)
    runs: list[int] = []

    def work(conn: sa.Connection) -> int:
        runs.append(1)
        conn.exec_driver_sql("SET SESSION innodb_lock_wait_timeout = 1")
        lock_row(conn, name)
        return len(runs)

    before = TRANSACTION_RETRIES.snapshot().get("lock_wait_timeout", 0)
    try:
        with engine.connect() as holder:
            holder.begin()
            lock_row(holder, name)
            thread, outcome = in_thread(lambda: run_transaction(waiter, work))
            deadline = time.monotonic() + 30
            while TRANSACTION_RETRIES.snapshot().get("lock_wait_timeout", 0) == before:
                assert time.monotonic() < deadline and thread.is_alive(), outcome
                time.sleep(0.05)
            holder.rollback()
        thread.join(30)
    finally:
        waiter.dispose()
    assert outcome == [len(runs)] and len(runs) >= 2, "timed out, ran again, committed"
    assert TRANSACTION_RETRIES.snapshot().get("lock_wait_timeout", 0) == before + len(runs) - 1


def test_an_error_that_is_not_transient_is_raised_at_once_not_retried(engine: sa.Engine) -> None:
    [name] = new_namespaces(engine, 1)
    runs: list[int] = []

    def insert_again(conn: sa.Connection) -> None:
        runs.append(1)
        conn.execute(namespaces.insert().values(name=name, created_at=sa.func.now()))

    before = TRANSACTION_RETRIES.snapshot()
    with pytest.raises(sa.exc.IntegrityError):
        run_transaction(engine, insert_again)
    assert runs == [1]
    assert TRANSACTION_RETRIES.snapshot() == before


def _rollbacks_sent(conn: sa.Connection) -> int:
    """ROLLBACKs this MariaDB session has received (the session's own counter)."""
    row = conn.exec_driver_sql("SHOW SESSION STATUS LIKE 'Com_rollback'").one()
    return int(row[1])


@pytest.mark.mariadb_only
def test_a_committed_transaction_returns_its_connection_without_another_round_trip(
    engine: sa.Engine,
) -> None:
    """After COMMIT the connection holds nothing: the pool's reset-on-return ROLLBACK would be
    one more round trip per transaction, for nothing."""
    url = engine.url.render_as_string(hide_password=False)
    small = create_store_engine(url, pool_size=1, max_overflow=0)
    try:
        name = f"tx-{uuid.uuid4().hex[:8]}"
        before = run_transaction(small, _rollbacks_sent)
        run_transaction(
            small,
            lambda c: c.execute(namespaces.insert().values(name=name, created_at=sa.func.now())),
        )
        after = run_transaction(small, _rollbacks_sent)
        assert after == before, f"{after - before} ROLLBACK(s) sent after two commits"
        with small.connect() as conn:
            found = conn.execute(sa.select(namespaces.c.name).where(namespaces.c.name == name))
            assert found.scalar_one() == name
    finally:
        small.dispose()


@pytest.mark.mariadb_only
def test_a_connection_returned_mid_transaction_is_still_rolled_back(engine: sa.Engine) -> None:
    """Work left uncommitted on a connection handed back to the pool is undone, and its row
    locks released, before anyone else gets that connection."""
    url = engine.url.render_as_string(hide_password=False)
    small = create_store_engine(url, pool_size=1, max_overflow=0)
    name = f"ns-{uuid.uuid4().hex[:10]}"
    try:
        raw = small.raw_connection()
        with raw.cursor() as cur:
            insert = "INSERT INTO namespaces (name, created_at) VALUES (%s, UTC_TIMESTAMP(6))"
            cur.execute(insert, (name,))
        raw.close()  # back to the pool, uncommitted
        with engine.connect() as other:  # not blocked by the insert's locks, and sees no row
            other.exec_driver_sql("SET SESSION innodb_lock_wait_timeout = 2")
            found = other.execute(
                sa.select(namespaces.c.name).where(namespaces.c.name == name).with_for_update()
            ).all()
        assert found == []
    finally:
        small.dispose()
