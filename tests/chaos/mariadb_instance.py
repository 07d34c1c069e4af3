"""A MariaDB server the test owns: its own datadir and port, started with ``mariadbd`` and
crashed (SIGKILL) and restarted at will. Never the shared server on :3306, which other tests
and helpers use."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

INSTALL_DB = shutil.which("mariadb-install-db")
MARIADBD = shutil.which("mariadbd") or (
    "/usr/sbin/mariadbd" if os.path.exists("/usr/sbin/mariadbd") else None
)


class InstanceUnavailable(RuntimeError):
    """This machine cannot start a private MariaDB (binaries missing, or it would not start)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class MariaDBInstance:
    root: Path
    durable: bool = True
    port: int = field(default_factory=_free_port)
    process: subprocess.Popen[bytes] | None = None
    crashes: int = 0

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    def url(self, database: str) -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.port}/{database}"

    def install(self) -> None:
        if INSTALL_DB is None or MARIADBD is None:
            raise InstanceUnavailable("mariadb-install-db or mariadbd is not installed")
        self.root.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [
                INSTALL_DB,
                "--no-defaults",
                f"--datadir={self.datadir}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--user=root",
            ],
            capture_output=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise InstanceUnavailable(f"mariadb-install-db failed: {done.stderr[-2000:]!r}")

    def start(self, timeout: float = 60.0) -> None:
        assert MARIADBD is not None
        durability = (
            [
                "--innodb-flush-log-at-trx-commit=1",
                f"--log-bin={self.datadir}/binlog",
                "--sync-binlog=1",
            ]
            if self.durable
            else ["--innodb-flush-log-at-trx-commit=0", "--skip-log-bin"]
        )
        log = (self.root / "mariadbd.log").open("ab")
        self.process = subprocess.Popen(
            [
                MARIADBD,
                "--no-defaults",
                f"--datadir={self.datadir}",
                f"--port={self.port}",
                f"--socket={self.root}/mariadbd.sock",
                f"--pid-file={self.root}/mariadbd.pid",
                "--bind-address=127.0.0.1",
                "--user=root",
                "--skip-name-resolve",
                "--innodb-buffer-pool-size=64M",
                "--max-connections=500",
                *durability,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise InstanceUnavailable(
                    f"mariadbd exited: {(self.root / 'mariadbd.log').read_text()[-2000:]}"
                )
            try:
                pymysql.connect(host="127.0.0.1", port=self.port, user="root").close()
                return
            except pymysql.err.OperationalError:
                if time.monotonic() > deadline:
                    raise InstanceUnavailable("mariadbd did not accept connections") from None
                time.sleep(0.1)

    def crash(self) -> None:
        """SIGKILL: no shutdown, InnoDB recovers from its redo log at the next start."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)
        self.crashes += 1

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def admin(self) -> pymysql.connections.Connection:
        return pymysql.connect(host="127.0.0.1", port=self.port, user="root", autocommit=True)

    def create_database(self, name: str) -> str:
        with self.admin() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        return self.url(name)


def started_instance(root: Path, *, durable: bool = True) -> MariaDBInstance:
    instance = MariaDBInstance(root, durable=durable)
    instance.install()
    instance.start()
    return instance
