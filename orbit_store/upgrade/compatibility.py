"""The schema compatibility window: may this code run on the database's schema?

Migrations are expand/contract. Each declares ``expand_only``: True when code written for the
revision before it still runs correctly on the schema after it (new tables, nullable or
defaulted columns, new indexes), False when it contracts (drops, renames, tightens). From the
chain of those markers, every revision R has a minimum compatible code revision: R itself when it
contracts, otherwise that of its parent.

After each migration step the migration environment writes the new revision's minimum into
``schema_compatibility`` (:func:`record_window`). Code then accepts a database that is

- exactly at its own head revision; or
- newer than its code (a revision it does not know) whose recorded minimum is its head or older.

A database older than the code is never accepted: the code may rely on what a migration adds.
So during a rolling upgrade the pre-upgrade migration Job moves the schema forward, the old
servers keep serving (when every new migration is expand-only), and the new ones start on it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import sqlalchemy as sa
from alembic.runtime.migration import MigrationContext
from alembic.script import Script, ScriptDirectory

from orbit_store.schema import schema_compatibility


class Verdict(enum.StrEnum):
    CURRENT = "current"  # at this code's head
    NEWER_COMPATIBLE = "newer-compatible"  # ahead of the code, within its window
    BEHIND = "behind"  # older than the code: run `orbit admin migrate`
    NEWER_INCOMPATIBLE = "newer-incompatible"  # ahead and contracted: upgrade Orbit
    EMPTY = "empty"  # never migrated


@dataclass(frozen=True)
class SchemaCompatibility:
    verdict: Verdict
    database: str | None  # the database's revision
    code: str | None  # this code's head revision
    min_code_revision: str | None = None  # recorded by the newest migration, when known

    @property
    def compatible(self) -> bool:
        return self.verdict in (Verdict.CURRENT, Verdict.NEWER_COMPATIBLE)

    def explain(self) -> str:
        """One sentence for /readyz, start-up refusals and `orbit admin migrate`."""
        at = f"database schema is at revision {self.database or 'none'}"
        if self.verdict is Verdict.CURRENT:
            return f"{at}, as this code expects"
        if self.verdict is Verdict.NEWER_COMPATIBLE:
            return (
                f"{at}, newer than this code ({self.code}) and compatible with it "
                f"(code from revision {self.min_code_revision} on may run)"
            )
        if self.verdict is Verdict.NEWER_INCOMPATIBLE:
            needs = self.min_code_revision or "unknown (no compatibility record)"
            return f"{at}, which needs code at revision {needs} or later: upgrade Orbit"
        return f"{at}, this code needs {self.code}: run `orbit admin migrate`"


def expand_only(script: Script) -> bool:
    """The migration's declaration; a migration that does not declare it contracts."""
    return getattr(script.module, "expand_only", False) is True


def min_code_revision(scripts: ScriptDirectory, revision: str) -> str:
    """The oldest code revision that runs on the schema at ``revision``."""
    current = scripts.get_revision(revision)
    while current is not None and expand_only(current) and current.down_revision is not None:
        parent = current.down_revision
        current = scripts.get_revision(parent if isinstance(parent, str) else parent[0])
    assert current is not None, revision
    return current.revision


def record_window(conn: sa.Connection, scripts: ScriptDirectory, revision: str | None) -> None:
    """After a migration step: store the window of the schema now at ``revision`` (skipped while
    the schema predates the compatibility table). One single-row upsert, in the migration's
    transaction."""
    if revision is None or not sa.inspect(conn).has_table(schema_compatibility.name):
        return
    minimum = min_code_revision(scripts, revision)
    updated = conn.execute(
        sa.update(schema_compatibility)
        .where(schema_compatibility.c.id == 1)
        .values(min_code_revision=minimum)
    )
    if updated.rowcount == 0:
        conn.execute(sa.insert(schema_compatibility).values(id=1, min_code_revision=minimum))


def check(engine: sa.Engine, scripts: ScriptDirectory) -> SchemaCompatibility:
    """Read the database's revision (and, when it is newer than the code, its recorded window)."""
    code = scripts.get_current_head()
    with engine.connect() as conn:
        database = MigrationContext.configure(conn).get_current_revision()
        if database is None:
            return SchemaCompatibility(Verdict.EMPTY, None, code)
        if database == code:
            return SchemaCompatibility(Verdict.CURRENT, database, code)
        if _known(scripts, database):
            return SchemaCompatibility(Verdict.BEHIND, database, code)
        minimum = _recorded_minimum(conn)
    fits = minimum is not None and _known(scripts, minimum) and _is_ancestor(scripts, minimum, code)
    verdict = Verdict.NEWER_COMPATIBLE if fits else Verdict.NEWER_INCOMPATIBLE
    return SchemaCompatibility(verdict, database, code, minimum)


def _known(scripts: ScriptDirectory, revision: str) -> bool:
    return revision in {s.revision for s in scripts.walk_revisions()}


def _is_ancestor(scripts: ScriptDirectory, ancestor: str, revision: str | None) -> bool:
    """True when ``ancestor`` is ``revision`` or one of its ancestors."""
    return any(s.revision == ancestor for s in scripts.iterate_revisions(revision, "base"))


def _recorded_minimum(conn: sa.Connection) -> str | None:
    if not sa.inspect(conn).has_table(schema_compatibility.name):
        return None
    value = conn.execute(
        sa.select(schema_compatibility.c.min_code_revision).where(schema_compatibility.c.id == 1)
    ).scalar_one_or_none()
    return str(value) if value is not None else None
