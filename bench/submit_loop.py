"""One-by-one submissions (``Client.submit``) against a real `orbit server`: throughput, request
latency p50/p99 and the server's CPU per submission, beside the raw-SQL submit (one INSERT of the
task and one of its event per transaction, from as many processes) measured in the same run.

Each value of ``--submit-transactions`` (the server's group-commit width: submission transactions
one process runs at once, docs/operations/server.md) gets a server of its own on the same
database. With fewer transactions than concurrent submitters, the submissions that arrive during
a transaction share the next one; with as many, each has its own (no grouping).
Usage: ``.venv/bin/python bench/submit_loop.py [--tasks 2000] [--submitters 8]
[--submit-transactions 1 2 8]`` (see --help).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.e2e import (  # the repository root, added above (run as a script)
    DEFAULT_URL,
    ORBIT,
    ROOT,
    connect,
    cpu_seconds,
    pct,
    raw_part,
    say,
    server_sql,
)
from orbit_sdk import Client

NS = "bench"


def submit_part(base: str, token: str, start_at: float, n: int) -> list[float]:
    """One submitting process: ``n`` calls, one after the other; each call's seconds."""
    took = []
    with Client(base, token=token, timeout=30) as client:
        time.sleep(max(start_at - time.time(), 0))
        for i in range(n):
            began = time.perf_counter()
            client.submit(NS, handler="bench.noop", params={"i": i})
            took.append(time.perf_counter() - began)
    return took


def start_server(url: str, width: int, log: Path) -> tuple[Any, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [ORBIT, "server", "--port", str(port), "--submit-transactions", str(width)]
    env = {**os.environ, "ORBIT_DATABASE_URL": url, "ORBIT_LOG_LEVEL": "WARNING"}
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"orbit server exited; see {log}")
        time.sleep(0.1)
    raise RuntimeError("orbit server not ready after 30 s")


def orbit_run(pool: Any, args: argparse.Namespace, token: str, width: int, log: Path) -> Any:
    proc, base = start_server(args.database_url, width, log)
    try:
        share = args.tasks // args.submitters
        pool.starmap(submit_part, [(base, token, time.time(), 20)] * args.submitters)  # warm
        cpu, start_at = cpu_seconds(proc.pid), time.time() + 1.0
        parts = pool.starmap(submit_part, [(base, token, start_at, share)] * args.submitters)
        wall = time.time() - start_at
        cpu = cpu_seconds(proc.pid) - cpu
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
    took = sorted(t for part in parts for t in part)
    n = len(took)
    return n / wall, pct(took, 0.5) * 1000, pct(took, 0.99) * 1000, cpu * 1000 / n


def raw_run(pool: Any, args: argparse.Namespace) -> float:
    start_at, k = time.time() + 1.0, args.submitters
    shares = [(args.database_url, "raw", start_at, range(j, args.tasks, k)) for j in range(k)]
    ended = max(p[1] for p in pool.starmap(raw_part, shares, chunksize=1))
    return args.tasks / (ended - start_at)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--database-url", default=DEFAULT_URL, help="created (dropped first), dropped at the end")
    add("--tasks", type=int, default=2000, help="submissions per run (default 2000)")
    add("--submitters", type=int, default=8, help="submitting processes (Orbit and raw)")
    add("--submit-transactions", type=int, nargs="+", default=[1, 2, 8], metavar="N")
    args = parser.parse_args()
    pool = multiprocessing.get_context("fork").Pool(
        args.submitters, signal.signal, (signal.SIGINT, signal.SIG_IGN)
    )
    name, logs = make_url(args.database_url).database, Path(tempfile.mkdtemp(prefix="orbit-sl-"))
    server_sql(args.database_url, f"DROP DATABASE IF EXISTS `{name}`")
    server_sql(args.database_url, f"CREATE DATABASE `{name}`")
    try:
        run = [ORBIT, "admin", "migrate", "--database-url", args.database_url]
        subprocess.run(run, check=True, capture_output=True, cwd=ROOT)
        create = ["admin", "token", "create", "-n", NS, "-r", "submit", "--name", "bench"]
        token = subprocess.run(
            [ORBIT, *create, "--database-url", args.database_url],
            check=True,
            capture_output=True,
            text=True,
            cwd=ROOT,
        ).stdout.strip()
        db = connect(args.database_url, name, autocommit=True)
        with db.cursor() as cur:
            for table in ("tasks", "task_events"):
                cur.execute(f"CREATE TABLE raw_{table} LIKE {table}")
        say(f"{args.submitters} submitting processes, {args.tasks} submissions per run; load: ")
        say(f"  {os.getloadavg()}; server logs in {logs}")
        rows = []
        for width in args.submit_transactions:
            orbit = orbit_run(pool, args, token, width, logs / f"server-{width}.log")
            raw = raw_run(pool, args)
            rows.append((width, orbit, raw))
            rate, p50, p99, cpu = orbit
            say(
                f"  --submit-transactions {width}: {rate:6,.0f}/s, p50 {p50:5.1f} ms, p99 "
                f"{p99:5.1f} ms, server CPU {cpu:.2f} ms/submit; raw {raw:6,.0f}/s "
                f"(ratio {rate / raw:.2f}x)"
            )
    finally:
        pool.terminate()
        server_sql(args.database_url, f"DROP DATABASE IF EXISTS `{name}`")


if __name__ == "__main__":
    main()
