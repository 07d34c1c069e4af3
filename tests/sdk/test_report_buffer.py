"""The worker's batching of starts and reports (``_report_buffer``): each attempt still gets its
own answer — a refused item raises its own typed error, its neighbours are unaffected."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from orbit_sdk._report_buffer import report_batcher
from orbit_sdk._transport import Call
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
