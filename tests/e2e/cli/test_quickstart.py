"""`orbit dev` as a process on the embedded SQLite backend, no MySQL involved: manifests at
start, a busy port, webhooks to this machine, Ctrl-C. The README's quick starts themselves are
typed as printed by test_docs_as_printed.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from ..conftest import ORBIT, ROOT, free_port, wait_until

pytestmark = pytest.mark.slow

# Generous: `orbit dev` imports the whole app and migrates a SQLite file before it answers, slow
# on a loaded 2-core machine; the wait ends as soon as it is ready.
DEV_START = 90


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without ORBIT_ variables (the dev server's own are printed)."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("ORBIT_")}, **extra}


def start_dev(
    tmp_path: Path, port: int, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """`orbit dev` on ``port`` with its database in ``tmp_path``."""
    return subprocess.Popen(
        [ORBIT, "dev", "--db", str(tmp_path / "dev.db"), "--port", str(port), *args],
        cwd=ROOT,
        env=env or clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _ready(server: str, process: subprocess.Popen[bytes]) -> bool:
    if process.poll() is not None:
        raise AssertionError(process.stderr.read().decode() if process.stderr else "exited")
    try:
        return httpx.get(f"{server}/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_dev_applies_manifests_from_a_folder_at_start(tmp_path: Path) -> None:
    import sqlalchemy as sa

    port = free_port()
    db = tmp_path / "dev.db"
    dev = start_dev(tmp_path, port, "--manifests", str(ROOT / "examples" / "manifests"))
    try:
        wait_until(lambda: _ready(f"http://127.0.0.1:{port}", dev), timeout=DEV_START)
    finally:
        dev.send_signal(signal.SIGTERM)
        dev.wait(30)
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        names = conn.exec_driver_sql("SELECT namespace, name FROM queues").all()
    engine.dispose()
    assert [tuple(r) for r in names] == [("dev", "checkout")]  # the manifests name none
    assert "Queue/dev/checkout configured" in (dev.stderr.read().decode() if dev.stderr else "")


def test_dev_on_a_busy_port_says_so_in_one_line_and_exits_5(tmp_path: Path) -> None:
    import socket

    env = {k: v for k, v in os.environ.items() if not k.startswith("ORBIT_")}
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = subprocess.run(
            [ORBIT, "dev", "--db", str(tmp_path / "dev.db"), "--port", str(port)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 5 and done.stdout == ""  # no export line for a server never up
    assert done.stderr.splitlines() == [
        f"error: 127.0.0.1:{port} is already in use; is another `orbit dev` running? "
        "Stop it or choose another --port."
    ]
    assert not (tmp_path / "dev.db").exists()


def test_dev_delivers_webhooks_to_a_receiver_on_this_machine(tmp_path: Path) -> None:
    """`orbit dev` allows loopback (a default `orbit server` refuses it), with the same
    secrets layout: DIR/<namespace>/<secret_ref>."""
    from orbit_sdk import Client

    from ..receiver import Receiver, new_secret

    receiver = Receiver(new_secret()).start()
    secrets = tmp_path / "webhook-secrets"
    (secrets / "dev").mkdir(parents=True)
    (secrets / "dev" / "hook").write_text(receiver.secret)
    port = free_port()
    dev = start_dev(tmp_path, port, env=clean_env(ORBIT_WEBHOOK_SECRETS_DIR=str(secrets)))
    server = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _ready(server, dev), timeout=DEV_START)
        token = (tmp_path / "dev-token").read_text().strip()
        with Client(server, token=token) as client:
            client.put_subscription(
                "dev", "local", mode="push", url=receiver.url, secret_ref="hook"
            )
            task = client.submit("dev", handler="x.later", delay=3600)
            client.cancel("dev", task.id, reason="an outcome for the webhook")
        wait_until(lambda: receiver.processed, timeout=30)
        assert receiver.rejected_signatures == 0
    finally:
        dev.send_signal(signal.SIGTERM)
        dev.wait(30)
        receiver.stop()


def test_a_bad_webhook_allow_entry_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    env = clean_env()
    done = subprocess.run(
        [
            ORBIT,
            "dev",
            "--db",
            str(tmp_path / "dev.db"),
            "--port",
            str(free_port()),
            "--webhook-allow",
            "not a host!",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "'not a host!' is neither a CIDR" in done.stderr


def test_ctrl_c_stops_orbit_dev_before_its_workers_long_poll_would_end(tmp_path: Path) -> None:
    """Ctrl-C on `orbit dev`: its worker's long poll (60 s here) is answered at once, so the
    worker drains cleanly and the process exits 0 before the poll would have ended by itself,
    never cut off by uvicorn's graceful-shutdown limit. No duration is measured
    (tests/api/workers/test_long_poll.py shows the answer itself)."""
    import signal as signals

    from orbit_sdk import Client

    (tmp_path / "patient_worker.py").write_text(
        "from orbit_sdk import Worker\n"
        "worker = Worker(lease_wait_seconds=60)\n"
        "@worker.handler('patient.noop')\n"
        "def noop(ctx, params):\n"
        "    return None\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORBIT_")}
    worker = ["--worker", "patient_worker:worker"]
    port = free_port()
    server = f"http://127.0.0.1:{port}"
    dev = subprocess.Popen(
        [ORBIT, "dev", "--db", str(tmp_path / "dev.db"), "--port", str(port), *worker],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert dev.stderr is not None
        for line in dev.stderr:
            if re.search(r"worker \S+ serving", line):
                break
        # One task through the worker: its lease loop is live, its next long poll waiting.
        token = (tmp_path / "dev-token").read_text().strip()
        with Client(server, token=token) as client:
            task = client.submit("dev", handler="patient.noop")
            assert client.wait("dev", task.id, timeout=60).state == "SUCCEEDED"
        dev.send_signal(signals.SIGINT)  # Ctrl-C
        assert dev.wait(45) == 0
        said = dev.stderr.read()
        # Not cut off: a poll still waiting when uvicorn's graceful shutdown ran out used to be
        # cancelled (a traceback, and a 500 to the worker's poll).
        assert "Traceback" not in said and "leasing failed" not in said, said
        assert re.search(r"worker \S+ stopped", said), said
    finally:
        if dev.poll() is None:
            dev.kill()
            dev.wait(30)
