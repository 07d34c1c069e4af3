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
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.e2e import (  # the repository root, added above (run as a script)
    DEFAULT_URL,
    NS,
    Bench,
    cpu_seconds,
    pct,
    raw_part,
    say,
    server_sql,
)
from orbit_sdk import Client


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


def orbit_run(pool: Any, bench: Bench, token: str, width: int) -> Any:
    """One server with ``--submit-transactions width``: (submits/s, p50 ms, p99 ms, server CPU
    ms per submit)."""
    args = bench.args
    bench.start_server("--submit-transactions", str(width), log=f"server-{width}.log")
    try:
        share, base = args.tasks // args.submitters, bench.base
        pool.starmap(submit_part, [(base, token, time.time(), 20)] * args.submitters)  # warm
        cpu, start_at = cpu_seconds(bench.server.pid), time.time() + 1.0
        parts = pool.starmap(submit_part, [(base, token, start_at, share)] * args.submitters)
        wall = time.time() - start_at
        cpu = cpu_seconds(bench.server.pid) - cpu
    finally:
        bench.stop([bench.server])
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
    parser.set_defaults(server_workers=1, log_level="WARNING")  # what Bench reads
    args = parser.parse_args()
    pool = multiprocessing.get_context("fork").Pool(
        args.submitters, signal.signal, (signal.SIGINT, signal.SIG_IGN)
    )
    name, bench = make_url(args.database_url).database, None
    server_sql(args.database_url, f"DROP DATABASE IF EXISTS `{name}`")
    server_sql(args.database_url, f"CREATE DATABASE `{name}`")
    try:
        bench = Bench(args, Path(tempfile.mkdtemp(prefix="orbit-bench-submit-")))
        bench.orbit("admin", "migrate")
        roles = ("-r", "submit", "--name", "bench")
        token = bench.orbit("admin", "token", "create", "-n", NS, *roles).strip()
        for table in ("tasks", "task_events"):
            bench.query(f"CREATE TABLE raw_{table} LIKE {table}")
        say(f"{args.submitters} submitting processes, {args.tasks} submissions per run; load: ")
        say(f"  {os.getloadavg()}; server logs in {bench.logs}")
        for width in args.submit_transactions:
            rate, p50, p99, cpu = orbit_run(pool, bench, token, width)
            raw = raw_run(pool, args)
            say(
                f"  --submit-transactions {width}: {rate:6,.0f}/s, p50 {p50:5.1f} ms, p99 "
                f"{p99:5.1f} ms, server CPU {cpu:.2f} ms/submit; raw {raw:6,.0f}/s "
                f"(ratio {rate / raw:.2f}x)"
            )
    finally:
        if bench is not None:
            bench.stop(bench.procs)
            bench.db.close()
        pool.terminate()
        server_sql(args.database_url, f"DROP DATABASE IF EXISTS `{name}`")


if __name__ == "__main__":
    main()
