"""Crash test (seed invariants 9-11; ORBIT.md §8 "it must never stall, never double-run a
step"): 200 workflows of five steps — a parallel branch, a signal wait and a poll — run while
the server is killed with SIGKILL at random moments and restarted. Afterwards every workflow has
completed, each step's task was created exactly once (a poll: once per round), and
`orbit admin verify` finds nothing.

Each kill lands wherever the server happens to be: in a start, a signal, an inbox consumption,
a timer or a worker call. Everything Weave knows is in MariaDB, so nothing is lost or repeated.
(A process kill does not test the disk's durability: the OS page cache survives it.)
"""

from __future__ import annotations

import functools
import itertools
import os
import random
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from orbit_sdk import Client, OrbitError
from orbit_store.access.credentials import create_token
from orbit_store.db import create_store_engine, run_transaction
from orbit_store.pulse.limits.queues import put_queue
from orbit_store.pulse.model import QueuePolicy
from orbit_store.recovery.verify import verify
from orbit_store.schema import tasks, workflow_instances

from ..conftest import ORBIT, ROOT, free_port, wait_until

pytestmark = pytest.mark.slow

INSTANCES = 200
KILLS = 6
#: Threads starting workflows side by side: the starts are many short requests, and a kill
#: between them finds more of the started workflows' steps in flight.
STARTERS = 8
LEASE_SECONDS = 5
SEED = int(os.environ.get("ORBIT_CRASH_SEED", random.randrange(1_000_000)))
NAMESPACE = "crash"
SPEC = {
    "steps": [
        {"name": "prepare", "task": {"handler": "crash.prepare", "params": {"n": "${input.n}"}}},
        {
            "name": "left",
            "dependsOn": ["prepare"],
            "task": {"handler": "crash.left", "params": {"n": "${input.n}"}},
        },
        {
            "name": "right",
            "dependsOn": ["prepare"],
            "task": {"handler": "crash.right", "params": {"n": "${input.n}"}},
        },
        {"name": "approval", "dependsOn": ["left", "right"], "wait": {"signal": "go"}},
        {
            "name": "check",
            "dependsOn": ["approval"],
            "poll": {
                "handler": "crash.check",
                "params": {"round": "${round}"},
                "until": "result.done",
                "intervalSeconds": 0.5,
                "maxRounds": 5,
            },
        },
    ],
    "output": {"sum": "${steps.left.result.left + steps.right.result.right}"},
}
EXPECTED_HANDLERS = Counter(
    {"crash.prepare": 1, "crash.left": 1, "crash.right": 1, "crash.check": 2}
)


class ServerProcess:
    """`orbit server` on a fixed port, killed with SIGKILL and started again at will."""

    def __init__(self, database_url: str, log: Path) -> None:
        self.port, self.database_url, self.log = free_port(), database_url, log
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "ORBIT_DATABASE_URL": self.database_url, "ORBIT_LOG_LEVEL": "INFO"}
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(
                [
                    *(ORBIT, "server", "--port", str(self.port), "--reaper-interval", "0.5"),
                    # Workers renew their leases well within LEASE_SECONDS.
                    *("--heartbeat-interval", "1"),
                ],
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
            )
        wait_until(self._ready, timeout=60)

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"server exited: {self.log.read_text()[-3000:]}")
        try:
            return httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)


@pytest.fixture
def crash_db(migrated_database: Callable[[], str]) -> Iterator[tuple[str, sa.Engine]]:
    url = migrated_database()
    engine = create_store_engine(url)
    yield url, engine
    engine.dispose()


def retrying(action: Callable[[], Any], timeout: float = 60) -> Any:
    """Call through an outage: the same call (same start key, same signal id) until it lands."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return action()
        except OrbitError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_workflows_survive_server_kills_and_each_step_runs_once(
    crash_db: tuple[str, sa.Engine], tmp_path: Path
) -> None:
    url, engine = crash_db
    rng = random.Random(SEED)
    print(f"crash test seed {SEED} (ORBIT_CRASH_SEED to repeat)")
    token = run_transaction(
        engine,
        functools.partial(create_token, namespace=NAMESPACE, name="crash", roles=["admin"]),
    ).token
    # A kill can lose the answer to a lease the server had committed: that attempt comes back
    # only when its lease lapses (after the outage's grace). A short lease keeps that recovery
    # in the test and its wait short; a lapse is a new attempt of the same task, never a new
    # task, so each step's task is still created once.
    policy = QueuePolicy(name="default", lease_seconds=LEASE_SECONDS)
    run_transaction(engine, functools.partial(put_queue, namespace=NAMESPACE, policy=policy))
    server = ServerProcess(url, tmp_path / "server.log")
    server.start()
    env = {
        **os.environ,
        "ORBIT_SERVER": server.url,
        "ORBIT_TOKEN": token,
        "ORBIT_NAMESPACE": NAMESPACE,
        "PYTHONPATH": str(ROOT),
    }
    workers = [
        subprocess.Popen(
            [ORBIT, "worker", "tests.e2e.workflows.workflow_workers:worker"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / f"worker-{i}.log").open("wb"),
        )
        for i in range(2)
    ]
    client = Client(server.url, token=token)

    def start_and_approve(numbers: range) -> list[str]:
        """Start workflows ``numbers`` and send each its signal, on a client of this thread's."""
        started_ids = []
        with Client(server.url, token=token) as own:
            for n in numbers:
                started = retrying(
                    lambda n=n: own.start_workflow(
                        NAMESPACE, "crash", input={"n": n}, start_key=f"wf-{n}"
                    )
                )
                started_ids.append(started.id)
                retrying(
                    lambda wid=started.id: own.signal_workflow(
                        NAMESPACE, wid, "go", signal_id=f"go-{wid}"
                    )
                )
        return started_ids

    try:
        client.publish_workflow(NAMESPACE, "crash", SPEC)
        ids: list[str] = []
        t0 = time.monotonic()
        kills_at = sorted(rng.sample(range(INSTANCES), KILLS // 2))
        bounds = [0, *kills_at, INSTANCES]
        with ThreadPoolExecutor(STARTERS) as starters:
            for segment, (lo, hi) in enumerate(itertools.pairwise(bounds)):
                if segment:  # some kills while workflows are being started
                    server.kill()
                    time.sleep(rng.uniform(0, 1))
                    server.start()
                slices = [range(lo + i, hi, STARTERS) for i in range(STARTERS)]
                for of_slice in starters.map(start_and_approve, slices):
                    ids.extend(of_slice)
        t_started = time.monotonic()
        for _ in range(KILLS - KILLS // 2):  # the rest while they run
            time.sleep(rng.uniform(0.5, 3))
            server.kill()
            time.sleep(rng.uniform(0, 2))
            server.start()
        t_killed = time.monotonic()

        def all_finished() -> bool:
            with engine.connect() as conn:
                return not conn.execute(
                    sa.select(sa.func.count()).where(
                        workflow_instances.c.namespace == NAMESPACE,
                        workflow_instances.c.state == "RUNNING",
                    )
                ).scalar_one()

        wait_until(all_finished, timeout=240, interval=1)
        print(
            f"timing: starts {t_started - t0:.0f}s, kills {t_killed - t_started:.0f}s, "
            f"finish {time.monotonic() - t_killed:.0f}s"
        )
    finally:
        client.close()
        for worker in workers:
            worker.kill()
            worker.wait(10)
        if server.process is not None and server.process.poll() is None:
            server.kill()
    with engine.connect() as conn:
        states = Counter(
            conn.execute(
                sa.select(workflow_instances.c.state).where(
                    workflow_instances.c.namespace == NAMESPACE
                )
            ).scalars()
        )
        handlers = conn.execute(
            sa.select(tasks.c.workflow_instance_id, tasks.c.handler).where(
                tasks.c.namespace == NAMESPACE
            )
        ).all()
        report = verify(conn)
    assert states == {"SUCCEEDED": INSTANCES}, f"seed {SEED}"
    per_instance: dict[str, Counter[str]] = {}
    for instance_id, handler in handlers:
        per_instance.setdefault(instance_id, Counter())[handler] += 1
    assert set(per_instance) == set(ids)
    wrong = {i: c for i, c in per_instance.items() if c != EXPECTED_HANDLERS}
    assert wrong == {}, f"seed {SEED}: each step's task created once (a poll: once per round)"
    assert report.clean, report.as_dict()
