"""The mixed load, through the balancer like any client: safe and unsafe tasks, retryable
failures, cancels, delays, concurrency keys, a Schedule firing every 3 seconds, and a small
two-step Weave workflow started every few seconds. Every submission carries an idempotency key
and is retried until the server acknowledges it; only acknowledged ones are owed."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from .cluster import NAMESPACE

RETRY = {"max_attempts": 30, "backoff_initial_seconds": 0.2, "backoff_max_seconds": 2}
WORKFLOW = {
    "steps": [
        {"name": "fetch", "task": {"handler": "chaos.safe", "params": {"steps": 1}}},
        {
            "name": "store",
            "dependsOn": ["fetch"],
            "task": {"handler": "chaos.safe", "params": {"steps": 1}},
        },
    ]
}


@dataclass
class Acked:
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)  # task id -> submission
    workflows: list[str] = field(default_factory=list)
    cancels: int = 0
    unacknowledged: int = 0  # gave up before an answer (not owed)
    lock: threading.Lock = field(default_factory=threading.Lock)


def submission(rng: random.Random) -> dict[str, Any]:
    r = rng.random()
    steps = rng.randint(1, 4)
    body: dict[str, Any] = {"handler": "chaos.safe", "params": {"steps": steps}, "retry": RETRY}
    if r < 0.35:
        pass
    elif r < 0.55:
        body.update(handler="chaos.unsafe", safety="unsafe")
    elif r < 0.65:
        body["params"]["fail_first"] = rng.randint(1, 2)
    elif r < 0.75:
        body["delay_seconds"] = round(rng.uniform(0.5, 4), 2)
    elif r < 0.9:
        body.update(queue="keyed", concurrency_key=f"k{rng.randint(0, 5)}", concurrency_limit=2)
        body["params"]["steps"] = 1
    else:
        body["params"] = {"steps": 12, "step_seconds": 0.3}
        body["_cancel_after"] = round(rng.uniform(0.3, 3), 2)
    return body


class Load:
    def __init__(self, url: str, token: str, seed: int) -> None:
        self.url, self.seed = url, seed
        self.headers = {"Authorization": f"Bearer {token}"}
        self.acked = Acked()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def base(self, path: str) -> str:
        return f"{self.url}/v1/namespaces/{NAMESPACE}/{path}"

    def call(self, method: str, path: str, give_up: float = 120, **kwargs: Any) -> Any:
        """Until a definitive answer (2xx, or a 4xx other than a conflict still settling)."""
        deadline = time.monotonic() + give_up
        delay = 0.1
        while True:
            try:
                answer = httpx.request(
                    method, self.base(path), headers=self.headers, timeout=10, **kwargs
                )
                if answer.status_code < 500:
                    return answer
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                return None
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def setup(self) -> None:
        published = self.call(
            "POST", "workflow-definitions", json={"name": "chaosflow", "spec": WORKFLOW}
        )
        assert published is not None and published.status_code in (200, 201), published.text
        schedule = {
            "name": "tick",
            "cron": "*/3 * * * * *",
            "task": {"handler": "chaos.safe", "params": {"steps": 1}},
            "reason": "chaos harness",
        }
        made = self.call("POST", "schedules", json=schedule)
        assert made is not None and made.status_code == 201, made.text

    def start(self, rate: float = 4.0) -> None:
        for target, args in ((self._submitter, (rate,)), (self._workflows, ())):
            thread = threading.Thread(target=target, args=args, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(150)
        self.call("POST", "schedules/tick/suspend", json={"reason": "chaos harness done"})

    def _submitter(self, rate: float) -> None:
        rng = random.Random(self.seed * 7919 + 1)
        n = 0
        while not self._stop.is_set():
            body = submission(rng)
            cancel_after = body.pop("_cancel_after", None)
            body["idempotency_key"] = f"chaos-{self.seed}-{n}"
            n += 1
            threading.Thread(
                target=self._submit_one, args=(body, cancel_after), daemon=True
            ).start()
            self._stop.wait(rng.expovariate(rate))

    def _submit_one(self, body: dict[str, Any], cancel_after: float | None) -> None:
        answer = self.call("POST", "tasks", json=body)
        if answer is None or answer.status_code not in (200, 201):
            with self.acked.lock:
                self.acked.unacknowledged += 1
            return
        task_id = answer.json()["id"]
        with self.acked.lock:
            self.acked.tasks[task_id] = body
        if cancel_after is not None:
            time.sleep(cancel_after)
            cancelled = self.call("POST", f"tasks/{task_id}/cancel", json={"reason": "chaos"})
            if cancelled is not None and cancelled.status_code < 300:
                with self.acked.lock:
                    self.acked.cancels += 1

    def _workflows(self) -> None:
        n = 0
        while not self._stop.wait(4):
            body = {"definition": "chaosflow", "start_key": f"flow-{self.seed}-{n}", "input": {}}
            n += 1
            answer = self.call("POST", "workflows", json=body)
            if answer is not None and answer.status_code in (200, 201):
                with self.acked.lock:
                    self.acked.workflows.append(answer.json()["id"])
