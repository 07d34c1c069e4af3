"""What a worker's lease requests ask for: safe handlers' grants started with the lease
(worker protocol 3; no start call), unsafe ones started by a call, an older server noticed once,
and a busy worker under a backlog asking for all its slots at once while an idle one, or one
without a backlog, asks at once."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx

from orbit_sdk import Lease, TaskContext, Worker
from orbit_sdk._wire import calls
from orbit_sdk._wire.transport import Call
from orbit_sdk._worker.attempt import AttemptRunner, RegisteredHandler
from orbit_sdk._worker.lease_ask import MAX_LEASE_BATCH, LeaseAsk
from orbit_sdk._worker.live import LiveAttempt, LiveSet
from orbit_sdk.errors import ValidationFailed
from orbit_sdk.models import Problem

from .conftest import problem
from .test_models import LEASE, SESSION


def _noop(ctx: TaskContext, params: object) -> object:
    return None


HANDLERS = {
    "shop.echo": RegisteredHandler(_noop, "safe"),
    "shop.charge": RegisteredHandler(_noop, "unsafe"),
}

#: What a server before protocol 3 answers a lease request naming ``start_handlers``.
OLD_SERVER_REFUSAL = [
    {"loc": ["body", "start_handlers"], "msg": "Extra inputs are not permitted", "type": "x"}
]


def _held(live: LiveSet, n: int, prefix: str = "a") -> list[str]:
    ids = [f"{prefix}{i}" for i in range(n)]
    for attempt_id in ids:
        lease = Lease.model_validate({**LEASE, "attempt_id": attempt_id})
        live.add(LiveAttempt(lease, TaskContext(lease, "w")))
    return ids


def _ask_in_thread(ask: LeaseAsk, live: LiveSet) -> tuple[threading.Thread, list[int]]:
    asked: list[int] = []
    thread = threading.Thread(target=lambda: asked.append(ask.free_slots(live, lambda: False)))
    thread.start()
    return thread, asked


# --- start handlers ---------------------------------------------------------------------------


def test_only_safe_handlers_are_named_for_start_with_the_lease() -> None:
    assert LeaseAsk(HANDLERS, 4).start_handlers() == ["shop.echo"]


def test_a_worker_with_lease_with_start_off_names_none() -> None:
    assert LeaseAsk(HANDLERS, 4, with_start=False).start_handlers() is None


def test_the_lease_call_sends_start_handlers_only_when_there_are_any() -> None:
    assert calls.lease("s1", 2, 5, ["shop.echo"]).json["start_handlers"] == ["shop.echo"]
    assert "start_handlers" not in calls.lease("s1", 2, 5, None).json


def test_a_refusal_naming_start_handlers_switches_it_off_for_good() -> None:
    ask = LeaseAsk(HANDLERS, 4)
    refusal = ValidationFailed(Problem(status=422, errors=OLD_SERVER_REFUSAL))
    assert ask.refused_start(refusal)
    assert ask.start_handlers() is None
    assert not ask.refused_start(refusal), "a second refusal is a real error"


def test_a_refusal_naming_another_field_is_not_taken_for_an_old_server() -> None:
    ask = LeaseAsk(HANDLERS, 4)
    other = [{"loc": ["body", "max_tasks"], "msg": "too large", "type": "x"}]
    assert not ask.refused_start(ValidationFailed(Problem(status=422, errors=other)))
    assert ask.start_handlers() == ["shop.echo"]


def test_a_grant_started_with_the_lease_runs_without_a_start_call() -> None:
    sent: list[Call] = []

    def send(call: Call) -> httpx.Response:
        sent.append(call)
        return httpx.Response(200, json={"status": "applied", "task_state": "SUCCEEDED"})

    runner = AttemptRunner(
        send=send,
        handlers={"shop.echo": HANDLERS["shop.echo"]},
        live=LiveSet(),
        stopping=threading.Event(),
        abandon=threading.Event(),
    )
    lease = Lease.model_validate({**LEASE, "handler": "shop.echo", "started": True})
    runner.run(LiveAttempt(lease, TaskContext(lease, "w")))
    assert [c.path.rsplit("/", 1)[-1] for c in sent] == ["complete"]


def test_a_new_worker_falls_back_to_start_calls_against_an_older_server() -> None:
    """Protocol negotiation: the old server refuses the field once (422), the worker leases
    without it from then on and starts its grant with a call, as protocol 2 did."""
    bodies: dict[str, list[Any]] = {"lease": [], "start": [], "complete": []}
    granted = threading.Event()
    done = threading.Event()

    def old_server(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        body = json.loads(request.content) if request.content else None
        if path == "/v1/worker-sessions":
            return httpx.Response(201, json=SESSION)
        if path.endswith("/lease"):
            bodies["lease"].append(body)
            if "start_handlers" in body:
                return problem(422, "validation", errors=OLD_SERVER_REFUSAL)
            if granted.is_set():
                done.wait(2)
                return httpx.Response(200, json={"leases": []})
            granted.set()
            return httpx.Response(200, json={"leases": [{**LEASE, "handler": "shop.echo"}]})
        if path.endswith("/start"):
            bodies["start"].append(body)
            return httpx.Response(200, json={"started": True, "lease_remaining_seconds": 30})
        if path.endswith("/complete"):
            bodies["complete"].append(body)
            done.set()
            return httpx.Response(200, json={"status": "applied", "task_state": "SUCCEEDED"})
        return httpx.Response(200, json={"results": []})

    worker = Worker(
        "http://orbit.test",
        namespace="shop",
        transport=httpx.MockTransport(old_server),
        batch_linger=None,
        lease_wait_seconds=1,
    )
    worker.register("shop.echo", _noop)
    thread = worker.run_in_thread()
    try:
        assert done.wait(10), "the task was never reported"
    finally:
        worker.stop()
        thread.join(10)  # its last log lines are written before the test's capture closes
    assert not thread.is_alive(), "the worker did not stop"
    assert bodies["lease"][0]["start_handlers"] == ["shop.echo"]
    assert all("start_handlers" not in b for b in bodies["lease"][1:])
    assert len(bodies["start"]) == 1 and bodies["complete"][0]["outcome"] == "succeeded"


# --- how many slots to ask for ----------------------------------------------------------------


def test_an_idle_worker_asks_for_every_slot_at_once() -> None:
    ask = LeaseAsk(HANDLERS, 8, linger=60)
    thread, asked = _ask_in_thread(ask, LiveSet())
    thread.join(10)
    assert asked == [8], "an idle worker must not wait out the linger"


def _after_a_backlog(ask: LeaseAsk) -> LeaseAsk:
    ask.granted(asked=4, got=4)  # the last lease got all it asked for: more are waiting
    return ask


def test_under_a_backlog_a_busy_worker_waits_for_all_its_slots_before_asking() -> None:
    live = LiveSet()
    ids = _held(live, 8)
    thread, asked = _ask_in_thread(_after_a_backlog(LeaseAsk(HANDLERS, 8, linger=60)), live)
    for attempt_id in ids[:7]:
        live.remove(attempt_id)
    thread.join(0.2)
    assert thread.is_alive() and asked == [], "seven free slots of eight: it waits for all"
    live.remove(ids[7])
    thread.join(10)
    assert asked == [8]


def test_under_a_backlog_a_busy_worker_asks_for_what_is_free_once_the_linger_passed() -> None:
    live = LiveSet()
    ids = _held(live, 8)
    live.remove(ids[0])
    thread, asked = _ask_in_thread(_after_a_backlog(LeaseAsk(HANDLERS, 8, linger=0.05)), live)
    thread.join(10)
    assert asked == [1]


def test_without_a_backlog_a_busy_worker_asks_as_soon_as_a_slot_is_free() -> None:
    """The last lease got fewer tasks than it asked for: the queue keeps up, and a task that
    arrives should not wait out a linger."""
    live = LiveSet()
    ids = _held(live, 8)
    ask = LeaseAsk(HANDLERS, 8, linger=60)
    ask.granted(asked=4, got=3)
    thread, asked = _ask_in_thread(ask, live)
    live.remove(ids[0])
    thread.join(10)
    assert asked == [1]


def test_a_lease_that_got_fewer_than_asked_ends_the_backlog() -> None:
    ask = _after_a_backlog(LeaseAsk(HANDLERS, 8))
    assert ask.want == 8
    ask.granted(asked=8, got=0)
    assert ask.want == 1


def test_under_a_backlog_a_worker_waits_for_at_most_one_lease_request_s_worth() -> None:
    assert _after_a_backlog(LeaseAsk(HANDLERS, 500)).want == MAX_LEASE_BATCH


def test_an_attempt_being_reported_frees_its_slot() -> None:
    """Its handler is done: the worker leases the next task while the report is on its way."""
    live = LiveSet()
    ids = _held(live, 8)
    thread, asked = _ask_in_thread(_after_a_backlog(LeaseAsk(HANDLERS, 8, linger=0.5)), live)
    for attempt in live.snapshot()[:4]:
        live.mark_reporting(attempt)
    thread.join(10)
    assert asked == [4] and len(live) == len(ids), "reported attempts are still held"


def test_reports_in_flight_are_bounded_by_the_slots() -> None:
    """With ``concurrency`` reports waiting (the server cannot take them), leasing stops: a
    worker holds at most twice its slots, never an ever-growing pile of outcomes."""
    live = LiveSet()
    _held(live, 8)
    for attempt in live.snapshot():
        live.mark_reporting(attempt)  # eight reports waiting: eight slots free
    assert live.free(8) == 8
    _held(live, 8, prefix="b")
    assert live.free(8) == 0, "eight running and eight reports waiting: no room"
    live.mark_reporting(live.snapshot()[-1])
    assert live.free(8) == 0, "a ninth report waiting takes the room of the slot it frees"
    live.remove(live.snapshot()[0].lease.attempt_id)
    assert live.free(8) == 1


# --- reports riding the lease (worker protocol 4) ---------------------------------------------

#: What a server before protocol 4 answers a lease request carrying ``reports``.
NO_REPORTS_REFUSAL = [
    {"loc": ["body", "reports"], "msg": "Extra inputs are not permitted", "type": "x"}
]


def test_a_refusal_naming_reports_switches_riding_off_for_good() -> None:
    ask = LeaseAsk(HANDLERS, 4)
    refusal = ValidationFailed(Problem(status=422, errors=NO_REPORTS_REFUSAL))
    assert ask.refused_reports(refusal)
    assert not ask.with_reports
    assert not ask.refused_reports(refusal), "a second refusal is a real error"


def test_a_refusal_of_one_report_item_is_not_taken_for_an_old_server() -> None:
    ask = LeaseAsk(HANDLERS, 4)
    item = [{"loc": ["body", "reports", 0, "token"], "msg": "Field required", "type": "x"}]
    assert not ask.refused_reports(ValidationFailed(Problem(status=422, errors=item)))
    assert ask.with_reports


def test_the_lease_call_carries_reports_without_a_long_poll() -> None:
    report = {"attempt_id": "a1", "token": "t", "outcome": "succeeded"}
    call = calls.lease("s", 4, 10.0, None, reports=[report], budget=3.0)
    assert call.json["reports"] == [report] and call.json["wait_seconds"] == 0
    assert call.budget == 3.0
    plain = calls.lease("s", 4, 10.0, None, reports=[], budget=3.0)
    assert "reports" not in plain.json and plain.json["wait_seconds"] == 10.0
    assert plain.budget is None


#: A grant the server started with the lease (protocol 3): no start call.
GRANT = {**LEASE, "handler": "shop.echo", "started": True}


def _applied(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"attempt_id": i["attempt_id"], "status": "ok", "outcome_status": "applied"} for i in items
    ]


class ReportServer:
    """Grants one started task, then records where its report arrives: on a lease request
    (``takes_reports``) or by the complete call (a server before protocol 4 refuses the field)."""

    def __init__(self, takes_reports: bool) -> None:
        self.takes_reports = takes_reports
        self.leases: list[Any] = []
        self.completes: list[Any] = []
        self.done = threading.Event()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        body = json.loads(request.content) if request.content else None
        if path == "/v1/worker-sessions":
            return httpx.Response(201, json=SESSION)
        if path.endswith("/lease"):
            self.leases.append(body)
            reports = body.get("reports", [])
            if reports and not self.takes_reports:
                return problem(422, "validation", errors=NO_REPORTS_REFUSAL)
            if len(self.leases) == 1:
                return httpx.Response(200, json={"leases": [GRANT]})
            if reports:
                self.done.set()
            else:
                self.done.wait(2)
            return httpx.Response(200, json={"leases": [], "reports": _applied(reports)})
        if path == "/v1/attempts:complete":
            self.completes.append(body)
            self.done.set()
            return httpx.Response(200, json={"results": _applied(body["items"])})
        return httpx.Response(200, json={"results": []})

    def run_worker(self) -> None:
        worker = Worker(
            "http://orbit.test",
            namespace="shop",
            transport=httpx.MockTransport(self),
            lease_wait_seconds=1,
            concurrency=1,  # its one slot held: the lease loop waits, and takes the report
            # The report leaves by its own call only once a lease request gave it back (or the
            # worker stops): with the default lingers, a lease loop not scheduled within its
            # hold (tens of ms, a loaded machine) let the flusher send it first.
            batch_linger=30,
            lease_linger=30,
        )
        worker.register("shop.echo", _noop)
        thread = worker.run_in_thread()
        try:
            assert self.done.wait(10), "the task was never reported"
        finally:
            worker.stop()
            thread.join(10)
        assert not thread.is_alive(), "the worker did not stop"


def test_a_finished_attempt_s_report_rides_the_next_lease_request() -> None:
    """A task granted, run, and its outcome carried by the next lease request, whose answer
    settles it: no call of its own."""
    server = ReportServer(takes_reports=True)
    server.run_worker()
    carried = [r for body in server.leases for r in body.get("reports", [])]
    assert [(r["attempt_id"], r["outcome"]) for r in carried] == [
        (LEASE["attempt_id"], "succeeded")
    ]
    assert server.completes == []


def test_a_new_worker_reports_by_its_own_call_to_an_older_server() -> None:
    """The old server refuses the field once (422): the report then goes by the batched
    complete call, and later lease requests carry none."""
    server = ReportServer(takes_reports=False)
    server.run_worker()
    reported = [i["attempt_id"] for body in server.completes for i in body["items"]]
    assert reported == [LEASE["attempt_id"]]
    refused = [n for n, body in enumerate(server.leases) if "reports" in body]
    assert len(refused) == 1
    assert all("reports" not in body for body in server.leases[refused[0] + 1 :])


def test_concurrency_set_after_construction_is_what_the_worker_asks_for() -> None:
    """`orbit worker --concurrency N` (and a WorkerPool) set ``concurrency`` on a Worker made
    at import: its lease requests must ask for N slots, not the constructor's default."""
    asked: list[int] = []
    done = threading.Event()

    def server(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/worker-sessions":
            return httpx.Response(201, json=SESSION)
        if request.url.path.endswith("/lease"):
            asked.append(json.loads(request.content)["max_tasks"])
            done.set()
            return httpx.Response(200, json={"leases": []})
        return httpx.Response(200, json={"results": []})

    worker = Worker("http://orbit.test", namespace="shop", transport=httpx.MockTransport(server))
    worker.register("shop.echo", _noop)
    worker.concurrency = 9
    thread = worker.run_in_thread()
    try:
        assert done.wait(10), "the worker never asked for work"
    finally:
        worker.stop()
        thread.join(10)
    assert asked[0] == 9
