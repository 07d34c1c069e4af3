"""Seed §2: daily application rights cannot rewrite audit history — enforced by MariaDB itself."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator

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
