"""The server's CPU per task of a busy worker's cycle, measured in process: the ASGI app (no
socket, no engine loops) answering lease requests with start for ``--batch`` tasks, each
carrying the previous batch's reports (worker protocol 4), over a real MariaDB. Each path is
called once before it is measured (a first request builds FastAPI's state of its routes). CPU is
this process's (``time.process_time``): what the HTTP process spends per task on the drain's hot
path, without the network, the workers or the machine's other work in the figure; the wall
time per cycle is printed too. Also one-by-one and coalesced submissions (``--submit``).

Usage: ``.venv/bin/python bench/tasks/server_cycle.py [--tasks 2000] [--batch 8] [--rounds 3]``;
``--profile FILE`` writes a cProfile of the last round's drain (read it with ``pstats``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import json
import statistics
import time
import uuid
from typing import Any

import sqlalchemy as sa
from batch_paths import _database  # bench/tasks is the script's own folder (sys.path[0])

from orbit.api.app import create_app
from orbit.api.context import ServerSettings
from orbit_store.access.credentials import create_token
from orbit_store.db import run_transaction

DEFAULT_URL = "mysql://root@127.0.0.1:3306/orbit_bench_cycle"
HANDLER = "bench.noop"


class App:
    """The app in process and a namespace with a token that may submit and work."""

    def __init__(self, engine: sa.Engine) -> None:
        settings = ServerSettings(
            database_url=engine.url.render_as_string(hide_password=False), run_engines=False
        )
        self.engine = engine
        self.app = create_app(engine, settings)
        self.new_namespace()

    def new_namespace(self) -> None:
        """Calls from now on go to a fresh namespace."""
        self.namespace = f"cycle-{uuid.uuid4().hex[:8]}"
        token = run_transaction(
            self.engine,
            functools.partial(
                create_token, namespace=self.namespace, name="b", roles=["submit", "work"]
            ),
        ).token
        self.headers = [
            (b"authorization", f"Bearer {token}".encode()),
            (b"content-type", b"application/json"),
        ]

    async def call(self, path: str, body: Any) -> Any:
        payload = json.dumps(body).encode()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "scheme": "http",
            "server": ("bench", 80),
            "client": ("bench", 1),
            "headers": [*self.headers, (b"content-length", str(len(payload)).encode())],
        }
        messages = [{"type": "http.request", "body": payload, "more_body": False}]
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            if messages:
                return messages.pop(0)
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await self.app(scope, receive, send)
        status = next(m["status"] for m in sent if m["type"] == "http.response.start")
        data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        if status >= 300:
            raise RuntimeError(f"{path}: {status} {data[:300]!r}")
        return json.loads(data)


async def drain(app: App, tasks: int, batch: int) -> tuple[float, float]:
    """Submit ``tasks`` in bulk, then drain them in cycles of ``batch``: (CPU, wall) seconds
    of the draining alone."""
    tasks_path = f"/v1/namespaces/{app.namespace}/tasks:batch"
    for start in range(0, tasks, 1000):
        items = [{"handler": HANDLER} for _ in range(min(1000, tasks - start))]
        await app.call(tasks_path, {"items": items})
    body = {"namespace": app.namespace, "worker_name": "w", "handlers": [HANDLER]}
    session = (await app.call("/v1/worker-sessions", body))["id"]
    lease_path = f"/v1/worker-sessions/{session}/lease"
    reports: list[dict[str, Any]] = []
    done = 0
    cpu, wall = time.process_time(), time.perf_counter()
    while True:
        ask = {"max_tasks": batch, "start_handlers": [HANDLER], "reports": reports}
        answer = await app.call(lease_path, ask)
        done += sum(r["status"] == "ok" for r in answer["reports"])
        leases = answer["leases"]
        if not leases:
            break
        reports = [
            {"attempt_id": g["attempt_id"], "token": g["token"], "outcome": "succeeded"}
            for g in leases
        ]
    if done != tasks:
        raise RuntimeError(f"{done} of {tasks} reports applied")
    return time.process_time() - cpu, time.perf_counter() - wall


async def submit(app: App, tasks: int, per_request: int) -> tuple[float, float]:
    """``tasks`` submissions, ``per_request`` per request (1: ``POST …/tasks`` each; more:
    ``tasks:batch`` with ``with_tasks``, as the SDK coalesces): (CPU, wall) seconds."""
    single = f"/v1/namespaces/{app.namespace}/tasks"
    cpu, wall = time.process_time(), time.perf_counter()
    for start in range(0, tasks, per_request):
        items = [
            {"handler": HANDLER, "idempotency_key": uuid.uuid4().hex}
            for _ in range(min(per_request, tasks - start))
        ]
        if per_request == 1:
            await app.call(single, items[0])
        else:
            await app.call(single + ":batch", {"items": items, "with_tasks": True})
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=8, help="tasks per lease (a worker's slots)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--submit", type=int, nargs="*", default=[1, 8], help="per request")
    parser.add_argument("--profile", help="a cProfile of the last round's drain to this file")
    args = parser.parse_args()
    engine = _database(args.database_url)
    results: dict[str, list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        app = App(engine)  # a fresh app per round: its own namespace
        asyncio.run(drain(app, 2 * args.batch, args.batch))  # warm: FastAPI builds its routes'
        for per in args.submit:  # state on a first request
            asyncio.run(submit(app, per, per))
        app.new_namespace()
        profiler = cProfile.Profile() if args.profile and _ == args.rounds - 1 else None
        if profiler is not None:
            profiler.enable(subcalls=True, builtins=True)
        results.setdefault("drain", []).append(asyncio.run(drain(app, args.tasks, args.batch)))
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
        for per in args.submit:
            key = f"submit {per}/request"
            results.setdefault(key, []).append(asyncio.run(submit(app, args.tasks, per)))
    for name, runs in results.items():
        cpu = statistics.median(c for c, _ in runs) * 1000 / args.tasks
        wall = statistics.median(w for _, w in runs) * 1000 / args.tasks
        print(f"{name:18} CPU {cpu:.3f} ms/task, wall {wall:.3f} ms/task ({args.rounds} rounds)")
    engine.dispose()


if __name__ == "__main__":
    main()
