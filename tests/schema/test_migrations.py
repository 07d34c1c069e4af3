"""The schema is created only by Alembic migrations, and they match the code's metadata exactly."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from typer.testing import CliRunner

from orbit.cli.main import app
from orbit_store.db import create_store_engine
from orbit_store.pulse.views.bookkeeping import BOOKKEEPING_CHECKS
from orbit_store.recovery.verify import verify
from orbit_store.schema import metadata
from orbit_store.upgrade import migrate

runner = CliRunner()


def _tables(url: str) -> set[str]:
    engine = create_store_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_migrate_creates_every_table_and_a_second_run_changes_nothing(any_empty_url: str) -> None:
    first = runner.invoke(app, ["admin", "migrate", "--database-url", any_empty_url])
    assert first.exit_code == 0, first.output
    assert "applied revision" in first.output
    assert _tables(any_empty_url) == set(metadata.tables) | {"alembic_version"}

    second = runner.invoke(app, ["admin", "migrate", "--database-url", any_empty_url])
    assert second.exit_code == 0, second.output
    assert "nothing to do" in second.output


def test_migrate_check_exits_1_when_behind_and_0_when_current(any_empty_url: str) -> None:
    behind = runner.invoke(app, ["admin", "migrate", "--check", "--database-url", any_empty_url])
    assert behind.exit_code == 1
    assert _tables(any_empty_url) == set(), "--check must not create anything"

    assert runner.invoke(app, ["admin", "migrate", "--database-url", any_empty_url]).exit_code == 0
    current = runner.invoke(app, ["admin", "migrate", "--check", "--database-url", any_empty_url])
    assert current.exit_code == 0, current.output


def test_migrated_schema_has_no_drift_from_metadata(any_empty_url: str) -> None:
    engine = create_store_engine(any_empty_url)
    try:
        migrate.upgrade(engine)
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, metadata) == []
    finally:
        engine.dispose()


def test_downgrade_to_base_then_upgrade_again(any_empty_url: str) -> None:
    engine = create_store_engine(any_empty_url)
    try:
        migrate.upgrade(engine)
        migrate.downgrade(engine, "base")
        assert set(sa.inspect(engine).get_table_names()) <= {"alembic_version"}
        report = migrate.upgrade(engine)
        assert report.after == migrate.head_revision()
        assert set(metadata.tables) <= set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_there_is_exactly_one_alembic_head() -> None:
    heads = ScriptDirectory.from_config(migrate.alembic_config()).get_heads()
    assert len(heads) == 1, f"merge the migration heads: {heads}"


def _old_task(conn: sa.Connection, ns: str, task_id: str, state: str, **extra: object) -> None:
    """A tasks row as revisions before 0007 wrote it (no wait path)."""
    now = dt.datetime(2026, 1, 1, 12, 0)
    row = {
        "id": task_id,
        "namespace": ns,
        "queue": "default",
        "handler": "h",
        "params": "{}",
        "state": state,
        "state_version": 1,
        "priority": 0,
        "available_at": now,
        "created_at": now,
        "updated_at": now,
        "max_attempts": 3,
        "attempts_used": 0,
        "backoff_initial_ms": 1000,
        "backoff_max_ms": 300000,
        "backoff_multiplier": 2.0,
        "lease_seconds": 30,
        "safety": "safe",
        "concurrency_limit": 1,
        "cancel_requested": False,
        **extra,
    }
    columns = ", ".join(row)
    conn.execute(sa.text(f"INSERT INTO tasks ({columns}) VALUES (:{', :'.join(row)})"), row)


def test_0007_puts_existing_rows_on_their_paths_and_counts_them(any_empty_url: str) -> None:
    """The data conversion of migration 0007: existing WAITING tasks land on their wait path,
    live attempts keep their permits and free permits go to blocked tasks in priority order,
    quotas get their counters, duplicate live sessions of one worker name are closed."""
    engine = create_store_engine(any_empty_url)
    ns, now, later = "old", dt.datetime(2026, 1, 1, 12, 0), dt.datetime(2999, 1, 1)
    try:
        migrate.upgrade(engine, "0006")
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO namespaces VALUES ('old', :now)"), {"now": now})
            conn.execute(
                sa.text(
                    "INSERT INTO execution_gates VALUES ('gate', 'old', 'wf', 'x', 0, 2, :n, :n)"
                ),
                {"n": now},
            )
            conn.execute(
                sa.text("INSERT INTO concurrency_keys VALUES ('old', 'k', :n)"), {"n": now}
            )
            _old_task(conn, ns, "ready", "WAITING")
            _old_task(conn, ns, "future", "WAITING", available_at=later)
            _old_task(conn, ns, "gated", "WAITING", gate_id="gate")
            for name, priority in (("key-second", 5), ("key-first", 1)):
                _old_task(
                    conn,
                    ns,
                    name,
                    "WAITING",
                    concurrency_key="k",
                    concurrency_limit=2,
                    priority=priority,
                )
            _old_task(
                conn,
                ns,
                "leased",
                "LEASED",
                concurrency_key="k",
                current_attempt_id="a1",
                state_version=2,
                attempts_used=1,
            )
            conn.execute(
                sa.text(
                    "INSERT INTO task_attempts (id, task_id, namespace, generation, token_hash, "
                    "state, leased_at, lease_expires_at) VALUES ('a1', 'leased', 'old', 2, 'x', "
                    "'LEASED', :n, :later)"
                ),
                {"n": now, "later": later},
            )
            conn.execute(
                sa.text(
                    "INSERT INTO concurrency_permits VALUES "
                    "('p1', 'old', 'k', 0, 'leased', 'a1', :n)"
                ),
                {"n": now},
            )
            conn.execute(
                sa.text(
                    "INSERT INTO quotas (id, namespace, name, queue, max_waiting, source, "
                    "spec_generation, created_at, updated_at) VALUES "
                    "('q1', 'old', 'q', '*', 100, 'api', 1, :n, :n)"
                ),
                {"n": now},
            )
            for session, generation in (("s1", 1), ("s2", 2)):
                conn.execute(
                    sa.text(
                        "INSERT INTO worker_sessions (id, namespace, worker_name, generation, "
                        "state, queues, created_at, renewed_at, expires_at) VALUES "
                        "(:id, 'old', 'w', :g, 'ACTIVE', :queues, :n, :n, :later)"
                    ),
                    {"id": session, "g": generation, "n": now, "later": later, "queues": '["q"]'},
                )
        migrate.upgrade(engine)
        with engine.connect() as conn:
            paths = dict(conn.execute(sa.text("SELECT id, wait_path FROM tasks")).all())
            quota = conn.execute(sa.text("SELECT waiting, running FROM quotas")).one()
            live = (
                conn.execute(sa.text("SELECT id FROM worker_sessions WHERE state = 'ACTIVE'"))
                .scalars()
                .all()
            )
            report = verify(conn, ns)
        assert paths == {
            "ready": "READY",
            "future": "SCHEDULED",
            "gated": "BLOCKED_GATE",
            "key-first": "READY",  # limit 2 (the largest declared), one held by the lease
            "key-second": "BLOCKED_KEY",
            "leased": None,
        }
        assert tuple(quota) == (5, 1)
        assert live == ["s2"], "the newest live session of a worker name stays"
        # (the rows above have no history events: only the engine's bookkeeping is checked)
        found = {name: c.violations for name, c in report.checks.items() if c.violations}
        assert not set(found) & set(BOOKKEEPING_CHECKS), found
    finally:
        engine.dispose()
