"""A timer set in this process wakes the Weave timer loop: a short sleep ends at its moment, not
at the loop's next poll. The loop polls every 30 s here, so a sleep of a fraction of a second
that ends well within that shows the wake (a start, or a step's outcome applied by the inbox
loop, sets the timer) and the loop's wait for the next timer (the wake finds it not yet due).
The app runs in process on a MariaDB database of the test's own, so its timer loop fires no one
else's timers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from orbit.api.app import engine_loops
from orbit.engines import weave_inbox, weave_timers
from orbit.engines.loop import EngineLoop
from orbit_store.db import create_store_engine

from .conftest import Api
from .test_weave_wake import _leases, _report, _session

#: The loop's poll: far longer than any wait below, so only a wake ends a sleep in time.
TIMER_INTERVAL = 30.0
#: How long a test waits for the workflow to end (generous, still far below the poll).
PATIENCE = 10.0

NAP = {"steps": [{"name": "nap", "sleep": {"seconds": 0.3}}]}
WORK_THEN_NAP = {
    "steps": [
        {"name": "work", "task": {"handler": "shop.echo"}},
        {"name": "nap", "dependsOn": ["work"], "sleep": {"seconds": 0.3}},
    ]
}


@pytest.fixture
def own_api(migrated_database: Callable[[], str]) -> Iterator[Api]:
    engine = create_store_engine(migrated_database())
    yield Api(engine, roles=("submit", "work", "review", "admin"), timer_interval=TIMER_INTERVAL)
    engine.dispose()


@pytest.fixture
def flows(own_api: Api) -> Iterator[TestClient]:
    with TestClient(own_api.app) as client:
        client.headers["Authorization"] = f"Bearer {own_api.token}"
        for name, spec in (("nap", NAP), ("work-then-nap", WORK_THEN_NAP)):
            body = {"name": name, "spec": spec}
            published = client.post(f"{_base(own_api)}/workflow-definitions", json=body)
            assert published.status_code == 201, published.text
        yield client


@pytest.fixture
def weave_loops(own_api: Api) -> Iterator[None]:
    """The app's inbox and timer loops, running; returns once the timer loop has passed once
    (found no timer, so it waits its whole poll unless woken)."""
    loops = {loop.name: loop for loop in engine_loops(own_api.app.state.ctx)}
    timer_loop, inbox_loop = loops[weave_timers.LOOP], loops[weave_inbox.LOOP]
    first_pass = _on_first_pass(timer_loop)
    for loop in (timer_loop, inbox_loop):
        loop.start()
    try:
        assert first_pass.wait(PATIENCE)
        yield
    finally:
        for loop in (timer_loop, inbox_loop):
            loop.stop()


def _on_first_pass(loop: EngineLoop) -> threading.Event:
    passed, run_pass = threading.Event(), loop.run_pass

    def counted() -> Any:
        try:
            return run_pass()
        finally:
            passed.set()

    loop.run_pass = counted
    return passed


def _base(api: Api) -> str:
    return f"/v1/namespaces/{api.namespace}"


def _state_within(http: TestClient, api: Api, workflow_id: str, wanted: str) -> str:
    """The workflow's state once it is ``wanted``, or its last state after PATIENCE."""
    give_up = time.monotonic() + PATIENCE
    while True:
        state = str(http.get(f"{_base(api)}/workflows/{workflow_id}").json()["state"])
        if state == wanted or time.monotonic() > give_up:
            return state
        time.sleep(0.05)


def test_a_started_sleep_ends_without_waiting_for_the_timer_loops_poll(
    own_api: Api, flows: TestClient, weave_loops: None
) -> None:
    started = flows.post(f"{_base(own_api)}/workflows", json={"definition": "nap"})
    assert started.status_code == 201, started.text

    assert _state_within(flows, own_api, started.json()["id"], "SUCCEEDED") == "SUCCEEDED"


def test_a_sleep_after_a_step_ends_without_waiting_for_the_timer_loops_poll(
    own_api: Api, flows: TestClient, weave_loops: None
) -> None:
    started = flows.post(f"{_base(own_api)}/workflows", json={"definition": "work-then-nap"})
    assert started.status_code == 201, started.text
    session = _session(flows, own_api, "shop.echo")
    (step,) = _leases(flows, session, "shop.echo")["leases"]

    reported = _leases(flows, session, "shop.echo", reports=[_report(step)])["reports"]

    assert [r["outcome_status"] for r in reported] == ["applied"]
    assert _state_within(flows, own_api, started.json()["id"], "SUCCEEDED") == "SUCCEEDED"
