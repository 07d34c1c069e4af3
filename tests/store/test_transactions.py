"""The transaction helper: lost connections before COMMIT are retried, deadlocks are retried."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from orbit_store.db import create_store_engine, run_transaction


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


@pytest.mark.mariadb_only
def test_a_deadlock_is_retried_jittered_and_counted_by_reason(engine: sa.Engine) -> None:
    """Two transactions lock two rows in opposite orders: MariaDB aborts one, run_transaction
    runs it again and counts it (orbit_db_transaction_retries_total{reason="deadlock"}) — the
    counter the lock-order test expects to stay at zero."""
    import threading
    import uuid

    from orbit_store.db import TRANSACTION_RETRIES, retry_sleep
    from orbit_store.schema import namespaces

    names = [f"dl-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    with engine.begin() as conn:
        for name in names:
            conn.execute(namespaces.insert().values(name=name, created_at=sa.func.now()))
    barrier = threading.Barrier(2)

    def lock(first: str, second: str, tried: list[int]) -> None:
        def work(conn: sa.Connection) -> None:
            for n, name in enumerate((first, second)):
                conn.execute(
                    sa.select(namespaces.c.name).where(namespaces.c.name == name).with_for_update()
                )
                if n == 0 and not tried:
                    tried.append(1)
                    barrier.wait(10)

        run_transaction(engine, work)

    before = TRANSACTION_RETRIES.snapshot().get("deadlock", 0)
    threads = [
        threading.Thread(target=lock, args=(names[0], names[1], [])),
        threading.Thread(target=lock, args=(names[1], names[0], [])),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert TRANSACTION_RETRIES.snapshot().get("deadlock", 0) == before + 1
    sleeps = {retry_sleep(3) for _ in range(20)}
    assert len(sleeps) > 1 and all(0 <= s <= 0.04 for s in sleeps), "jittered, capped"
