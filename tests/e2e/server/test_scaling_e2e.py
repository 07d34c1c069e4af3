"""Several server processes and replicas on one MySQL: a worker long-polling on one
process is woken promptly by work made ready anywhere else — a submission to another replica, a
schedule firing, Weave creating a workflow's next task in the engine process — and /metrics
counts for the whole pod whichever process answers. Real `orbit server` subprocesses; the lease
requests wait 30 s and the servers' own fallback poll is 30 s, so only the shared wake-up probe
can explain a lease within seconds. Bounds are generous: this checks behaviour, not speed.
Invariant 2 (seed §1): however many requests a wake-up sends claiming, one grant per task."""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from orbit_sdk import Client

from ..conftest import (
    Server,
    Tenant,
    delete_schedules,
    is_ready,
    make_tenant,
    start_server,
    stop_server,
    wait_until,
)

pytestmark = pytest.mark.slow

LONG_POLL = 30.0
# A wake-up, not the long poll running out: a third of LONG_POLL, generous for a starved CI
# machine (a quiet one answers in well under a second).
PROMPT = 10.0


@pytest.fixture(scope="module")
def pod(mariadb_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`orbit server --workers 2` whose requests never re-check on their own within a test."""
    log = tmp_path_factory.mktemp("pod") / "server.log"
    started = start_server(
        mariadb_url,
        log,
        *("--workers", "2", "--lease-poll-interval", str(LONG_POLL)),
        *("--reaper-interval", "0.2", "--gauge-interval", "0.5"),
    )
    wait_until(lambda: is_ready(started), timeout=30)
    yield started
    stop_server(started)


@pytest.fixture
def everyone(pod: Server, mariadb_engine: sa.Engine) -> Tenant:
    return make_tenant(pod, mariadb_engine, ["submit", "work", "review", "admin"])


class Poll:
    """One worker session's lease request, waiting up to LONG_POLL in a thread."""

    def __init__(self, tenant: Tenant, handlers: list[str] | None = None) -> None:
        self.tenant, self.base = tenant, tenant.server.url
        # Each its own name: registering a name closes the earlier session of that name.
        name = f"poller-{uuid.uuid4().hex[:8]}"
        body: dict[str, Any] = {"namespace": tenant.namespace, "worker_name": name}
        if handlers is not None:
            body["handlers"] = handlers
        created = httpx.post(f"{self.base}/v1/worker-sessions", json=body, headers=tenant.headers)
        assert created.status_code == 201, created.text
        self.session = created.json()["id"]
        self.leases: list[dict[str, Any]] = []
        self.returned_at = 0.0
        self._thread = threading.Thread(target=self._wait, daemon=True)
        self._thread.start()
        time.sleep(0.5)  # the request is waiting (its arrival claim found nothing)

    def _wait(self) -> None:
        response = httpx.post(
            f"{self.base}/v1/worker-sessions/{self.session}/lease",
            json={"max_tasks": 1, "wait_seconds": LONG_POLL},
            headers=self.tenant.headers,
            timeout=LONG_POLL + 10,
        )
        self.returned_at = time.monotonic()
        assert response.status_code == 200, response.text
        self.leases = response.json()["leases"]

    def result(self) -> list[dict[str, Any]]:
        self._thread.join(LONG_POLL + 15)
        return self.leases


def submit(
    server: Server, tenant: Tenant, handler: str = "e2e.echo", *, new_connection: bool = False
) -> str:
    """``new_connection``: on a connection of its own, which the kernel gives to any process of
    a pod (the default client may reuse one kept alive, so the same process)."""
    close = {"Connection": "close"} if new_connection else {}
    response = httpx.post(
        f"{server.url}/v1/namespaces/{tenant.namespace}/tasks",
        json={"handler": handler},
        headers=tenant.headers | close,
    )
    assert response.status_code in (200, 201), response.text
    return str(response.json()["id"])


TWO_STEPS = {
    "steps": [
        {"name": "first", "task": {"handler": "e2e.first"}},
        {"name": "second", "dependsOn": ["first"], "task": {"handler": "e2e.second"}},
    ]
}


def finish_the_first_of_two_steps(tenant: Tenant, waiting: int) -> tuple[list[Poll], float]:
    """Start a two-step workflow, lease its first step, open ``waiting`` requests for the second,
    then start and complete the first (which goes to Weave's inbox); those requests, and when
    the first step was done."""
    base, headers = tenant.server.url, tenant.headers
    with Client(base, token=tenant.token) as client:
        client.publish_workflow(tenant.namespace, "two-steps", TWO_STEPS)
        client.start_workflow(tenant.namespace, "two-steps")
    first = Poll(tenant, handlers=["e2e.first"]).result()[0]
    seconds = [Poll(tenant, handlers=["e2e.second"]) for _ in range(waiting)]
    attempt = f"{base}/v1/attempts/{first['attempt_id']}"
    httpx.post(f"{attempt}/start", json={"token": first["token"]}, headers=headers)
    completed = httpx.post(
        f"{attempt}/complete",
        json={"token": first["token"], "outcome": "succeeded", "result": {}},
        headers=headers,
    )
    assert completed.status_code == 200, completed.text
    return seconds, time.monotonic()


def test_a_task_submitted_to_one_replica_wakes_a_worker_waiting_on_another(
    server: Server, everyone: Tenant
) -> None:
    poll = Poll(everyone)
    submitted = time.monotonic()
    task_id = submit(server, everyone)  # the other replica: its wake-ups do not reach `pod`
    assert [lease["task_id"] for lease in poll.result()] == [task_id]
    assert poll.returned_at - submitted < PROMPT


def test_one_submission_many_waiting_requests_one_grant_inv2(
    server: Server, everyone: Tenant
) -> None:
    polls = [Poll(everyone) for _ in range(4)]
    task_id = submit(server, everyone)
    wait_until(lambda: any(p.leases for p in polls), timeout=PROMPT)
    time.sleep(1.0)  # the other woken requests have claimed too, and found nothing
    granted = [lease["task_id"] for p in polls for lease in p.leases]
    assert granted == [task_id]


def test_a_schedule_firing_wakes_a_waiting_worker(
    everyone: Tenant, mariadb_engine: sa.Engine
) -> None:
    poll = Poll(everyone)
    with Client(everyone.server.url, token=everyone.token) as client:
        client.create_schedule(
            everyone.namespace, "every-second", cron="* * * * * *", handler="e2e.scheduled"
        )
    created = time.monotonic()
    try:
        assert [lease["handler"] for lease in poll.result()] == ["e2e.scheduled"]
    finally:
        delete_schedules(mariadb_engine, everyone.namespace, "every-second")
    # The first instant (≤ 1 s) plus a scheduler pass (1 s) plus the probe: not the 30 s poll.
    assert poll.returned_at - created < 2.0 + PROMPT


def test_weave_making_the_next_step_ready_wakes_a_waiting_worker(everyone: Tenant) -> None:
    [second], done = finish_the_first_of_two_steps(everyone, waiting=1)
    assert [lease["handler"] for lease in second.result()] == ["e2e.second"]
    # The inbox pass (0.2 s) runs in the supervising process; only the probe reaches here.
    assert second.returned_at - done < PROMPT


def test_every_scrape_counts_the_whole_pod(pod: Server, everyone: Tenant) -> None:
    for _ in range(20):
        submit(pod, everyone)
    sample = re.compile(
        rf'orbit_tasks_submitted_total\{{namespace="{everyone.namespace}",queue="default",'
        r'result="new"\} (\S+)'
    )
    totals = set()
    for _ in range(8):  # fresh connections: the kernel spreads them over the processes
        text = httpx.get(f"{pod.url}/metrics", headers={"Connection": "close"}).text
        match = sample.search(text)
        totals.add(float(match.group(1)) if match else 0.0)
    assert totals == {20.0}


def test_concurrent_submissions_to_a_pod_are_each_accepted_once_inv6(
    pod: Server, everyone: Tenant
) -> None:
    """Both HTTP processes group the submissions they receive (api/submit_groups.py): 8
    clients on connections of their own (spread over the two processes by the kernel) each
    submit 25 tasks under keys, then again; every key names one task, and the second round
    replays them all."""
    keys = [[f"k-{c}-{n}" for n in range(25)] for c in range(8)]

    def submit_all(own: list[str]) -> list[tuple[str, bool]]:
        with Client(pod.url, token=everyone.token) as client:
            return [
                (task.id, task.replayed)
                for task in (
                    client.submit(everyone.namespace, handler="e2e.echo", idempotency_key=key)
                    for key in own
                )
            ]

    with ThreadPoolExecutor(8) as clients:
        first = [pair for part in clients.map(submit_all, keys) for pair in part]
        again = [pair for part in clients.map(submit_all, keys) for pair in part]
    assert len({task_id for task_id, _ in first}) == 200
    assert not any(replayed for _, replayed in first)
    assert [task_id for task_id, _ in again] == [task_id for task_id, _ in first]
    assert all(replayed for _, replayed in again)


def test_the_engine_loops_run_once_per_pod_and_the_gauge_loop_per_process(pod: Server) -> None:
    log = Path(pod.log).read_text()
    started = re.findall(r'"msg": "engine loop started", "loop": "([^"]+)"', log)
    assert sorted(set(started)) == sorted(
        [
            "reaper",
            "liveness",
            "deliveries",
            "scheduler",
            "weave-inbox",
            "weave-timers",
            "promoter",
            "gauges",
        ]
    )
    assert started.count("reaper") == 1
    assert started.count("liveness") == 1, "the pod is one replica: one liveness beat"
    assert started.count("gauges") == 2
    assert len(re.findall(r"Started server process", log)) == 2


def test_http_processes_stop_when_their_supervisor_is_killed(
    mariadb_url: str, tmp_path: Path
) -> None:
    """SIGKILL leaves the supervising process no chance to stop its HTTP processes: they notice
    and stop themselves, rather than serve on without the engine loops."""
    server = start_server(mariadb_url, tmp_path / "server.log", "--workers", "2")
    children = wait_until(lambda: http_processes(server.process.pid), timeout=30)
    server.process.kill()
    server.process.wait(10)
    wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in children), timeout=20)
    assert "the supervising process is gone" in server.log.read_text()


def http_processes(pid: int) -> list[int]:
    """The two uvicorn processes among ``pid``'s children (not multiprocessing's tracker)."""
    children = []
    for thread in Path(f"/proc/{pid}/task").iterdir():
        children += [int(c) for c in (thread / "children").read_text().split()]
    spawned = [c for c in children if "spawn_main" in Path(f"/proc/{c}/cmdline").read_text()]
    return spawned if len(spawned) == 2 else []


def test_a_submission_to_one_process_wakes_requests_waiting_in_the_other_inv2(
    pod: Server, everyone: Tenant
) -> None:
    """Six requests and six submissions, each on its own connection, so the kernel spreads both
    over the pod's two processes: the shared probe of each process wakes its requests for the
    other's submissions, every request gets one task well before its 30 s poll would have
    found it, and no task is granted twice (invariant 2)."""
    polls = [Poll(everyone) for _ in range(6)]
    submitted = time.monotonic()
    task_ids = {submit(pod, everyone, new_connection=True) for _ in range(len(polls))}
    granted = [lease["task_id"] for p in polls for lease in p.result()]
    assert sorted(granted) == sorted(task_ids)
    assert max(p.returned_at for p in polls) - submitted < PROMPT
