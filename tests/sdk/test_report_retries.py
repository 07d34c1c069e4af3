"""A report the server cannot take yet is retried at least every third of the lease (found by
the chaos run: after a server outage a lease gets only its own length of grace, and a report
that waited out a 10-second backoff arrived after a 3-second lease had lapsed, so a task that
had finished ran again)."""

from __future__ import annotations

import http.server
import json
import threading
import time

import httpx

from orbit_sdk import Lease, TaskContext
from orbit_sdk._wire.transport import Call, SyncTransport
from orbit_sdk._worker.attempt import AttemptRunner, RegisteredHandler
from orbit_sdk._worker.live import LiveAttempt, LiveSet
from orbit_sdk._worker.outcome import Report
from orbit_sdk._worker.report_buffer import DEFAULT_LINGER, report_batcher

from .test_models import LEASE


class RecordedWaits(threading.Event):
    """An event that is never set and records how long each retry would have waited."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        return False


def _report_after_failures(lease_seconds: float, failures: int) -> list[float]:
    calls = 0

    def send(call: Call) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls <= failures:
            raise httpx.ConnectError("server unreachable")
        return httpx.Response(200, json={"status": "applied", "task_state": "SUCCEEDED"})

    waits = RecordedWaits()
    runner = AttemptRunner(
        send=send,
        handlers={"shop.echo": RegisteredHandler(lambda ctx, params: None, "safe")},
        live=LiveSet(),
        stopping=threading.Event(),
        abandon=waits,
    )
    lease = Lease.model_validate(
        {**LEASE, "handler": "shop.echo", "started": True, "lease_remaining_seconds": lease_seconds}
    )
    runner.report(LiveAttempt(lease, TaskContext(lease, "w")), Report("succeeded"))
    assert calls == failures + 1
    return waits.waits


def test_report_retries_come_at_least_every_third_of_a_short_lease() -> None:
    waits = _report_after_failures(3.0, failures=8)
    assert len(waits) == 8 and max(waits) <= 1.0


def test_report_retries_of_a_long_lease_back_off_to_fifteen_seconds_at_most() -> None:
    waits = _report_after_failures(300.0, failures=8)
    assert max(waits) > 5.0 and max(waits) <= 15.0


class StuckFirstCall(http.server.ThreadingHTTPServer):
    """A real HTTP server whose first report call never gets an answer (a server stuck on a
    database it lost), and which answers every later one."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["content-length"]))
                server.calls += 1
                if server.calls == 1:
                    server.release.wait(30)
                    return
                items = [{"attempt_id": "a1", "status": "ok", "outcome_status": "applied"}]
                body = json.dumps({"results": items, "status": "applied"}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.daemon_threads = True


def test_a_report_stuck_in_its_call_is_sent_again_before_the_lease_ends() -> None:
    """Chaos seeds 824288 and 919245: a report call that got no answer waited out the client's
    10 s timeout while a 3 s lease lapsed, and the finished task ran again."""
    server = StuckFirstCall()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = httpx.Client(base_url=f"http://127.0.0.1:{server.server_port}", timeout=10)
    send = SyncTransport(client).send
    runner = AttemptRunner(
        send=send,
        handlers={"shop.echo": RegisteredHandler(lambda ctx, params: None, "safe")},
        live=LiveSet(),
        stopping=threading.Event(),
        abandon=threading.Event(),
    )
    runner.reports = report_batcher(send, DEFAULT_LINGER)
    lease = Lease.model_validate(
        {**LEASE, "handler": "shop.echo", "started": True, "lease_remaining_seconds": 6.0}
    )
    began = time.monotonic()
    try:
        runner.report(LiveAttempt(lease, TaskContext(lease, "w")), Report("succeeded"))
        took = time.monotonic() - began
    finally:
        server.release.set()
        server.shutdown()
        client.close()
    assert server.calls == 2, "the stuck call was given up and the report sent again"
    assert took < 6.0, f"the report landed {took:.1f}s after it began, past its 6 s lease"
