"""One-by-one submissions (``Client.submit``) against a real `orbit server`: throughput, request
latency p50/p99 and the CPU each kind of process spends per submission — the server (with
``--server-workers N``, its HTTP processes too), the local MariaDB, the submitting clients and
the whole machine — beside the raw-SQL submit (one INSERT of the task and one of its event per
transaction, from as many processes) measured in the same run.

Each value of ``--submit-transactions`` (the server's group-commit width: submission transactions
one process runs at once, docs/operations/server.md) and of ``--server-workers`` gets a server of
its own on the same database; with several values of both, every pair is run, and ``--rounds``
repeats the whole list (alternated, so a machine whose speed drifts hits each alike). With fewer
transactions than concurrent submitters, the submissions that arrive during a transaction share
the next one; with as many, each has its own (no grouping).
Usage: ``.venv/bin/python bench/tasks/submit_loop.py [--tasks 2000] [--submitters 8]
[--submit-transactions 1 2 8] [--server-workers 1 2] [--rounds 3]`` (see --help).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import multiprocessing
import os
import resource
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.baselines.raw_sql import make_tables, raw_part  # the repository root, added above
from bench.tasks.e2e import (
    DEFAULT_URL,
    Orbit,
    cpu_seconds,
    free_port,
    mariadb_pid,
    pct,
    say,
    server_sql,
)
from orbit_sdk import Client

NS = "bench"


def submit_part(base: str, token: str, start_at: float, n: int) -> tuple[list[float], float]:
    """One submitting process: ``n`` calls, one after the other; each call's seconds, and the
    CPU seconds the calls cost this process."""
    took = []
    with Client(base, token=token, timeout=30) as client:
        time.sleep(max(start_at - time.time(), 0))
        cpu = _own_cpu()
        for i in range(n):
            began = time.perf_counter()
            client.submit(NS, handler="bench.noop", params={"i": i})
            took.append(time.perf_counter() - began)
        cpu = _own_cpu() - cpu
    return took, cpu


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def machine_busy() -> float:
    """CPU seconds the whole machine has spent busy (not idle, not waiting for I/O)."""
    with open("/proc/stat") as stat:
        ticks = [int(field) for field in stat.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    """``pid`` and its child processes (the HTTP processes of `orbit server --workers N`)."""
    children = []
    for thread in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            children += [int(c) for c in (thread / "children").read_text().split()]
    return [pid, *children]


def start_server(orbit: Orbit, *extra: str, log: str) -> tuple[Any, str]:
    """`orbit server` with ``extra`` options on a free port, once it is ready."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    argv = ["server", "--port", str(port), *extra]
    proc = orbit.spawn(argv, log, ORBIT_DATABASE_URL=orbit.url, ORBIT_LOG_LEVEL="WARNING")
    for _ in range(300):
        if proc.poll() is not None:
            raise RuntimeError(f"orbit server exited with {proc.returncode}; see {log}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return proc, base
        time.sleep(0.1)
    raise RuntimeError("orbit server not ready after 30s")


def orbit_run(pool: Any, orbit: Orbit, token: str, width: int, workers: int) -> dict[str, float]:
    """One server with ``--submit-transactions width`` and ``--workers workers``: submits/s,
    p50 and p99 ms, and CPU ms per submit of the server, MariaDB, the clients, the machine."""
    args = orbit.args
    extra = ["--submit-transactions", str(width)]
    if workers != 1:
        extra += ["--workers", str(workers)]
    server, base = start_server(orbit, *extra, log=f"server-{width}-{workers}.log")
    try:
        share = args.tasks // args.submitters
        pool.starmap(submit_part, [(base, token, time.time(), 20)] * args.submitters)  # warm
        tree, mariadb = process_tree(server.pid), mariadb_pid()
        before = _cpu(tree, mariadb)
        start_at = time.time() + 1.0
        parts = pool.starmap(submit_part, [(base, token, start_at, share)] * args.submitters)
        wall = time.time() - start_at
        after = _cpu(tree, mariadb)
    finally:
        orbit.stop([server])
    took = sorted(t for part, _ in parts for t in part)
    n = len(took)
    per = {k: (after[k] - before[k]) * 1000 / n for k in before}
    per["clients"] = sum(cpu for _, cpu in parts) * 1000 / n
    return per | {"rate": n / wall, "p50": pct(took, 0.5) * 1000, "p99": pct(took, 0.99) * 1000}


def _cpu(server: list[int], mariadb: int | None) -> dict[str, float]:
    return {
        "server": sum(map(cpu_seconds, server)),
        "mariadb": cpu_seconds(mariadb) if mariadb else float("nan"),
        "machine": machine_busy(),
    }


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
    add(
        "--server-workers",
        type=int,
        nargs="+",
        default=[1],
        metavar="N",
        help="orbit server --workers",
    )
    add("--rounds", type=int, default=1, help="the whole list this many times, alternated")
    args = parser.parse_args()
    cells = list(itertools.product(args.submit_transactions, args.server_workers)) * args.rounds
    pool = multiprocessing.get_context("fork").Pool(
        args.submitters, signal.signal, (signal.SIGINT, signal.SIG_IGN)
    )
    name, orbit = make_url(args.database_url).database, None
    server_sql(args.database_url, f"DROP DATABASE IF EXISTS `{name}`")
    server_sql(args.database_url, f"CREATE DATABASE `{name}`")
    try:
        orbit = Orbit(args, Path(tempfile.mkdtemp(prefix="orbit-bench-submit-")))
        orbit.cli("admin", "migrate")
        roles = ("-r", "submit", "--name", "bench")
        token = orbit.cli("admin", "token", "create", "-n", NS, *roles).strip()
        make_tables(orbit.db)
        say(f"{args.submitters} submitting processes, {args.tasks} submissions per run; load: ")
        say(f"  {os.getloadavg()}; server logs in {orbit.logs}")
        for width, workers in cells:
            o = orbit_run(pool, orbit, token, width, workers)
            raw = raw_run(pool, args)
            say(
                f"  --submit-transactions {width} --workers {workers}: {o['rate']:6,.0f}/s, p50 ",
                f"{o['p50']:5.1f} ms, p99 {o['p99']:5.1f} ms; CPU ms/submit: server ",
                f"{o['server']:.2f}, mariadb {o['mariadb']:.2f}, clients {o['clients']:.2f}, ",
                f"machine {o['machine']:.2f} (of {2000 / o['rate']:.2f} it had); raw ",
                f"{raw:6,.0f}/s (ratio {o['rate'] / raw:.2f}x)",
            )
    finally:
        if orbit is not None:
            orbit.stop(orbit.procs)
            orbit.db.close()
        pool.terminate()
        server_sql(args.database_url, f"DROP DATABASE IF EXISTS `{name}`")


if __name__ == "__main__":
    main()
