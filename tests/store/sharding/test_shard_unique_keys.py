"""Ids and uniqueness that survive sharding by namespace (ORBIT.md §3 "Identifiers"; seed §4):
every UNIQUE key of a namespaced table includes the namespace or a UUIDv7 id, or is unique by
construction (orbit_store/sharding.py), so each shard can enforce it alone. Read from the
migrated schema (information_schema), not from the metadata."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from orbit_store import sharding
from orbit_store.ids import new_id

UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")

UniqueKey = tuple[str, str, tuple[tuple[str, str], ...]]  # table, key name, (column, type)…


def unique_keys(engine: sa.Engine) -> list[UniqueKey]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT s.table_name, s.index_name, s.column_name, c.column_type"
                " FROM information_schema.statistics s JOIN information_schema.columns c"
                " ON c.table_schema = s.table_schema AND c.table_name = s.table_name"
                " AND c.column_name = s.column_name"
                " WHERE s.table_schema = DATABASE() AND s.non_unique = 0"
                " ORDER BY s.table_name, s.index_name, s.seq_in_index"
            )
        ).all()
    keys: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for table, index, column, column_type in rows:
        keys.setdefault((table, index), []).append((column, column_type))
    return [(table, index, tuple(columns)) for (table, index), columns in keys.items()]


def is_id_column(name: str, column_type: str) -> bool:
    """Holds a UUIDv7 from orbit_store.ids.new_id: a row's id or a reference to one."""
    return column_type == "varchar(36)" and (
        name == "id" or name.endswith("_id") or name == "retry_of"
    )


def shard_safe(table: str, columns: tuple[tuple[str, str], ...]) -> bool:
    if sharding.namespace_column(table) is None:
        return True  # a global table lives in one unsharded keyspace
    names = [name for name, _type in columns]
    return (
        sharding.namespace_column(table) in names
        or any(is_id_column(name, kind) for name, kind in columns)
        or any((table, name) in sharding.UNIQUE_BY_CONSTRUCTION for name in names)
    )


def test_every_unique_key_includes_the_namespace_or_a_globally_unique_id(
    mariadb_engine: sa.Engine,
) -> None:
    keys = unique_keys(mariadb_engine)
    assert ("credentials", "uq_credentials_token_hash_namespace") in {(t, k) for t, k, _ in keys}
    unsafe = [(t, k) for t, k, columns in keys if not shard_safe(t, columns)]
    assert unsafe == []


@pytest.mark.parametrize(
    "columns",
    [(("name", "varchar(63)"),), (("token_hash", "varchar(64)"),), (("key", "varchar(36)"),)],
)
def test_a_unique_key_without_namespace_or_id_is_refused(
    columns: tuple[tuple[str, str], ...],
) -> None:
    """A global unique name (defect 7's token hash) would need a cross-shard check."""
    assert not shard_safe("queues", columns)


def test_ids_are_uuid7_strings_of_the_id_columns_width() -> None:
    ids = {new_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(UUID7.match(i) and len(i) == 36 for i in ids)
