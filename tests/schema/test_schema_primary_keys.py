"""Every table of the migrated schema is InnoDB and has a primary key: MySQL Group Replication
(InnoDB Cluster) refuses writes to tables without one (docs/guides/mysql.md)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from orbit_store.db import create_store_engine
from orbit_store.upgrade import migrate

pytestmark = pytest.mark.mariadb_only


def test_every_migrated_table_is_innodb_with_a_primary_key(empty_mariadb_url: str) -> None:
    engine = create_store_engine(empty_mariadb_url)
    try:
        migrate.upgrade(engine)
        inspector = sa.inspect(engine)
        tables = inspector.get_table_names()
        assert "tasks" in tables and "alembic_version" in tables
        without_key = [
            t for t in tables if not inspector.get_pk_constraint(t)["constrained_columns"]
        ]
        assert not without_key, f"tables without a primary key: {without_key}"
        with engine.connect() as conn:
            engines = dict(
                conn.execute(
                    sa.text(
                        "SELECT table_name, engine FROM information_schema.tables"
                        " WHERE table_schema = DATABASE()"
                    )
                ).all()
            )
        assert {name: e for name, e in engines.items() if e != "InnoDB"} == {}
    finally:
        engine.dispose()
