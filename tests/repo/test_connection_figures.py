"""The connection figures operators size MySQL by: what the docs say one
server replica may open is what its engine's pool allows."""

from __future__ import annotations

import re
from pathlib import Path

import sqlalchemy as sa

from orbit.cli.processes.server_processes import ENGINE_POOL_SIZE
from orbit_store.db import create_store_engine

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations"
TIMES = "\u00d7"  # the multiplication sign the docs write


def configured_pool() -> tuple[int, int]:
    """(warm, overflow) of the pool every Orbit process builds for MySQL; no connection made."""
    engine = create_store_engine("mysql+pymysql://u@127.0.0.1:1/none")
    pool = engine.pool
    assert isinstance(pool, sa.pool.QueuePool)
    return pool.size(), pool._max_overflow


def doc(name: str) -> str:
    return " ".join((DOCS / name).read_text().split())


def test_the_server_docs_quote_the_pool_that_the_code_configures() -> None:
    warm, overflow = configured_pool()
    text = doc("server.md")
    found = re.search(
        r"each server process's pool keeps up to (\d+) connections \((\d+) warm plus (\d+) "
        r"overflow",
        text,
    )
    assert found, "docs/operations/server.md no longer states the pool size"
    assert [int(g) for g in found.groups()] == [warm + overflow, warm, overflow]
    assert f"replicas {TIMES} {warm + overflow}" in text


def test_the_server_docs_quote_the_supervising_processs_pool() -> None:
    """With --workers N the engine loops run in the supervisor, on a smaller pool of its own."""
    text = doc("server.md")
    found = re.search(
        r"plus up to (\d+) for the supervising process \((\d+) warm \+ (\d+) overflow\)", text
    )
    assert found, "docs/operations/server.md no longer states the supervisor's pool"
    assert [int(g) for g in found.groups()] == [
        2 * ENGINE_POOL_SIZE,
        ENGINE_POOL_SIZE,
        ENGINE_POOL_SIZE,
    ]


def test_the_install_guide_sizes_max_connections_by_the_same_figure() -> None:
    warm, overflow = configured_pool()
    text = doc("install.md")
    found = re.search(
        r"keep a pool of up to (\d+) connections \((\d+) kept warm \+ (\d+) overflow\); with "
        r"`server.workers: 1` \(the default\) size `max_connections` for "
        rf"`\(server.replicas \+ 1\) {TIMES} (\d+)`",
        text,
    )
    assert found, "docs/operations/install.md no longer states the pool size"
    assert [int(g) for g in found.groups()] == [warm + overflow, warm, overflow, warm + overflow]
