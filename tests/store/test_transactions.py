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
