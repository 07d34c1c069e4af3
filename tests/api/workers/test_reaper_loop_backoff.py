"""The server's reaper loop keeps one backoff across its passes (ORBIT.md §3 "Per-item isolation
in loops"): a lease whose lapse fails is tried once, counted in
``orbit_engine_item_errors_total{loop="reaper"}`` and left alone by the next pass while it backs
off; the other leases lapse (seed §3). The app runs in-process on MariaDB, on a database of its
own: the server's loop passes over every namespace, and the shared database holds every other
test's lapsed leases."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

import pytest

from orbit.api.app import engine_loops
from orbit.engines import reaper
from orbit_store.db import create_store_engine, run_transaction
from orbit_store.pulse.leases import expiry
from orbit_store.pulse.workers.sessions import revoke_session

from ..conftest import Api
from .test_reports_on_lease import _session, _started, _state


@pytest.fixture
def own_api(migrated_database: Callable[[], str]) -> Iterator[Api]:
    engine = create_store_engine(migrated_database())
    yield Api(engine)
    engine.dispose()


def test_the_servers_reaper_loop_backs_a_failing_lease_off_across_passes(
    own_api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = own_api
    session = _session(api, "lost")
    bad, good = _started(api, session, 2)
    run_transaction(  # its leases lapse at once
        api.engine,
        functools.partial(
            revoke_session, namespace=api.namespace, session_id=session, reason="pod gone"
        ),
    )
    real = expiry.lapse_attempt

    def failing(conn: object, lapsed: expiry.LapsedAttempt) -> object:
        if lapsed.attempt_id == bad["attempt_id"]:
            raise RuntimeError("a defect in this one lease")
        return real(conn, lapsed)  # type: ignore[arg-type]

    monkeypatch.setattr(expiry, "lapse_attempt", failing)
    ctx = api.app.state.ctx
    (loop,) = [loop for loop in engine_loops(ctx) if loop.name == reaper.LOOP]

    for _ in range(2):
        loop.run_pass()

    errors = ctx.metrics.registry.get_sample_value(
        "orbit_engine_item_errors_total", {"loop": reaper.LOOP}
    )
    assert errors == 1, "the second pass left the failing lease alone"
    assert _state(api, good["task_id"]) == "WAITING"
    assert _state(api, bad["task_id"]) in ("LEASED", "RUNNING")
