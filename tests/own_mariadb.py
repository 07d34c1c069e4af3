"""A MariaDB server a test owns: its own datadir, socket and port, started with the options the
test names, stopped and deleted afterwards. For server-wide settings (durability) and crashes,
which must never be tried on the shared test server."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

INSTALL_DB = shutil.which("mariadb-install-db")
SERVER = shutil.which("mariadbd") or (
    "/usr/sbin/mariadbd" if Path("/usr/sbin/mariadbd").exists() else None
)


def free_port() -> int:
    """A TCP port of 127.0.0.1 nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class OwnMariaDB:
    """One private ``mariadbd`` process (root, no password, 127.0.0.1 only)."""

    directory: Path
    port: int
    process: subprocess.Popen[bytes]
    options: tuple[str, ...] = ()
    crashes: int = 0

    @property
    def url(self) -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.port}/"

    @property
    def error_log(self) -> Path:
        return self.directory / "error.log"

    def stop(self, *, remove: bool = True) -> None:
        """SIGTERM (a clean shutdown), then the datadir is deleted unless ``remove=False``."""
        self._terminate()
        if remove:
            shutil.rmtree(self.directory, ignore_errors=True)

    def crash(self) -> None:
        """SIGKILL: no shutdown; InnoDB recovers from its redo log at the next start."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)
        self.crashes += 1

    def restart(self, timeout: float = 60.0) -> None:
        """Start ``mariadbd`` again on the same datadir, port and options (after a crash)."""
        self.process = _launch(self.directory, self.port, self.options)
        _wait_until_serving(self, timeout)

    def _terminate(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def available() -> bool:
    return INSTALL_DB is not None and SERVER is not None


def start_own_mariadb(directory: Path, *options: str, timeout: float = 60.0) -> OwnMariaDB:
    """Initialise a datadir under ``directory`` and start ``mariadbd`` on it with ``options``
    (e.g. ``--innodb-flush-log-at-trx-commit=2``); returns once it accepts connections."""
    assert INSTALL_DB is not None and SERVER is not None, "MariaDB server binaries not installed"
    _install_db(directory / "data", timeout)
    port = free_port()
    own = OwnMariaDB(directory, port, _launch(directory, port, options), options)
    _wait_until_serving(own, timeout)
    return own


def _install_db(data: Path, timeout: float) -> None:
    """A fresh datadir. Tried twice: once in CI it failed while another private server of the
    suite was starting, without a word kept; what it printed is now part of the error."""
    assert INSTALL_DB is not None
    user = ["--user=root"] if _running_as_root() else []
    command = [
        INSTALL_DB,
        "--no-defaults",
        f"--datadir={data}",
        "--auth-root-authentication-method=normal",
        "--skip-test-db",
        *user,
    ]
    for _attempt in (1, 2):
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode == 0:
            return
        shutil.rmtree(data, ignore_errors=True)
    raise RuntimeError(
        f"mariadb-install-db exited with {done.returncode} twice:\n"
        f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    )


def _launch(directory: Path, port: int, options: tuple[str, ...]) -> subprocess.Popen[bytes]:
    assert SERVER is not None
    user = ["--user=root"] if _running_as_root() else []
    return subprocess.Popen(
        [
            SERVER,
            "--no-defaults",
            f"--datadir={directory / 'data'}",
            f"--port={port}",
            "--bind-address=127.0.0.1",
            f"--socket={directory / 'mariadb.sock'}",
            f"--pid-file={directory / 'mariadb.pid'}",
            f"--log-error={directory / 'error.log'}",
            "--skip-name-resolve",
            *user,
            *options,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _running_as_root() -> bool:
    return os.geteuid() == 0


def _wait_until_serving(own: OwnMariaDB, timeout: float) -> None:
    engine = sa.create_engine(own.url)
    deadline = time.monotonic() + timeout
    try:
        while True:
            if own.process.poll() is not None:
                log = own.error_log.read_text() if own.error_log.exists() else ""
                raise AssertionError(f"mariadbd exited: {log[-2000:]}")
            try:
                with engine.connect() as conn:
                    conn.execute(sa.text("SELECT 1"))
                return
            except sa.exc.OperationalError:
                if time.monotonic() > deadline:
                    own.stop(remove=False)  # keep error.log for the reader
                    raise
                time.sleep(0.2)
    finally:
        engine.dispose()
