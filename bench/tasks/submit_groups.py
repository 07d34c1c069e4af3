"""What a group of one-by-one submissions costs the store, by group size: the CPU this
process spends on one ``submit_group`` transaction (C driver or PyMySQL, real MariaDB) and per
request in it, and the statements it sends.

The server groups concurrent ``POST …/tasks`` requests into one transaction
(``orbit/api/concurrency/submit_groups.py``); how large the groups get decides most of a
submission's store cost, and a second server process halves them (each groups only the requests it
receives; docs/performance.md). Sizes are alternated round by round, so a machine whose speed drifts
hits each alike; medians are printed.
Usage: ``.venv/bin/python bench/tasks/submit_groups.py [--sizes 1 2 4 8 16] [--rounds 150]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.tasks.batch_paths import (  # the repository root, added above (run as a script)
    _database,
    count_statements,
)
from orbit_store.db import run_transaction
from orbit_store.namespaces import ensure_namespace
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.pulse.submit_group import submit_group

DEFAULT_URL = "mysql+mysqldb://root@127.0.0.1:3306/orbit_bench_submit_groups"
NS = "bench"


def _requests(size: int) -> list[SubmitRequest]:
    """``size`` new submissions, each under its own key (as the SDK sends them)."""
    return [
        SubmitRequest(
            namespace=NS,
            queue="default",
            handler="bench.noop",
            params={"i": i},
            idempotency_key=uuid.uuid4().hex,
        )
        for i in range(size)
    ]


def _one_group(engine: sa.Engine, size: int, sent: list[int]) -> tuple[float, float, int]:
    """CPU seconds, wall seconds and statements of one group's transaction."""
    requests, before = _requests(size), sent[0]
    cpu, wall = time.process_time(), time.perf_counter()
    answers = submit_group(engine, NS, requests)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    refused = [a for a in answers if isinstance(a, Exception)]
    if refused:
        raise SystemExit(f"a submission was refused: {refused[0]!r}")
    return cpu, wall, sent[0] - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_URL, help="created, dropped at the end")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--rounds", type=int, default=150)
    args = parser.parse_args()
    engine = _database(args.database_url)
    sent = count_statements(engine)
    try:
        run_transaction(engine, lambda conn: ensure_namespace(conn, NS, _db_now(conn)))
        for size in args.sizes:  # warm: connections, statement caches
            _one_group(engine, size, sent)
        runs: dict[int, list[tuple[float, float, int]]] = {size: [] for size in args.sizes}
        for _ in range(args.rounds):
            for size in args.sizes:
                runs[size].append(_one_group(engine, size, sent))
        print(f"{engine.dialect.driver}, {args.rounds} rounds; load average {os.getloadavg()}")
        print("size  CPU/group  CPU/request  wall/group  statements/group (COMMIT not counted)")
        for size in args.sizes:
            cpu = statistics.median(r[0] for r in runs[size]) * 1e6
            wall = statistics.median(r[1] for r in runs[size]) * 1e6
            statements = statistics.median(r[2] for r in runs[size])
            per = cpu / size
            print(f"{size:4}  {cpu:6.0f} µs  {per:8.0f} µs  {wall:7.0f} µs  {statements:5.0f}")
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{engine.url.database}`"))
        engine.dispose()


def _db_now(conn: sa.Connection) -> Any:
    return conn.execute(sa.text("SELECT UTC_TIMESTAMP(6)")).scalar_one()


if __name__ == "__main__":
    main()
