"""The worker runtime's CPU per task, in process: one ``Worker`` of ``--slots`` slots draining
``--tasks`` no-op tasks from a stand-in server (``httpx.MockTransport``) that grants what each
lease asks for, started, and answers every report at once. No network, no database: what the
SDK's threads, hand-offs and bookkeeping cost per task (the stand-in's own JSON work is in the
figure too, alike for every variant). CPU is the process's (``time.process_time``).

Usage: ``.venv/bin/python bench/tasks/worker_cycle.py [--tasks 20000] [--slots 8] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from typing import Any

import httpx

from orbit_sdk import Worker

HANDLER = "bench.noop"
SESSION = {
    "id": "s1",
    "namespace": "bench",
    "worker_name": "w",
    "generation": 1,
    "state": "ACTIVE",
    "expires_at": "2099-01-01T00:00:00Z",
    "heartbeat_interval_seconds": 10,
}


class StandIn:
    """Grants ``tasks`` leases in all, answers reports; ``done`` once every task reported."""

    def __init__(self, tasks: int) -> None:
        self.tasks, self.granted, self.reported = tasks, 0, 0
        self.done = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        body = json.loads(request.content) if request.content else {}
        if path == "/v1/worker-sessions" or path.endswith(("/drain", "/s1")):
            return httpx.Response(201 if path == "/v1/worker-sessions" else 200, json=SESSION)
        if path.endswith("/lease"):
            answers = self._answers(body.get("reports", []))
            with self.lock:
                count = min(body["max_tasks"], self.tasks - self.granted)
                first, self.granted = self.granted, self.granted + count
            if not count and not answers:
                time.sleep(0.01)  # a long poll that found nothing
            leases = [self._lease(first + k) for k in range(count)]
            return httpx.Response(200, json={"leases": leases, "reports": answers})
        if path == "/v1/attempts:complete":
            return httpx.Response(200, json={"results": self._answers(body["items"])})
        return httpx.Response(200, json={"results": [], "session": SESSION})

    def _answers(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        with self.lock:
            self.reported += len(items)
            if self.reported >= self.tasks:
                self.done.set()
        return [
            {
                "attempt_id": item["attempt_id"],
                "status": "ok",
                "outcome_status": "applied",
                "task_state": "SUCCEEDED",
                "reason": None,
            }
            for item in items
        ]

    @staticmethod
    def _lease(n: int) -> dict[str, Any]:
        return {
            "task_id": f"t{n}",
            "attempt_id": f"a{n}",
            "generation": 1,
            "token": "token",
            "lease_expires_at": "2099-01-01T00:00:00Z",
            "namespace": "bench",
            "queue": "default",
            "handler": HANDLER,
            "params": {"i": n},
            "safety": "safe",
            "state_version": 2,
            "deadline_at": None,
            "lease_remaining_seconds": 30.0,
            "started": True,
        }


def drain(tasks: int, slots: int) -> tuple[float, float]:
    """(CPU, wall) seconds for one worker to run ``tasks`` tasks."""
    server = StandIn(tasks)
    worker = Worker(
        "http://orbit.bench",
        namespace="bench",
        concurrency=slots,
        transport=httpx.MockTransport(server),
    )
    worker.register(HANDLER, lambda ctx, params: None)
    cpu, wall = time.process_time(), time.perf_counter()
    thread = worker.run_in_thread()
    if not server.done.wait(300):
        raise RuntimeError(f"{server.reported} of {tasks} reported")
    spent = time.process_time() - cpu, time.perf_counter() - wall
    worker.stop()
    thread.join(30)
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    drain(args.slots * 4, args.slots)  # warm: imports, first models
    runs = [drain(args.tasks, args.slots) for _ in range(args.rounds)]
    cpu = statistics.median(c for c, _ in runs) * 1000 / args.tasks
    wall = statistics.median(w for _, w in runs) * 1000 / args.tasks
    print(
        f"worker, {args.slots} slots: CPU {cpu:.3f} ms/task, wall {wall:.3f} ms/task "
        f"({args.rounds} rounds, load {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
