"""The worker runtime: a session, leases, a thread per held attempt, heartbeats, drain.

Threads and why:

- the **lease thread** (``_worker.lease_loop``) long-polls for as many tasks as there are free
  slots. It is separate from the thread that called ``run()`` so a stop request never waits for
  a long poll to return; it registers the session (``_worker.session``) again when it ended;
- one daemon **attempt thread** per held attempt (``_worker.attempt_threads``: kept for the next
  attempt while idle, never more than the attempts held): start, handler, report. Daemon, so
  a handler that ignores every stop signal cannot keep the process alive after
  ``drain_timeout`` -- its lease lapses when the session closes and the server applies the
  task's safety rules (retry if safe, NEEDS_REVIEW if not);
- the **heartbeat thread** renews every held lease and the session in one batched call.

Signal handlers only bump a counter (they run on the main thread between bytecodes and must not
take locks the interrupted code may hold); ``run()`` polls it.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import socket
import threading
from collections.abc import Callable, Iterable
from types import FrameType
from typing import TypeVar

import httpx

from ._wire.transport import Call, RetryPolicy, SyncTransport
from ._worker.attempt import AttemptRunner, RegisteredHandler
from ._worker.drain import Drain
from ._worker.heartbeat import Heartbeater
from ._worker.lease_ask import DEFAULT_LEASE_LINGER, LeaseAsk
from ._worker.lease_loop import LeaseLoop
from ._worker.live import LiveSet
from ._worker.outcome import Handler
from ._worker.report_buffer import DEFAULT_LINGER, report_batcher, start_batcher
from ._worker.session import SessionKeeper
from .client import DEFAULT_TIMEOUT, resolve_server, resolve_token, sync_http
from .models import Session

log = logging.getLogger("orbit_sdk.worker")

H = TypeVar("H", bound=Handler)

#: Slots of a worker unless it says otherwise. One lease request, one transaction and one report
#: batch serve every slot of a cycle, so a short task's share of them shrinks as slots grow;
#: bench/NOTES.md has the measurement behind this number.
DEFAULT_CONCURRENCY = 16

#: The server's limit for one lease request's long poll (its task limit: ``MAX_LEASE_BATCH``).
MAX_LEASE_WAIT = 60


class Worker:
    """Runs registered handlers for tasks leased from ``queues`` of ``namespace`` (default: the
    token's own namespace, asked from the server when the worker starts).

    ``concurrency`` bounds the attempts whose handler may still run (leased or running); an
    attempt whose outcome is being reported frees its slot, and at most ``concurrency`` such
    reports wait at once (``_worker.live.LiveSet``). ``heartbeat_interval``
    defaults to what the server asks for in the session. ``drain_timeout`` is how long a stop
    waits for running handlers before closing the session anyway; keep it below the pod's
    termination grace period. ``pod_uid`` (default ``$ORBIT_POD_UID``) binds the session to a
    pod, so the operator can revoke it when the pod goes away. The session declares the
    handlers registered before ``run()``: the server grants this worker only their tasks.
    Starts and outcome reports of attempts that finish together go in one call, each gathered
    for at most ``batch_linger`` seconds (``None``: one call per attempt, protocol 1).
    ``report_timeout`` bounds how long an outcome is re-sent while the server cannot be
    reached (it keeps the lease renewed meanwhile); after it the server's lease rules decide.
    With ``lease_with_start`` the server starts grants of ``safe`` handlers with the lease
    (worker protocol 3; no start call); unsafe handlers are started by a call. Under a backlog
    (the last lease got all it asked for) a worker holding attempts waits up to
    ``lease_linger`` seconds for all its slots to be free, so it asks for many tasks at once
    (``_worker.lease_ask``).
    """

    def __init__(
        self,
        server: str | None = None,
        *,
        token: str | None = None,
        namespace: str | None = None,
        queues: Iterable[str] = ("default",),
        concurrency: int = DEFAULT_CONCURRENCY,
        name: str | None = None,
        heartbeat_interval: float | None = None,
        lease_wait_seconds: float = 10,
        drain_timeout: float = 30,
        report_timeout: float = 600,
        pod_uid: str | None = None,
        session_ttl_seconds: int = 60,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        batch_linger: float | None = DEFAULT_LINGER,
        lease_with_start: bool = True,
        lease_linger: float = DEFAULT_LEASE_LINGER,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if not 0 <= lease_wait_seconds <= MAX_LEASE_WAIT:
            raise ValueError(f"lease_wait_seconds must be within 0..{MAX_LEASE_WAIT}")
        if lease_linger < 0:
            raise ValueError("lease_linger must be at least 0 seconds")
        self.server = resolve_server(server)
        self.namespace = namespace
        self.queues = list(queues)
        # Unique per Worker object: a re-registering name closes that name's older sessions.
        self.name = name or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self.heartbeat_interval = heartbeat_interval
        self.lease_wait_seconds = lease_wait_seconds
        self.drain_timeout = drain_timeout
        self.pod_uid = pod_uid or os.environ.get("ORBIT_POD_UID") or None
        ttl = session_ttl_seconds
        if heartbeat_interval is not None:  # a session must survive a couple of missed beats
            ttl = max(ttl, int(heartbeat_interval * 3) + 1)
        self.session_ttl_seconds = min(ttl, 3600)
        self.batch_linger = batch_linger
        bearer = resolve_token(token)
        #: Requests carry a token (given here or from ORBIT_TOKEN); without one the server
        #: refuses every call.
        self.has_token = bearer is not None
        http = sync_http(
            self.server,
            bearer,
            timeout,
            transport,
            # every attempt thread (up to 2x concurrency, LiveSet: set later too, by the CLI or
            # a WorkerPool) may be sending while a long poll and a heartbeat are open
            limits=httpx.Limits(max_connections=None),
        )
        self._handlers: dict[str, RegisteredHandler] = {}
        self._ask = LeaseAsk(
            self._handlers, concurrency, linger=lease_linger, with_start=lease_with_start
        )
        self._live = LiveSet()
        self._stopping = threading.Event()  # no new leases; drain
        self._abandon = threading.Event()  # drain_timeout passed: stop retrying reports
        # Transport retry sleeps end early once we give up on the drain, so no thread lingers
        # in a backoff after run() returned.
        self._transport = SyncTransport(http, retry, sleep=self._abandon.wait)
        self._ready = threading.Event()
        self._signals = 0
        self._started = False
        self._sessions = SessionKeeper(
            self,
            stopping=self._stopping,
            interrupted=lambda: self._signals > 0,
            fatal=self._fatal,
        )
        self._runner = AttemptRunner(
            send=self.send,
            handlers=self._handlers,
            live=self._live,
            stopping=self._stopping,
            abandon=self._abandon,
            report_timeout=report_timeout,
        )
        #: Set when ``run()`` ended because of an error it could not recover from.
        self.fatal_error: BaseException | None = None

    def __repr__(self) -> str:
        return f"Worker({self.server!r}, namespace={self.namespace!r}, name={self.name!r})"

    @property
    def concurrency(self) -> int:
        """Slots (see the class); settable before ``run()`` (`orbit worker --concurrency`)."""
        return self._ask.concurrency

    @concurrency.setter
    def concurrency(self, slots: int) -> None:
        if slots < 1:
            raise ValueError("concurrency must be at least 1")
        self._ask.concurrency = slots

    # --- registration -----------------------------------------------------------------------

    def handler(self, name: str, safety: str = "safe") -> Callable[[H], H]:
        """Register ``fn(ctx, params)`` (sync or ``async def``) for tasks naming ``name``.

        ``safety="unsafe"`` declares the handler not idempotent. It is sent when an attempt
        starts and the server keeps the stricter of it and the task's own class: if the worker
        is lost mid-run, the task goes to NEEDS_REVIEW instead of running again. Safe handlers'
        grants are started with the lease (``lease_with_start``), unsafe ones by a start call.
        """
        if safety not in ("safe", "unsafe"):
            raise ValueError("safety must be 'safe' or 'unsafe'")

        def register(fn: H) -> H:
            self.register(name, fn, safety=safety)
            return fn

        return register

    def register(self, name: str, fn: Handler, *, safety: str = "safe") -> None:
        if name in self._handlers:
            raise ValueError(f"handler {name!r} is already registered")
        self._handlers[name] = RegisteredHandler(fn, safety)

    @property
    def handlers(self) -> dict[str, RegisteredHandler]:
        return dict(self._handlers)

    def serve_only(self, names: list[str]) -> None:
        """Keep only the handlers ``names`` (a WorkerPool's ``spec.handlers``); the session then
        declares just these, so the server grants this worker no other task types.

        Raises ValueError naming what is not registered: a pool that asks for a handler its
        module lacks is a configuration mistake, not something to skip quietly."""
        if self._started:
            raise RuntimeError("serve_only() must be called before run()")
        wanted = list(dict.fromkeys(names))
        if not wanted:
            raise ValueError("serve_only() needs at least one handler name")
        missing = [n for n in wanted if n not in self._handlers]
        if missing:
            known = ", ".join(sorted(self._handlers)) or "none"
            raise ValueError(
                f"handlers not registered by this worker: {', '.join(missing)} "
                f"(registered: {known})"
            )
        for name in list(self._handlers):
            if name not in wanted:
                del self._handlers[name]  # the runner shares this dict: one source of truth

    @property
    def session(self) -> Session | None:
        return self._sessions.current

    @property
    def live(self) -> LiveSet:
        return self._live

    # --- lifecycle --------------------------------------------------------------------------

    def run(self) -> None:
        """Work until ``stop()`` or SIGTERM/SIGINT, then drain and return. A second signal
        stops waiting for running handlers."""
        if self._started:
            raise RuntimeError("a Worker runs once; create a new one")
        self._started = True
        restore = self._install_signal_handlers()
        try:
            if self._sessions.register_until_ok():
                self._batch_calls()
                beats = Heartbeater(self)
                beats.start()
                leaser = threading.Thread(
                    target=self._lease_loop().run, name=f"orbit-lease-{self.name}", daemon=True
                )
                leaser.start()
                self._ready.set()
                log.info(
                    "worker %s serving %s/%s with %d slots",
                    self.name,
                    self.namespace,
                    ",".join(self.queues),
                    self.concurrency,
                )
                while not self._stopping.wait(0.2):
                    if self._signals:
                        log.info("worker %s: signal received, draining", self.name)
                        self.stop()
                self._shutdown(leaser, beats)
        finally:
            self._ready.set()
            restore()
            self._transport.close()
        if self.fatal_error is not None:
            raise self.fatal_error

    def _batch_calls(self) -> None:
        """Starts and reports go in batched calls (worker protocol 2) unless switched off."""
        if self.batch_linger is not None:
            self._runner.starts = start_batcher(self.send, self.batch_linger)
            self._runner.reports = report_batcher(self.send, self.batch_linger)

    def _lease_loop(self) -> LeaseLoop:
        return LeaseLoop(
            name=self.name,
            wait_seconds=self.lease_wait_seconds,
            send=self.send,
            sessions=self._sessions,
            ask=self._ask,
            live=self._live,
            runner=self._runner,
            stopping=self._stopping,
            fatal=self._fatal,
        )

    def run_in_thread(self) -> threading.Thread:
        """Start ``run()`` in a daemon thread (tests, ``orbit dev``); stop with ``stop()``."""
        thread = threading.Thread(target=self._run_logged, name=f"orbit-worker-{self.name}")
        thread.daemon = True
        thread.start()
        return thread

    def wait_ready(self, timeout: float | None = None) -> bool:
        """True once the session is registered and leasing began (or ``run()`` ended)."""
        return self._ready.wait(timeout)

    def stop(self) -> None:
        """Ask ``run()`` to drain and return; does not block."""
        self._stopping.set()
        self._live.notify()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def _run_logged(self) -> None:
        try:
            self.run()
        except BaseException:
            log.exception("worker %s stopped with an error", self.name)

    def _install_signal_handlers(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def on_signal(signum: int, frame: FrameType | None) -> None:
            self._signals += 1

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}

        def restore() -> None:
            for sig, old in previous.items():
                signal.signal(sig, old)

        return restore

    def _fatal(self, exc: BaseException) -> None:
        log.error("worker %s cannot continue: %s", self.name, exc)
        if self.fatal_error is None:
            self.fatal_error = exc
        self.stop()

    def _shutdown(self, leaser: threading.Thread, beats: Heartbeater) -> None:
        """Drain (``_worker.drain``): no new grants, let handlers finish (up to
        ``drain_timeout``), then close the session."""
        drain = Drain(
            name=self.name,
            send=self.send,
            runner=self._runner,
            live=self._live,
            abandon=self._abandon,
            timeout=self.drain_timeout,
            given_up=lambda: self._signals >= 2,
        )
        drain.run(self._sessions.current, leaser, beats)

    # --- session ----------------------------------------------------------------------------

    def send(self, call: Call) -> httpx.Response:
        return self._transport.send(call)

    def session_ended(self, state: str) -> None:
        """Called when the server says our session is no longer live."""
        self._sessions.ended(state)

    def effective_heartbeat_interval(self) -> float:
        if self.heartbeat_interval is not None:
            return self.heartbeat_interval
        session = self._sessions.current
        return session.heartbeat_interval_seconds if session else 10.0
