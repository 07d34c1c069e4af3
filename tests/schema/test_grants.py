"""Seed §2: daily application rights cannot rewrite audit history — enforced by MariaDB itself."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from orbit.cli.main import app
from orbit_store.ids import new_id
from orbit_store.schema import audit_log, namespaces

runner = CliRunner()


@pytest.fixture
def app_user(mariadb_url: str, mariadb_engine: sa.Engine) -> Iterator[tuple[str, str]]:
    user, password = f"orbit_app_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    result = runner.invoke(
        app,
        [
            "admin",
            "grants",
            "--database-url",
            mariadb_url,
            "--app-user",
            user,
            "--password",
            password,
            "--apply",
        ],
    )
    assert result.exit_code == 0, result.output
    yield user, password
    with mariadb_engine.begin() as conn:
        conn.exec_driver_sql("DROP USER IF EXISTS %s@%s", (user, "%"))


def _engine_as(mariadb_url: str, user: str, password: str) -> sa.Engine:
    url = make_url(mariadb_url).set(username=user, password=password)
    return sa.create_engine(url)


def test_grants_print_shows_statements_without_the_password(mariadb_url: str) -> None:
    result = runner.invoke(
        app,
        [
            "admin",
            "grants",
            "--database-url",
            mariadb_url,
            "--app-user",
            "orbit_app",
            "--password",
            "s3cret-value",
            "--print",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "GRANT SELECT, INSERT ON" in result.output and "`audit_log`" in result.output
    assert "s3cret-value" not in result.output


def test_app_user_can_append_audit_rows_but_not_update_or_delete_them(
    mariadb_url: str, app_user: tuple[str, str]
) -> None:
    engine = _engine_as(mariadb_url, *app_user)
    row_id = new_id()
    now = dt.datetime(2026, 1, 1)
    try:
        with engine.begin() as conn:
            conn.execute(
                namespaces.insert().prefix_with("IGNORE").values(name="audit", created_at=now)
            )
            conn.execute(
                audit_log.insert().values(
                    id=row_id,
                    namespace="audit",
                    at=now,
                    actor="tester",
                    action="review",
                    resource_kind="task",
                    resource_id="t1",
                    reason="grant test",
                )
            )
        with engine.connect() as conn:
            assert conn.execute(
                sa.select(audit_log.c.reason).where(audit_log.c.id == row_id)
            ).scalar_one()
            with pytest.raises(sa.exc.OperationalError, match="1142"):
                conn.execute(audit_log.update().where(audit_log.c.id == row_id).values(reason="x"))
            conn.rollback()
            with pytest.raises(sa.exc.OperationalError, match="1142"):
                conn.execute(audit_log.delete().where(audit_log.c.id == row_id))
            conn.rollback()
            # Ordinary runtime tables stay writable for the same user.
            conn.execute(
                namespaces.update().where(namespaces.c.name == "audit").values(created_at=now)
            )
            conn.rollback()
    finally:
        engine.dispose()


# --- the migration hook: `orbit admin migrate --runtime-database-url` -------------------------


@pytest.fixture
def runtime_user(mariadb_engine: sa.Engine) -> Iterator[tuple[str, str]]:
    user, password = f"orbit_rt_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    yield user, password
    with mariadb_engine.begin() as conn:
        conn.exec_driver_sql("DROP USER IF EXISTS %s@%s", (user, "%"))


def _url_as(mariadb_url: str, user: str, password: str) -> str:
    return (
        make_url(mariadb_url)
        .set(username=user, password=password)
        .render_as_string(hide_password=False)
    )


def _migrate(mariadb_url: str, runtime_url: str) -> Any:
    return runner.invoke(
        app,
        ["admin", "migrate", "--database-url", mariadb_url, "--runtime-database-url", runtime_url],
    )


def test_migrate_creates_the_servers_user_so_it_can_append_audit_rows_but_never_rewrite_them(
    mariadb_url: str, runtime_user: tuple[str, str]
) -> None:
    """Seed §2 and invariant 8 in a default install: the chart's hook runs migrate as the DDL
    user and names the server's URL; the server's user is created with least privilege."""
    result = _migrate(mariadb_url, _url_as(mariadb_url, *runtime_user))
    assert result.exit_code == 0, result.output
    assert f"'{runtime_user[0]}'@'%': audit_log is append-only for it" in result.output
    assert runtime_user[1] not in result.output
    test_app_user_can_append_audit_rows_but_not_update_or_delete_them(mariadb_url, runtime_user)
    again = _migrate(mariadb_url, _url_as(mariadb_url, *runtime_user))
    assert again.exit_code == 0, again.output


def test_migrate_refuses_a_server_user_that_is_the_migration_user(mariadb_url: str) -> None:
    result = _migrate(mariadb_url, mariadb_url)
    assert result.exit_code == 1
    assert "is the migration user itself" in result.output


def test_migrate_fails_when_the_servers_user_can_still_rewrite_audit_rows(
    mariadb_url: str, mariadb_engine: sa.Engine, runtime_user: tuple[str, str]
) -> None:
    """Grants only add: a user that already holds UPDATE on the whole database keeps it. The
    hook checks what the user can actually do and fails the install, saying why."""
    user, password = runtime_user
    database = make_url(mariadb_url).database
    with mariadb_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE USER '{user}'@'%%' IDENTIFIED BY '{password}'")
        conn.exec_driver_sql(f"GRANT ALL ON `{database}`.* TO '{user}'@'%%'")
    result = _migrate(mariadb_url, _url_as(mariadb_url, user, password))
    assert result.exit_code == 1
    assert f"'{user}' can still UPDATE, DELETE audit_log" in result.output
    assert "SHOW GRANTS" in result.output
