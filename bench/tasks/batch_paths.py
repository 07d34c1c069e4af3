"""Server CPU and statements per item of batched starts and completions: the set
path (``batches.start_attempts`` / ``complete_attempts``) beside the item-by-item path
(``set_based=False``, what every batch took before) and beside plain PyMySQL doing the same
rows' writes per item — measured in the same run, one process, over a real MariaDB.

For each batch size B: submit, claim B tasks, then start them in one transaction and complete
them (success) in another, first item by item and then through the set path (alternating, so
the machine's load hits both alike). CPU is this process's CPU time (``time.process_time``) —
what the server spends in Python per item, the figure the drain is bound by — and wall time.
Usage: ``.venv/bin/python bench/tasks/batch_paths.py [--rounds 30] [--sizes 1 4 16 50]``.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from orbit_store.db import create_store_engine, run_transaction
from orbit_store.pulse import batches, service
from orbit_store.pulse.batch import items as batch_items
from orbit_store.pulse.claim.claim import claim_tasks
from orbit_store.pulse.model import LeaseGrant, Outcome
from orbit_store.pulse.submit.accept import SubmitRequest
from orbit_store.pulse.workers.sessions import register_session
from orbit_store.upgrade import migrate

DEFAULT_URL = "mysql+pymysql://root@127.0.0.1:3306/orbit_bench_batches"


def _database(url: str) -> sa.Engine:
    parsed = make_url(url)
    server = sa.create_engine(parsed.set(database=""), isolation_level="AUTOCOMMIT")
    with server.connect() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{parsed.database}`"))
        conn.execute(sa.text(f"CREATE DATABASE `{parsed.database}`"))
    server.dispose()
    engine = create_store_engine(url)
    migrate.upgrade(engine)
    return engine


def count_statements(engine: sa.Engine) -> list[int]:
    """A one-item list holding how many statements ``engine`` has sent since this call."""
    sent = [0]

    def count(*_: Any) -> None:
        sent[0] += 1

    sa.event.listen(engine, "before_cursor_execute", count)
    return sent


def _grants(engine: sa.Engine, ns: str, session: str, size: int) -> list[LeaseGrant]:
    request = SubmitRequest(namespace=ns, queue="default", handler="bench.noop", params={})
    for _ in range(size):
        service.submit(engine, request)
    claim = functools.partial(
        claim_tasks, namespace=ns, queues_=["default"], limit=size, worker_session_id=session
    )
    grants: list[LeaseGrant] = run_transaction(engine, claim)
    return grants


def _measure(
    engine: sa.Engine, statements: list[int], work: Callable[[sa.Connection], Any]
) -> tuple[float, float, int]:
    before, cpu, wall = statements[0], time.process_time(), time.perf_counter()
    run_transaction(engine, work)
    return time.process_time() - cpu, time.perf_counter() - wall, statements[0] - before


def _cell(engine: sa.Engine, ns: str, session: str, size: int, set_based: bool, sent: list[int]):
    grants = _grants(engine, ns, session, size)
    starts = [batch_items.StartItem(g.attempt_id, g.token) for g in grants]
    reports = [
        batch_items.CompletionItem(g.attempt_id, g.token, Outcome.SUCCEEDED, {"ok": 1})
        for g in grants
    ]
    start = functools.partial(
        batches.start_attempts, namespace=ns, items=starts, set_based=set_based
    )
    complete = functools.partial(
        batches.complete_attempts, namespace=ns, items=reports, set_based=set_based
    )
    return _measure(engine, sent, start), _measure(engine, sent, complete)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 50])
    args = parser.parse_args()
    engine = _database(args.database_url)
    sent = count_statements(engine)
    ns = f"bench-{uuid.uuid4().hex[:8]}"
    session = run_transaction(
        engine,
        functools.partial(register_session, namespace=ns, worker_name="bench", queues=["default"]),
    ).id
    print(f"load average before: {os.getloadavg()}")
    print("size  path        start CPU/item  complete CPU/item  statements/item s+c  wall/item s+c")
    for size in args.sizes:
        figures: dict[bool, list[tuple[Any, Any]]] = {True: [], False: []}
        for _ in range(args.rounds):
            for set_based in (False, True):
                figures[set_based].append(_cell(engine, ns, session, size, set_based, sent))
        for set_based in (False, True):
            runs = figures[set_based]
            start_cpu = statistics.median(s[0] for s, _ in runs) / size * 1e3
            done_cpu = statistics.median(c[0] for _, c in runs) / size * 1e3
            stmts = statistics.median((s[2] + c[2]) / size for s, c in runs)
            wall = statistics.median((s[1] + c[1]) / size for s, c in runs) * 1e3
            name = "set path" if set_based else "per item"
            print(
                f"{size:4}  {name:10}  {start_cpu:10.2f} ms  {done_cpu:13.2f} ms"
                f"  {stmts:14.1f}  {wall:10.2f} ms"
            )
    print(f"load average after: {os.getloadavg()}")
    engine.dispose()


if __name__ == "__main__":
    main()
