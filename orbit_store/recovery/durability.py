"""The seed's durable baseline (§7): ``innodb_flush_log_at_trx_commit=1`` and, when the binary log
is on, ``sync_binlog=1``. Read at start-up; the caller decides how loudly to warn."""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa


@dataclass(frozen=True)
class DurabilityReport:
    settings: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def durable(self) -> bool:
        return not self.problems


def check_durability(conn: sa.Connection) -> DurabilityReport:
    """Return the relevant server settings and what falls short of the durable baseline.

    SQLite (``orbit dev``) is reported as durable: it runs with ``synchronous=FULL`` in WAL mode.
    """
    if conn.dialect.name == "sqlite":
        return DurabilityReport(settings={"synchronous": "FULL"})
    row = conn.execute(
        sa.text("SELECT @@innodb_flush_log_at_trx_commit, @@log_bin, @@sync_binlog")
    ).one()
    flush, log_bin, sync_binlog = (str(v) for v in row)
    settings = {
        "innodb_flush_log_at_trx_commit": flush,
        "log_bin": "ON" if log_bin in ("1", "ON") else "OFF",
        "sync_binlog": sync_binlog,
    }
    problems = []
    if flush != "1":
        problems.append(
            f"innodb_flush_log_at_trx_commit={flush}: a crash can lose acknowledged commits "
            "(tasks accepted, results confirmed). Set it to 1."
        )
    if settings["log_bin"] == "ON" and sync_binlog != "1":
        problems.append(
            f"sync_binlog={sync_binlog} with the binary log on: a crash can lose commits a "
            "replica or point-in-time recovery depends on. Set it to 1."
        )
    return DurabilityReport(settings=settings, problems=problems)
