"""Attempt threads are reused: a busy worker runs thousands of short attempts, and a
thread started per attempt was a tenth of its CPU. Threads stay daemons — a handler that never
returns must not keep the process alive past the drain timeout — and an idle one exits after a
while, so a worker that was busy once does not keep ``concurrency`` threads for good."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx

from orbit_sdk import Lease, TaskContext
from orbit_sdk._wire.transport import Call
from orbit_sdk._worker.attempt import AttemptRunner, RegisteredHandler
from orbit_sdk._worker.attempt_threads import AttemptThreads
from orbit_sdk._worker.live import LiveAttempt, LiveSet

from .test_models import LEASE


def _runner(ran_on: list[int], gate: threading.Event | None = None) -> AttemptRunner:
    def handler(ctx: TaskContext, params: object) -> object:
        ran_on.append(threading.get_ident())
        if gate is not None:
            gate.wait(10)
        return None

    def send(call: Call) -> httpx.Response:
        return httpx.Response(200, json={"status": "applied", "task_state": "SUCCEEDED"})

    return AttemptRunner(
        send=send,
        handlers={"shop.echo": RegisteredHandler(handler, "safe")},
        live=LiveSet(),
        stopping=threading.Event(),
        abandon=threading.Event(),
    )


def _attempt(n: int) -> LiveAttempt:
    lease = Lease.model_validate(
        {**LEASE, "attempt_id": f"a{n}", "handler": "shop.echo", "started": True}
    )
    return LiveAttempt(lease, TaskContext(lease, "w"))


def _wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


def test_attempts_run_one_after_another_share_one_thread() -> None:
    ran_on: list[int] = []
    runner = _runner(ran_on)
    for n in range(20):
        runner.spawn(_attempt(n))
        _wait_for(lambda: len(runner.live) == 0 and runner.threads.idle == runner.threads.alive)
    assert len(ran_on) == 20
    assert len(set(ran_on)) == 1


def test_attempts_held_at_once_each_have_a_thread_and_the_threads_are_reused() -> None:
    ran_on: list[int] = []
    gate = threading.Event()
    runner = _runner(ran_on, gate)
    for n in range(3):
        runner.spawn(_attempt(n))
    _wait_for(lambda: len(ran_on) == 3)
    assert len(set(ran_on)) == 3, "three attempts at once ran on three threads"
    gate.set()
    _wait_for(lambda: runner.threads.idle == 3)
    for n in range(3, 6):
        runner.spawn(_attempt(n))
    # Idle too: an attempt leaves ``live`` before its thread logs the report, and a thread that
    # logs after the test ended writes to pytest's closed capture ("Logging error").
    _wait_for(
        lambda: (
            len(ran_on) == 6
            and len(runner.live) == 0
            and runner.threads.idle == runner.threads.alive
        )
    )
    assert set(ran_on[3:]) <= set(ran_on[:3]), "the next three reused the idle threads"


def test_an_idle_thread_exits_after_its_idle_time() -> None:
    ran: list[str] = []
    threads = AttemptThreads(ran.append, idle_seconds=0.05)
    threads.submit("first")
    _wait_for(lambda: ran == ["first"] and threads.idle == 1)
    _wait_for(lambda: threads.idle == 0 and threads.alive == 0)
    threads.submit("second")  # a new thread, as at the start
    _wait_for(lambda: ran == ["first", "second"])


def test_attempt_threads_are_daemons() -> None:
    daemon: list[bool] = []
    threads: AttemptThreads[str] = AttemptThreads(
        lambda _: daemon.append(threading.current_thread().daemon)
    )
    threads.submit("x")
    _wait_for(lambda: daemon == [True])
