"""Start-up reads the durable baseline of seed §7 and says what falls short."""

from __future__ import annotations

import logging

import pytest
import sqlalchemy as sa

from orbit.database import open_engine
from orbit_store.durability import check_durability


def test_durability_report_reads_the_server_settings(mariadb_engine: sa.Engine) -> None:
    with mariadb_engine.connect() as conn:
        report = check_durability(conn)
        flush = conn.execute(sa.text("SELECT @@innodb_flush_log_at_trx_commit")).scalar_one()
    assert report.settings["innodb_flush_log_at_trx_commit"] == str(flush)
    assert report.durable == (not report.problems)
    if str(flush) != "1":
        assert any("innodb_flush_log_at_trx_commit" in p for p in report.problems)


def test_open_engine_warns_when_a_session_is_not_durable(
    mariadb_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Make the check see flush=2 by patching the report source, not the database.
    from orbit import database
    from orbit_store.durability import DurabilityReport

    monkeypatch.setattr(
        database,
        "check_durability",
        lambda conn: DurabilityReport(
            {"innodb_flush_log_at_trx_commit": "2"}, ["flush=2: set it to 1"]
        ),
    )
    with caplog.at_level(logging.WARNING, logger="orbit.database"):
        open_engine(mariadb_url).dispose()
    assert "not durable" in caplog.text and "set it to 1" in caplog.text
