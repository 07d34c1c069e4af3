"""The chaos harness's MariaDB: a server the test owns (``own_mariadb``: its own datadir and
port), configured durable like production, crashed (SIGKILL) and restarted at will. Never the
shared server on :3306, which other tests and helpers use."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pymysql
import sqlalchemy as sa
from own_mariadb import OwnMariaDB, available, start_own_mariadb

DURABLE = (
    "--innodb-flush-log-at-trx-commit=1",
    "--log-bin=binlog",
    "--sync-binlog=1",
)
NOT_DURABLE = ("--innodb-flush-log-at-trx-commit=0", "--skip-log-bin")
# Room for two replicas' pools, the workers' ledger connections and the fault injector.
SIZING = ("--innodb-buffer-pool-size=64M", "--max-connections=500")


class InstanceUnavailable(RuntimeError):
    """This machine cannot start a private MariaDB (binaries missing, or it would not start)."""


@dataclass
class MariaDBInstance:
    own: OwnMariaDB

    @property
    def port(self) -> int:
        return self.own.port

    @property
    def crashes(self) -> int:
        return self.own.crashes

    def url(self, database: str) -> str:
        return f"{self.own.url}{database}"

    def crash(self) -> None:
        """SIGKILL: no shutdown, InnoDB recovers from its redo log at the next start."""
        self.own.crash()

    def start(self, timeout: float = 60.0) -> None:
        """Start again after a crash, on the same datadir and port."""
        try:
            self.own.restart(timeout)
        except sa.exc.OperationalError as exc:
            raise InstanceUnavailable(f"mariadbd did not accept connections: {exc}") from exc

    def stop(self) -> None:
        self.own.stop()

    def admin(self) -> pymysql.connections.Connection:
        return pymysql.connect(host="127.0.0.1", port=self.port, user="root", autocommit=True)

    def create_database(self, name: str) -> str:
        with self.admin() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        return self.url(name)


def started_instance(root: Path, *, durable: bool = True) -> MariaDBInstance:
    if not available():
        raise InstanceUnavailable("mariadb-install-db or mariadbd is not installed")
    options = (*(DURABLE if durable else NOT_DURABLE), *SIZING)
    try:
        return MariaDBInstance(start_own_mariadb(root, *options))
    except (subprocess.CalledProcessError, AssertionError, sa.exc.OperationalError) as exc:
        raise InstanceUnavailable(f"mariadbd would not start: {exc}") from exc
