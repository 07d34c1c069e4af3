"""Acceptance check, driven from outside as an operator would (the `orbit` CLI and HTTP only):
submissions carrying NaN, Infinity, -Infinity or 1e400 are refused with 4xx while valid
submissions sent at the same time — in the same namespace and in another — are all accepted,
and the server logs no "database unavailable" meanwhile.

It makes a fresh database, migrates it (`orbit admin migrate`), issues two tokens (`orbit admin
token create`), starts `orbit server` on a free port and, for ``--seconds``, runs
``--valid-threads`` threads of valid submissions and ``--poison-threads`` threads of
non-JSON-number submissions in namespace A, and ``--other-threads`` threads of valid ones in
namespace B. It prints the answers by kind and exits 1 when any rule was broken.

Usage: ``.venv/bin/python bench/tasks/nan_beside_valid.py [--database-url URL] [--seconds 10]``
(the URL's database is dropped and created; default on the local MariaDB).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import sqlalchemy as sa
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[2]
ORBIT = str(Path(sys.executable).with_name("orbit"))
DEFAULT_URL = "mysql+pymysql://root@127.0.0.1:3306/orbit_accept_nan"
#: What the poison threads send as a param: Python's json accepts each; JSON has none of them.
POISON = ("NaN", "Infinity", "-Infinity", "1e400")


def fresh_database(url: str) -> None:
    parsed = make_url(url)
    server = sa.create_engine(parsed.set(database=""), isolation_level="AUTOCOMMIT")
    with server.connect() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{parsed.database}`"))
        conn.execute(sa.text(f"CREATE DATABASE `{parsed.database}` CHARACTER SET utf8mb4"))
    server.dispose()


def orbit(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run([ORBIT, *args], env=env, capture_output=True, text=True, check=True)
    return done.stdout


def token(namespace: str, env: dict[str, str]) -> str:
    printed = orbit("admin", "token", "create", "-n", namespace, "-r", "submit", env=env)
    return re.findall(r"\S+", printed)[-1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit("orbit server exited; see its log")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("orbit server did not become ready")


class Submitters:
    """Threads submitting until ``stop``; answers counted by (kind, status)."""

    def __init__(self, url: str) -> None:
        self.url, self.stop = url, threading.Event()
        self.counts: collections.Counter[tuple[str, int | str]] = collections.Counter()
        self._lock = threading.Lock()

    def run(self, kind: str, namespace: str, token: str, poison: bool) -> None:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        path = f"{self.url}/v1/namespaces/{namespace}/tasks"
        values = itertools.cycle(POISON) if poison else (str(n) for n in itertools.count())
        with httpx.Client(headers=headers, timeout=60) as http:
            while not self.stop.is_set():
                body = (
                    f'{{"handler": "accept.h", "idempotency_key": "{uuid.uuid4()}", '
                    f'"params": {{"x": {next(values)}}}}}'
                )
                try:
                    status: int | str = http.post(path, content=body).status_code
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                with self._lock:
                    self.counts[(kind, status)] += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("ORBIT_BENCH_URL", DEFAULT_URL))
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--valid-threads", type=int, default=12)
    parser.add_argument("--poison-threads", type=int, default=2)
    parser.add_argument("--other-threads", type=int, default=2)
    args = parser.parse_args()

    fresh_database(args.database_url)
    env = {**os.environ, "ORBIT_DATABASE_URL": args.database_url}
    orbit("admin", "migrate", env=env)
    tokens = {ns: token(ns, env) for ns in ("accept-a", "accept-b")}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.NamedTemporaryFile("w+b", suffix=".log", delete=False) as log:
        server = subprocess.Popen(
            [ORBIT, "server", "--port", str(port)], env=env, stdout=log, stderr=log, cwd=ROOT
        )
    try:
        wait_ready(url, server)
        submitters = Submitters(url)
        plan = (
            [("valid A", "accept-a", False)] * args.valid_threads
            + [("poison A", "accept-a", True)] * args.poison_threads
            + [("valid B", "accept-b", False)] * args.other_threads
        )
        threads = [
            threading.Thread(target=submitters.run, args=(kind, ns, tokens[ns], poison))
            for kind, ns, poison in plan
        ]
        for thread in threads:
            thread.start()
        time.sleep(args.seconds)
        submitters.stop.set()
        for thread in threads:
            thread.join(120)
    finally:
        server.terminate()
        server.wait(30)
    logged = Path(log.name).read_text(errors="replace")
    return report(submitters.counts, logged.count("database unavailable"), args, log.name)


def report(
    counts: collections.Counter[tuple[str, int | str]],
    unavailable: int,
    args: argparse.Namespace,
    log: str,
) -> int:
    print(
        f"{args.seconds:g} s: {args.valid_threads} valid + {args.poison_threads} poison threads "
        f"in namespace A, {args.other_threads} valid threads in namespace B"
    )
    for (kind, status), count in sorted(counts.items(), key=str):
        print(f"  {kind:9} {status!s:>16}: {count:6d}")
    print(f'  server log lines "database unavailable": {unavailable} ({log})')
    broken = [
        f"{kind} answered {status} ({count} times)"
        for (kind, status), count in counts.items()
        if (kind.startswith("valid") and status != 201)
        or (kind.startswith("poison") and not (isinstance(status, int) and 400 <= status < 500))
    ]
    if unavailable:
        broken.append(f'{unavailable} "database unavailable" log lines')
    if not any(kind.startswith("poison") for kind, _ in counts):
        broken.append("no poison submission was sent")
    for line in broken:
        print(f"BROKEN: {line}")
    print("PASS" if not broken else "FAIL")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
