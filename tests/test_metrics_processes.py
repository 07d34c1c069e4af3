"""/metrics of `orbit server --workers N` counts for the whole pod: counters and
histograms incremented in several processes — and the transaction retries, which the store
counts in memory — are summed by whichever process answers the scrape. Real processes, real
prometheus-client multiprocess files; no server needed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

COUNT = """
import sqlalchemy as sa
from orbit.metrics.server import Metrics
from orbit_store.db import TRANSACTION_RETRIES
metrics = Metrics(sa.create_engine("sqlite://"))
metrics.submissions.labels("ns", "default", "new").inc(3)
metrics.dispatch_latency.labels("ns", "default").observe(0.02)
TRANSACTION_RETRIES.add("deadlock")
"""

SCRAPE = """
import sqlalchemy as sa
from prometheus_client import generate_latest
from orbit.metrics.server import Metrics
print(generate_latest(Metrics(sa.create_engine("sqlite://")).exposition).decode())
"""

OWN_SCRAPE = """
from prometheus_client import generate_latest
assert metrics.exposition is metrics.registry
print(generate_latest(metrics.exposition).decode())
"""


def run(code: str, metrics_dir: Path) -> str:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_scrape_sums_what_every_process_of_the_pod_counted(tmp_path: Path) -> None:
    for _ in range(3):  # three processes, each gone before the scrape (counts persist)
        run(COUNT, tmp_path)
    scraped = run(SCRAPE, tmp_path)
    assert 'orbit_tasks_submitted_total{namespace="ns",queue="default",result="new"} 9.0' in (
        scraped
    )
    assert 'orbit_dispatch_latency_seconds_count{namespace="ns",queue="default"} 3.0' in scraped
    assert 'orbit_db_transaction_retries_total{reason="deadlock"} 3.0' in scraped


def test_without_the_directory_a_process_serves_only_its_own_registry() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    done = subprocess.run(
        [sys.executable, "-c", COUNT + OWN_SCRAPE],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert 'orbit_tasks_submitted_total{namespace="ns",queue="default",result="new"} 3.0' in (
        done.stdout
    )
