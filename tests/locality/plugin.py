"""Fixtures that run the namespace-locality check around each test of a suite.

``tests/store`` and ``tests/api`` import :func:`namespace_locality` into their conftest: every
test there runs with the watch installed and fails (at teardown) when a transaction of the
store it caused touched two namespaces or reached rows of no namespace. ``--no-namespace-locality``
turns it off (e.g. to time a test without it)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from .watch import LocalityWatch


@pytest.fixture(scope="session")
def locality_watch(request: pytest.FixtureRequest) -> Iterator[LocalityWatch | None]:
    if request.config.getoption("no_namespace_locality"):
        yield None
        return
    watch = LocalityWatch()
    watch.install()
    try:
        yield watch
    finally:
        watch.uninstall()
        report = os.environ.get("ORBIT_LOCALITY_COUNTS")
        if report:  # bench figures: how the suite's table uses were bounded
            with open(f"{report}.{os.getpid()}.json", "w") as out:
                json.dump({"counts": watch.counts, "sites": watch.sites}, out)


@pytest.fixture(autouse=True)
def namespace_locality(
    request: pytest.FixtureRequest, locality_watch: LocalityWatch | None
) -> Iterator[None]:
    """Fails the test when a store transaction it caused crossed namespaces."""
    if locality_watch is None:
        yield
        return
    locality_watch.test = request.node.nodeid
    seen = len(locality_watch.violations)
    yield
    found = [v for v in locality_watch.violations[seen:] if v.test == request.node.nodeid]
    locality_watch.test = "(between tests)"
    if found:
        pytest.fail(
            "namespace locality (orbit_store/sharding.py):\n"
            + "\n".join(f"  {v.what}" for v in found),
            pytrace=False,
        )
