"""Worker behaviour that needs no server: registration rules, start-up failures, and that a stop
request or SIGTERM ends ``run()`` even while the server is unreachable. Draining handlers in
flight is tested against the real server (tests/e2e/workers/test_worker_e2e.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest

from orbit_sdk import RetryPolicy, TaskContext, Unauthorized, Worker
from orbit_sdk._wire import calls

from .conftest import Fault, Faults, problem
from .test_models import SESSION

ONE_TRY = RetryPolicy(max_attempts=1)


def unreachable(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused")


def worker(
    success: Callable[[httpx.Request], httpx.Response] = unreachable,
    script: Sequence[Fault] = (),
    **kwargs: Any,
) -> tuple[Worker, Faults]:
    faults = Faults(list(script), success=success)
    options: dict[str, Any] = {"namespace": "shop", "retry": ONE_TRY, **kwargs}
    return Worker("http://orbit.test", transport=httpx.MockTransport(faults), **options), faults


def test_handlers_register_once_and_keep_the_function() -> None:
    w, _ = worker()

    @w.handler("shop.echo")
    def echo(ctx: TaskContext, params: object) -> object:
        return params

    @w.handler("shop.charge", safety="unsafe")
    async def charge(ctx: TaskContext, params: object) -> object:
        return None

    assert echo(None, 1) == 1  # type: ignore[arg-type]  # the decorator returns it unchanged
    assert {n: h.safety for n, h in w.handlers.items()} == {
        "shop.echo": "safe",
        "shop.charge": "unsafe",
    }
    with pytest.raises(ValueError, match="already registered"):
        w.register("shop.echo", echo)
    with pytest.raises(ValueError, match="safety"):
        w.handler("x", safety="maybe")


def test_worker_options_are_checked_up_front(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="concurrency"):
        worker(concurrency=0)
    with pytest.raises(ValueError, match="lease_wait_seconds"):
        worker(lease_wait_seconds=120)
    monkeypatch.setenv("ORBIT_POD_UID", "pod-123")
    w, _ = worker(heartbeat_interval=40)
    assert w.pod_uid == "pod-123"
    assert w.session_ttl_seconds >= 120  # survives missed beats
    assert w.name  # hostname-pid by default


def test_stop_ends_run_while_the_server_is_unreachable() -> None:
    w, faults = worker()
    thread = w.run_in_thread()
    deadline = time.monotonic() + 5
    while not faults.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    assert faults.requests, "the worker should be trying to register"
    began = time.monotonic()
    w.stop()
    thread.join(5)
    assert not thread.is_alive()
    assert time.monotonic() - began < 5
    assert all(r.url.path == "/v1/worker-sessions" for r in faults.requests)


def test_a_refused_registration_ends_run_with_the_error() -> None:
    w, faults = worker(script=[problem(401, "unauthorized", "bad token")])
    with pytest.raises(Unauthorized):
        w.run()
    assert len(faults.requests) == 1
    assert w.wait_ready(0)  # waiters are released, not left hanging


def test_sigterm_ends_run_while_the_server_is_unreachable_and_restores_the_handler() -> None:
    assert threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM)
    w, _ = worker()
    timer = threading.Timer(0.2, os.kill, args=(os.getpid(), signal.SIGTERM))
    timer.start()
    began = time.monotonic()
    w.run()
    timer.join()
    assert time.monotonic() - began < 5
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handler is back


def test_importing_the_sdk_loads_no_platform_code() -> None:
    code = (
        "import sys, orbit_sdk; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'orbit', 'orbit_store', 'orbit_operator', 'sqlalchemy', 'pymysql', 'alembic', "
        "'kopf', 'kubernetes'}); print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_only_an_unsafe_declaration_is_sent_at_start() -> None:
    """The server keeps the stricter class, so 'safe' could change nothing; not sending it
    keeps safe handlers working against servers that predate the field."""
    assert calls.start_attempt("a1", "tok", "unsafe").json == {"token": "tok", "safety": "unsafe"}
    assert calls.start_attempt("a1", "tok", "safe").json == {"token": "tok"}
    assert calls.start_attempt("a1", "tok").json == {"token": "tok"}


def _registrations(faults: Faults, at_least: int) -> list[Any]:
    deadline = time.monotonic() + 10
    while len(faults.requests) < at_least and time.monotonic() < deadline:
        time.sleep(0.01)
    sent = list(faults.requests)  # the worker may still be sending
    return [json.loads(r.content) for r in sent if r.url.path == "/v1/worker-sessions"]


def test_every_resend_of_a_registration_carries_its_one_key() -> None:
    """A copy the server handles late must answer the session this registration opened, not
    replace the one the worker then holds (the server matches them by this key)."""
    w, faults = worker()  # unreachable: the worker keeps resending its registration
    thread = w.run_in_thread()
    try:
        sent = _registrations(faults, 3)
    finally:
        w.stop()
        thread.join(5)
    keys = {body["registration_key"] for body in sent}
    assert len(sent) >= 3 and len(keys) == 1 and all(keys)


def test_a_registration_answered_with_an_ended_session_registers_anew_with_a_new_key() -> None:
    ended = httpx.Response(200, json={**SESSION, "id": "old", "state": "CLOSED"})
    active = httpx.Response(200, json={**SESSION, "id": "new"})
    w, faults = worker(success=lambda request: active, script=[ended])
    thread = w.run_in_thread()
    try:
        assert w.wait_ready(10)
        sent = _registrations(faults, 2)[:2]
    finally:
        w.stop()
        thread.join(5)
    assert w.session is not None and w.session.id == "new"
    assert sent[0]["registration_key"] != sent[1]["registration_key"]
