"""A lease request reads its session's queues and handlers once per process (``claimants``);
whether the session may still lease is decided by every claim, so an ended session is refused
as before."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from orbit.api.concurrency.claimants import Claimants
from orbit_store.db import run_transaction
from orbit_store.pulse.claim.claim import Claimant
from orbit_store.pulse.workers.sessions import close_session

from ..conftest import Api

PROBLEMS = "https://orbit.dev/problems/"


def test_a_session_closed_after_a_lease_is_refused_at_its_next_lease(api: Api) -> None:
    async def scenario() -> tuple[Any, Any]:
        session = await api.session()
        lease = f"/v1/worker-sessions/{session}/lease"
        first = await api.call("POST", lease, {"max_tasks": 1, "wait_seconds": 0})
        await asyncio.to_thread(
            run_transaction,
            api.engine,
            functools.partial(close_session, namespace=api.namespace, session_id=session),
        )
        task_id = await asyncio.to_thread(api.submit)  # something to claim, were it allowed
        refused = await api.call("POST", lease, {"max_tasks": 1, "wait_seconds": 0}, expect=409)
        return first, (refused, task_id)

    first, (refused, _) = asyncio.run(scenario())
    assert first["leases"] == []
    assert refused["type"] == PROBLEMS + "conflict"
    assert "CLOSED" in refused["detail"] and "register a new session" in refused["detail"]
    assert len(api.app.state.ctx.claimants) == 1, "the session's queues were remembered"


def test_an_unknown_session_is_refused_and_not_remembered(api: Api) -> None:
    lease = "/v1/worker-sessions/00000000-0000-0000-0000-000000000000/lease"
    body = {"max_tasks": 1, "wait_seconds": 0}
    refused = asyncio.run(api.call("POST", lease, body, expect=404))
    assert refused["type"] == PROBLEMS + "not-found"
    assert len(api.app.state.ctx.claimants) == 0


def test_the_least_recently_used_session_is_forgotten_beyond_capacity() -> None:
    claimants = Claimants(capacity=2)
    for name in ("a", "b"):
        claimants.put("ns", name, Claimant([name], None))
    assert claimants.get("ns", "a") is not None  # "b" is now the least recently used
    claimants.put("ns", "c", Claimant(["c"], None))
    assert [claimants.get("ns", n) is not None for n in ("a", "b", "c")] == [True, False, True]
    assert claimants.get("other", "a") is None, "remembered per namespace"
