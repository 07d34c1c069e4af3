"""``ctx.progress``: checked where the handler calls it, carried by the next heartbeat (no request
of its own), sent again until a heartbeat answer covers it, and never sent twice after that."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import pytest

from orbit_sdk import Lease, TaskContext, Worker
from orbit_sdk._worker.heartbeat import Heartbeater
from orbit_sdk._worker.live import LiveAttempt

from .test_models import LEASE


def context() -> TaskContext:
    return TaskContext(Lease.model_validate(LEASE), "w")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((1.5,), "from 0 to 1"),
        ((math.nan,), "from 0 to 1"),
        ((True,), "from 0 to 1"),
        (("x" * 501,), "longer than 500"),
        ((0.5, ["not", "a", "mapping"]), "mapping"),
        ((0.5, {"x": math.inf}), "not JSON"),
        ((0.5, {"blob": "x" * 5000}), "more than 4096"),
    ],
)
def test_progress_out_of_bounds_is_refused_where_the_handler_calls_it(
    args: tuple[Any, ...], says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        context().progress(*args)


def test_the_latest_progress_rides_the_next_heartbeat_until_one_answer_covers_it() -> None:
    sent: list[dict[str, Any]] = []
    answer_ok = [False]

    def server(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        if not answer_ok[0]:
            return httpx.Response(503, json={"type": "about:blank", "title": "x", "status": 503})
        results = [
            {"attempt_id": i["attempt_id"], "status": "extended", "lease_remaining_seconds": 30}
            for i in body["items"]
        ]
        return httpx.Response(200, json={"results": results})

    worker = Worker("http://orbit.test", namespace="shop", transport=httpx.MockTransport(server))
    ctx = context()
    worker.live.add(LiveAttempt(Lease.model_validate(LEASE), ctx, started=True))
    beats = Heartbeater(worker)
    ctx.progress(0.25)
    ctx.progress(0.5, {"rows": 500})  # only the latest goes
    beats.beat()  # the server is down: not confirmed, so sent again
    answer_ok[0] = True
    beats.beat()
    beats.beat()  # nothing new: no progress in it
    ctx.progress("writing")
    beats.beat()
    carried = [[i.get("progress") for i in body["items"]] for body in sent]
    expected = {"fraction": 0.5, "message": None, "details": {"rows": 500}}
    assert carried[0] == carried[1] == [expected]
    assert carried[-2] == [None]
    assert carried[-1] == [{"fraction": None, "message": "writing"}]
