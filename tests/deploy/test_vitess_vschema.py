"""deploy/vitess/vschema.json: a Vitess keyspace sharded by a hash of the namespace, the global
tables in an unsharded keyspace (orbit_store/sharding.py), and a vindex for every table of the
migrated schema (docs/operations/scaling.md "Past one primary")."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa

from orbit_store import sharding

from .conftest import REPO

VSCHEMA = REPO / "deploy" / "vitess" / "vschema.json"


def keyspaces() -> dict[str, Any]:
    return json.loads(VSCHEMA.read_text())["keyspaces"]  # type: ignore[no-any-return]


def lookup_tables(document: dict[str, Any]) -> set[str]:
    """Backing tables of lookup vindexes (Vitess's, not Orbit's schema)."""
    return {
        vindex["params"]["table"].split(".")[-1]
        for keyspace in document.values()
        for vindex in keyspace.get("vindexes", {}).values()
        if "lookup" in vindex["type"]
    }


def problems(document: dict[str, Any], schema_tables: set[str]) -> list[str]:
    """What is wrong with a VSchema document for a schema with these tables."""
    sharded = document["orbit"]
    unsharded = document["orbit_global"]
    found: list[str] = []
    if not sharded.get("sharded") or unsharded.get("sharded"):
        found.append("orbit must be sharded and orbit_global unsharded")
    vindexes = sharded["vindexes"]
    for name in sorted(schema_tables):
        column = sharding.namespace_column(name)
        if column is None:
            if name not in unsharded["tables"]:
                found.append(f"global table {name} is not in the unsharded keyspace")
            placement = sharding.GLOBAL_TABLES[name].placement
            entry = sharded["tables"].get(name)
            if placement is sharding.Placement.REFERENCE and entry != {
                "type": "reference",
                "source": f"orbit_global.{name}",
            }:
                found.append(f"{name} must be a reference table copied from orbit_global")
            continue
        entry = sharded["tables"].get(name)
        if not entry or not entry.get("column_vindexes"):
            found.append(f"{name} names no vindex")
            continue
        primary = entry["column_vindexes"][0]
        if primary != {"column": column, "name": "namespace"}:
            found.append(f"{name}'s primary vindex is not the namespace hash on {column}")
        for use in entry["column_vindexes"]:
            if use["name"] not in vindexes:
                found.append(f"{name} uses an undefined vindex {use['name']}")
    if vindexes.get("namespace", {}).get("type") != "unicode_loose_xxhash":
        found.append("the namespace vindex must hash like the column's collation compares")
    extra = set(sharded["tables"]) | set(unsharded["tables"])
    for name in sorted(extra - schema_tables - lookup_tables(document)):
        found.append(f"{name} is not a table of the schema")
    return found


def schema_tables(engine: sa.Engine) -> set[str]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE'"
            )
        )
        return {name for (name,) in rows}


def test_the_vschema_names_a_vindex_for_every_table_of_the_migrated_schema(
    mariadb_engine: sa.Engine,
) -> None:
    tables = schema_tables(mariadb_engine)
    assert {"tasks", "alembic_version", "dispatch_fence"} <= tables
    assert problems(keyspaces(), tables) == []


def test_every_global_table_is_listed_in_sharding(mariadb_engine: sa.Engine) -> None:
    """A table without a namespace column is global and must say why (sharding.py)."""
    with mariadb_engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT table_name FROM information_schema.tables t WHERE table_schema = DATABASE()"
                " AND table_type = 'BASE TABLE' AND NOT EXISTS (SELECT 1 FROM"
                " information_schema.columns c WHERE c.table_schema = t.table_schema"
                " AND c.table_name = t.table_name AND c.column_name = 'namespace')"
            )
        )
        without_namespace = {name for (name,) in rows} - {"namespaces"}
    assert without_namespace == set(sharding.GLOBAL_TABLES)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: d["orbit"]["tables"].pop("tasks"), "tasks names no vindex"),
        (
            lambda d: d["orbit"]["tables"]["queues"]["column_vindexes"].__setitem__(
                0, {"column": "id", "name": "namespace"}
            ),
            "queues's primary vindex is not the namespace hash on namespace",
        ),
        (lambda d: d["orbit_global"]["tables"].pop("restore_fences"), "global table restore"),
        (lambda d: d["orbit"]["tables"].pop("dispatch_fence"), "dispatch_fence must be a ref"),
        (lambda d: d["orbit"]["tables"].__setitem__("gone", {}), "gone is not a table"),
    ],
)
def test_a_vschema_that_misses_a_table_or_its_vindex_is_refused(
    mariadb_engine: sa.Engine, change: Any, problem: str
) -> None:
    document = keyspaces()
    change(document)
    found = problems(document, schema_tables(mariadb_engine))
    assert any(p.startswith(problem) for p in found), found
