"""The worker's batching of starts and reports (``_worker.report_buffer``): each attempt still
gets its own answer — a refused item raises its own typed error, its neighbours are unaffected."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from orbit_sdk._wire.transport import Call
from orbit_sdk._worker.report_buffer import report_batcher
from orbit_sdk.errors import PayloadTooLarge, StaleAttempt


class Server:
    """Answers the batched and the single completion calls the way the server does."""

    def __init__(self, refuse_batches: bool = False) -> None:
        self.refuse_batches = refuse_batches
        self.calls: list[Call] = []
        self.lock = threading.Lock()

    def send(self, call: Call) -> httpx.Response:
        with self.lock:
            self.calls.append(call)
        if call.path == "/v1/attempts:complete":
            if self.refuse_batches and len(call.json["items"]) > 1:
                raise PayloadTooLarge.from_detail("the body is over the limit")
            results = [self._result(item) for item in call.json["items"]]
            return httpx.Response(200, json={"results": results})
        if call.json["outcome"] == "stale":
            raise StaleAttempt.from_detail("superseded")
        return httpx.Response(200, json={"status": "applied", "task_state": "SUCCEEDED"})

    @staticmethod
    def _result(item: dict[str, Any]) -> dict[str, Any]:
        if item["outcome"] == "stale":
            problem = {
                "type": "https://orbit.dev/problems/stale-attempt",
                "title": "stale",
                "status": 409,
            }
            return {"attempt_id": item["attempt_id"], "status": "refused", "problem": problem}
        return {"attempt_id": item["attempt_id"], "status": "ok", "outcome_status": "applied"}


def _report_all(server: Server, outcomes: list[str]) -> list[Any]:
    batcher = report_batcher(server.send, linger=0.05)

    def report(k: int) -> Any:
        item = {"attempt_id": f"a{k}", "token": "t", "outcome": outcomes[k]}
        try:
            return batcher.submit(item)["outcome_status"]
        except Exception as exc:
            return type(exc)

    with ThreadPoolExecutor(len(outcomes)) as pool:
        return list(pool.map(report, range(len(outcomes))))


def test_reports_gathered_together_go_in_one_call_and_answer_each_on_its_own() -> None:
    server = Server()
    answers = _report_all(server, ["succeeded", "stale", "succeeded"])
    assert answers == ["applied", StaleAttempt, "applied"]
    assert len(server.calls) == 1, "one batched call for reports made together"


def test_a_batch_refused_as_a_whole_is_sent_again_item_by_item() -> None:
    """A 413 for the whole body must not turn the neighbours' successes into failures."""
    server = Server(refuse_batches=True)
    answers = _report_all(server, ["succeeded", "succeeded", "stale"])
    assert answers == ["applied", "applied", StaleAttempt]
    assert [c.path for c in server.calls].count("/v1/attempts:complete") == 1


def _waiting(batcher: Any, outcomes: list[str]) -> tuple[ThreadPoolExecutor, list[Any]]:
    """Threads reporting ``outcomes`` (attempts a0, a1, …), each once its item waits."""
    pool = ThreadPoolExecutor(len(outcomes))
    queued = threading.Semaphore(0)

    def report(k: int) -> Any:
        item = {"attempt_id": f"a{k}", "token": "t", "outcome": outcomes[k]}
        try:
            return batcher.submit(item, queued=queued.release)["outcome_status"]
        except Exception as exc:
            return type(exc)

    answers = [pool.submit(report, k) for k in range(len(outcomes))]
    for _ in outcomes:
        queued.acquire()
    return pool, answers


def test_reports_held_for_a_lease_ride_it_and_answer_each_on_its_own() -> None:
    """Worker protocol 4: while a lease request is about to go, the flusher leaves the reports
    to it; each is answered from the lease's own answer (a refusal as its typed error)."""
    server = Server()
    batcher = report_batcher(server.send, linger=0.0)
    batcher.hold(60.0)  # far longer than the test: only ``take`` moves them
    pool, answers = _waiting(batcher, ["succeeded", "stale"])
    riders = batcher.take()
    assert [item["attempt_id"] for item, _, _ in riders] == ["a0", "a1"]
    batcher.settle(riders, [Server._result(item) for item, _, _ in riders])
    assert [a.result() for a in answers] == ["applied", StaleAttempt]
    assert server.calls == [], "no call of their own"
    pool.shutdown()


def test_reports_a_lease_could_not_deliver_go_by_their_own_call_and_never_ride_again() -> None:
    server = Server()
    batcher = report_batcher(server.send, linger=0.0)
    batcher.hold(60.0)
    pool, answers = _waiting(batcher, ["succeeded"])
    riders = batcher.take()
    batcher.hold(60.0)  # the next lease request is coming: these must not wait for it
    batcher.put_back(riders)
    assert [a.result() for a in answers] == ["applied"]
    assert [call.path for call in server.calls] == ["/v1/attempts:complete"]
    assert batcher.take() == []
    pool.shutdown()


def test_a_report_the_lease_answer_does_not_name_goes_by_its_own_call() -> None:
    server = Server()
    batcher = report_batcher(server.send, linger=0.0)
    batcher.hold(60.0)
    pool, answers = _waiting(batcher, ["succeeded", "succeeded"])
    riders = batcher.take()
    batcher.settle(riders, [Server._result(riders[0][0])])  # only a0 answered
    assert [a.result() for a in answers] == ["applied", "applied"]
    assert [item["attempt_id"] for item in server.calls[0].json["items"]] == ["a1"]
    pool.shutdown()
