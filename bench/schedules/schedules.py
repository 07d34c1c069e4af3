"""Scheduler spike, measured from outside: N every-minute schedules due in the same second, decided
by one real `orbit server` process with its default settings.

In a database of its own (migrated), the bench starts ``orbit server`` as a user runs it (a
``mysql://`` URL: the C driver where it is installed; ``ORBIT_DATABASE_URL``, nothing else set),
then declares N every-minute schedules (``* * * * *``, UTC, no start time, spread over namespaces
of 100) through the store's create path, the one the API's ``POST …/schedules`` calls (one
transaction per namespace: the API's 10,000 requests would measure the HTTP layer instead). Each
schedule's first instant is the minute boundary after its creation, so once the declaration is
done the next boundary (at least 10 s away) has all N due in the same second: the worst case.
The server decides M such boundaries; the bench reads the outcome from the rows:

- fire lateness (``recorded_at - scheduled_at`` of FIRED occurrences, database time): p50, p99,
  max; anything not FIRED (MISSED or SKIPPED: nothing, while the server keeps up);
- the server's CPU (the whole process: every loop) and MariaDB's (all of mariadbd, other users'
  queries included on a shared machine) per decided instant, from /proc, summed over each
  boundary's window: from 2 s before it until its last instant is decided;
- the plan MariaDB chooses for the scheduler's scan (``ix_schedules_due``).

Then, with the server stopped, the same work in plain SQL in the same run
(``bench/schedules/raw_schedules.py``: copies of the same schedules, ``--raw-processes`` processes,
started and connected before their first boundary is set, so their start-up is not counted),
measured the same way.

``--profile`` runs the server under ``bench/profiling/profiled_server.py`` (a wall-clock sampler
of the scheduler's threads; its summary is printed). Usage:
``.venv/bin/python bench/schedules/schedules.py [--schedules 2000] [--minutes 2] [--no-raw]
[--profile]``.
The database is dropped afterwards (``--keep`` keeps it and the server's log).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import sqlalchemy as sa
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.baselines.raw_sql import connect  # the repository root, added above
from bench.schedules import raw_schedules
from bench.tasks.e2e import ORBIT, ROOT, cpu_seconds, free_port, mariadb_pid
from orbit.engines.scheduler import WORKERS
from orbit_store.db import create_store_engine, run_transaction
from orbit_store.schedules.declare import create_schedule
from orbit_store.schedules.model import ScheduleSpec, TaskTemplate
from orbit_store.schema import schedule_occurrences
from orbit_store.upgrade import migrate

SERVER_URL = "mysql+pymysql://root@127.0.0.1:3306/"
PER_NAMESPACE = 100
PROFILER = ROOT / "bench" / "profiling" / "profiled_server.py"
SCAN_EXPLAIN = (
    "EXPLAIN SELECT namespace, id FROM schedules WHERE next_fire_at <= UTC_TIMESTAMP(6) "
    "ORDER BY next_fire_at LIMIT 1000"
)


def create_database(server_url: str) -> str:
    name = f"orbit_bench_sched_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(make_url(server_url).set(database=None))
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    admin.dispose()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    admin = sa.create_engine(make_url(url).set(database=None))
    with admin.begin() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{make_url(url).database}`")
    admin.dispose()


def declare_schedules(engine: sa.Engine, count: int) -> None:
    """``count`` every-minute schedules, ``PER_NAMESPACE`` per namespace (one tx each)."""
    for first in range(0, count, PER_NAMESPACE):
        namespace = f"bench-{first // PER_NAMESPACE:04d}"

        def work(conn: sa.Connection, first: int = first, namespace: str = namespace) -> None:
            for i in range(first, min(first + PER_NAMESPACE, count)):
                spec = ScheduleSpec(
                    name=f"s{i:05d}", cron="* * * * *", task=TaskTemplate(handler="bench.tick")
                )
                create_schedule(conn, namespace, spec, actor="bench")

        run_transaction(engine, work)


def percentile(values: list[float], q: int) -> float:
    return (
        statistics.quantiles(values, n=100, method="inclusive")[q - 1]
        if len(values) > 1
        else values[0]
    )


def next_minute(lead: float) -> float:
    """The first minute boundary at least ``lead`` seconds away."""
    now = time.time() + lead
    return now - now % 60 + 60


def at(moment: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(moment, dt.UTC).replace(tzinfo=None)


def boundaries(
    engine: sa.Engine, table: sa.Table, begin: float, minutes: int, per_minute: int, pids: list[int]
) -> tuple[float, float, str]:
    """Watch ``minutes`` boundaries from ``begin``: each from 2 s before it until its
    ``per_minute`` instants are decided (or a minute later). The processes' and MariaDB's CPU
    summed over those windows only (the idle time between boundaries is not counted), and the
    load average at the first and the last."""
    db_pid, cpu, db, loads = mariadb_pid(), 0.0, 0.0, []
    query = sa.select(sa.func.coalesce(sa.func.sum(table.c.instants), 0))
    for minute in range(minutes):
        boundary = begin + 60 * minute
        time.sleep(max(boundary - 2 - time.time(), 0))
        loads.append(os.getloadavg()[0])
        before = [cpu_seconds(p) for p in [*pids, *([db_pid] if db_pid else [])]]
        instant = at(boundary)
        decided = query.where(table.c.scheduled_at == instant)
        while time.time() < boundary + 60:
            with engine.connect() as conn:
                if int(conn.execute(decided).scalar_one()) >= per_minute:
                    break
            time.sleep(0.2)
        after = [cpu_seconds(p) for p in [*pids, *([db_pid] if db_pid else [])]]
        cpu += sum(a - b for a, b in zip(after[: len(pids)], before[: len(pids)], strict=True))
        db += sum(after[len(pids) :]) - sum(before[len(pids) :]) if db_pid else float("nan")
        loads.append(os.getloadavg()[0])
    return cpu, db, f"load {loads[0]:.1f} → {loads[-1]:.1f}"


def report(
    engine: sa.Engine,
    label: str,
    table: sa.Table,
    first: dt.datetime,
    minutes: int,
    expected: int,
    cpu: tuple[float, float, str],
    cpu_label: str,
) -> None:
    last = first + dt.timedelta(minutes=minutes - 1)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(
                table.c.status, table.c.scheduled_at, table.c.recorded_at, table.c.instants
            ).where(table.c.scheduled_at >= first, table.c.scheduled_at <= last)
        ).all()
    fired = [r for r in rows if r.status == "FIRED"]
    lateness = sorted((r.recorded_at - r.scheduled_at).total_seconds() for r in fired)
    decided = sum(r.instants for r in rows)
    print(f"--- {label} ({cpu[2]})")
    print(
        f"instants {first:%H:%M}..{last:%H:%M}Z: {len(fired)} fired of {expected}, "
        f"{decided - len(fired)} missed or skipped, {expected - decided} undecided"
    )
    if lateness:
        p50, p99 = percentile(lateness, 50), percentile(lateness, 99)
        print(
            f"fire lateness: min {lateness[0]:.2f}s  p50 {p50:.2f}s  p99 {p99:.2f}s  "
            f"max {lateness[-1]:.2f}s"
        )
    each = max(decided, 1)
    print(
        f"{cpu_label} CPU {cpu[0]:.1f}s = {1000 * cpu[0] / each:.2f} ms per decided instant; "
        f"database CPU {cpu[1]:.1f}s = {1000 * cpu[1] / each:.2f} ms"
    )


def start_server(url: str, log: Path, profile: bool) -> subprocess.Popen[bytes]:
    """`orbit server` with its defaults on a free port (under the sampler with ``profile``),
    once ready."""
    port = free_port()
    command = [sys.executable, str(PROFILER)] if profile else [ORBIT]
    env = {**os.environ, "ORBIT_DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    env["ORBIT_BENCH_PROFILE_OUT"] = str(log.with_suffix(".profile"))
    with log.open("ab") as out:  # own session: Ctrl-C reaches only the bench
        proc = subprocess.Popen(
            [*command, "server", "--port", str(port)],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    for _ in range(600):
        if proc.poll() is not None:
            raise RuntimeError(f"orbit server exited with {proc.returncode}; see {log}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc
        time.sleep(0.1)
    raise RuntimeError("orbit server not ready after 60s")


def orbit_cell(engine: sa.Engine, url: str, args: argparse.Namespace, logs: Path) -> None:
    server_url = make_url(url).set(drivername="mysql").render_as_string(hide_password=False)
    log = logs / "server.log"
    proc = start_server(server_url, log, args.profile)
    try:
        started = time.time()
        declare_schedules(engine, args.schedules)
        print(f"declared {args.schedules} every-minute schedules in {time.time() - started:.1f}s")
        begin = next_minute(10)
        first, expected = at(begin), args.schedules * args.minutes
        cpu = boundaries(
            engine, schedule_occurrences, begin, args.minutes, args.schedules, [proc.pid]
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    label = "Orbit: one `orbit server`, defaults"
    report(engine, label, schedule_occurrences, first, args.minutes, expected, cpu, "server")
    if args.profile:
        print("--- the server's scheduler threads, wall-clock samples (profiled_server.py)")
        print(log.with_suffix(".profile").read_text())


def raw_cell(engine: sa.Engine, url: str, args: argparse.Namespace) -> None:
    database = make_url(url).database
    raw = connect(url, database)
    raw_schedules.make_tables(raw)
    ctx = multiprocessing.get_context("spawn")
    ready, out, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(target=raw_schedules.raw_process, args=(url, database, 1.0, ready, stop, out))
        for _ in range(args.raw_processes)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get()
    begin = next_minute(10)  # set once every process polls: their start-up is not counted
    first = at(begin)
    raw_schedules.fall_due(raw, first)
    raw.close()
    table = sa.Table("raw_schedule_occurrences", sa.MetaData(), autoload_with=engine)
    pids = [p.pid for p in procs if p.pid is not None]
    cpu = boundaries(engine, table, begin, args.minutes, args.schedules, pids)
    expected = args.schedules * args.minutes
    stop.set()
    for _ in procs:
        out.get()
    for p in procs:
        p.join()
    report(
        engine,
        f"plain SQL: {args.raw_processes} processes, same run",
        table,
        first,
        args.minutes,
        expected,
        cpu,
        "processes'",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--server-url", default=os.environ.get("ORBIT_BENCH_SERVER_URL", SERVER_URL))
    add("--schedules", type=int, default=2_000)
    add("--minutes", type=int, default=2, help="boundaries measured")
    add("--raw-processes", type=int, default=WORKERS)
    add("--no-raw", action="store_true", help="measure Orbit only")
    add("--profile", action="store_true", help="sample the server's scheduler threads")
    add("--keep", action="store_true", help="keep the database and the server's log")
    args = parser.parse_args()

    url = create_database(args.server_url)
    engine = create_store_engine(url)
    logs = Path(tempfile.mkdtemp(prefix="orbit-bench-sched-"))
    print("the machine is shared: other engineers' work runs beside this measurement")
    try:
        migrate.upgrade(engine)
        orbit_cell(engine, url, args, logs)
        if not args.no_raw:
            raw_cell(engine, url, args)
        with engine.connect() as conn:
            plan = conn.exec_driver_sql(SCAN_EXPLAIN).mappings().one()
        print(f"scan plan: key={plan['key']} type={plan['type']} rows={plan['rows']}")
    finally:
        engine.dispose()
        if args.keep:
            print(f"kept database {make_url(url).database} and {logs}")
        else:
            drop_database(url)
            shutil.rmtree(logs, ignore_errors=True)


if __name__ == "__main__":
    main()
