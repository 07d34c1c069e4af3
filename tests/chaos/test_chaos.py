"""Proof under faults: a running Orbit — server replicas behind a balancer, worker
processes, a MariaDB of the harness's own — takes a mixed load while a seeded injector throws
every kind of fault at it; afterwards the checker judges the whole history.

Short form (CI): about a minute of faults, at least 50 of them, every kind. Long form:
``pytest tests/chaos -m chaos --chaos-minutes 20 --chaos-seed 7 -s``.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from .checker import judge, unsettled_tasks
from .cluster import Cluster
from .faults import WEIGHTS, Injector
from .load import Load
from .mariadb_instance import InstanceUnavailable

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

SHORT_FAULT_SECONDS = float(os.environ.get("CHAOS_SHORT_SECONDS", "38"))
SHORT_MIN_FAULTS = 50


def shared_server() -> str:
    """host:port of the test MariaDB (the ledger's home; never faulted)."""
    url = make_url(
        os.environ.get("ORBIT_TEST_DATABASE_URL", "mysql+pymysql://root@127.0.0.1:3306/")
    )
    return f"{url.host or '127.0.0.1'}:{url.port or 3306}"


def test_orbit_keeps_its_invariants_under_seeded_faults(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    minutes = request.config.getoption("chaos_minutes", default=None)
    seed = request.config.getoption("chaos_seed", default=None)
    seed = seed if seed is not None else random.SystemRandom().randrange(1, 10**6)
    fault_seconds = minutes * 60 if minutes else SHORT_FAULT_SECONDS
    min_faults = SHORT_MIN_FAULTS if not minutes else 0
    print(f"\nchaos seed {seed}: {fault_seconds:.0f}s of faults (replay with --chaos-seed {seed})")

    # A long run in the background (nohup ignores SIGINT) stops cleanly on SIGTERM: the cluster
    # it started is torn down by the finally below.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    t0 = time.monotonic()
    cluster = Cluster(tmp_path, shared_server())
    try:
        cluster.start()
    except InstanceUnavailable as exc:
        cluster.stop(drop_ledger=True)
        pytest.skip(f"the harness cannot start its own MariaDB: {exc}")
    clean = False
    try:
        assert cluster.balancer is not None
        load = Load(cluster.balancer.url, cluster.token, seed)
        load.setup()
        load.start(rate=3.0 if minutes else 4.0)
        injector = Injector(cluster, seed)
        began = time.monotonic()
        injector.run(
            until=began + fault_seconds,
            min_faults=min_faults,
            hard_stop=began + fault_seconds * 1.5 + 10,
        )
        t_faults = time.monotonic()
        load.stop()
        settle_deadline = time.monotonic() + (300 if minutes else 60)
        while unsettled_tasks(cluster) and time.monotonic() < settle_deadline:
            time.sleep(1)
        t_settled = time.monotonic()
        verdict = judge(cluster, load.acked, injector.log)
        print(
            f"timing: setup {began - t0:.0f}s, faults {t_faults - began:.0f}s, "
            f"settle {t_settled - t_faults:.0f}s, judge {time.monotonic() - t_settled:.0f}s"
        )
        print(f"chaos seed {seed} verdict ({'clean' if verdict.clean else 'VIOLATIONS'}):")
        print(verdict.summary())
        missing = set(WEIGHTS) - set(verdict.counts["faults"])
        if verdict.counts["faults_total"] < SHORT_MIN_FAULTS or missing:
            print("decisions:", injector.decisions)
        if injector.errors:
            print("faults not applied:", injector.errors[:10])
        assert verdict.clean, verdict.summary()
        kinds = set(verdict.counts["faults"])
        if not minutes:
            assert verdict.counts["faults_total"] >= SHORT_MIN_FAULTS
        assert kinds == set(WEIGHTS), f"fault kinds never injected: {set(WEIGHTS) - kinds}"
        clean = True
    finally:
        if not clean and os.environ.get("CHAOS_KEEP"):
            print(f"kept for inspection: {cluster.database_url} ledger {cluster.ledger_url}")
        else:
            cluster.stop(drop_ledger=clean or not minutes)
