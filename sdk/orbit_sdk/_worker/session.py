"""The worker's session: registering it until the server answers, and again when it has ended.

The session declares what the worker serves (namespace, queues, handlers, pod) as they are when
it registers, so the CLI and a WorkerPool may still change them on the ``Worker`` before
``run()``; the keeper reads them from the worker each time instead of copying them once.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Protocol

import httpx

from .._wire import calls
from .._wire.transport import Call
from ..models import Identity, Session
from .attempt import RegisteredHandler, is_transient
from .live import Backoff

log = logging.getLogger("orbit_sdk.worker")


class RegisteringWorker(Protocol):
    """What a registration reads of its worker (``worker.Worker`` is one), named here so that
    this module does not import the worker module back."""

    name: str
    namespace: str | None
    queues: list[str]
    session_ttl_seconds: int
    pod_uid: str | None

    @property
    def handlers(self) -> Mapping[str, RegisteredHandler]: ...

    def send(self, call: Call) -> httpx.Response: ...


class SessionKeeper:
    """Holds the worker's current session and registers a new one when it is missing or ended.

    ``interrupted`` says a signal arrived (the run loop has not turned it into a stop yet);
    ``fatal`` ends the worker on an answer no retry can change."""

    def __init__(
        self,
        worker: RegisteringWorker,
        *,
        stopping: threading.Event,
        interrupted: Callable[[], bool],
        fatal: Callable[[BaseException], None],
    ) -> None:
        self.worker = worker
        self.current: Session | None = None
        self.stale = False
        self._stopping = stopping
        self._interrupted = interrupted
        self._fatal = fatal

    @property
    def needs_registration(self) -> bool:
        return self.current is None or self.stale

    def register_until_ok(self) -> bool:
        """Open a session, retrying while the server is unreachable; False if stopped first."""
        backoff = Backoff(maximum=5.0)  # short: a signal is only noticed between tries
        # One key for this registration, on every resend: a copy the server handles late
        # answers the session it opened rather than replacing the one we then hold.
        key = str(uuid.uuid4())
        while not self._stopping.is_set() and not self._interrupted():
            try:
                session = Session.model_validate(self.worker.send(self._create(key)).json())
                if session.state != "ACTIVE":  # this registration's session ended meanwhile
                    log.warning(
                        "worker %s: session %s is %s already; registering anew",
                        self.worker.name,
                        session.id,
                        session.state,
                    )
                    key = str(uuid.uuid4())
                    continue
                self.current = session
            except Exception as exc:
                if not is_transient(exc):
                    self._fatal(exc)
                    return False
                log.warning("worker %s: cannot register session: %s", self.worker.name, exc)
                backoff.sleep(self._stopping)
                continue
            self.stale = False
            log.info(
                "worker %s: session %s (generation %d)",
                self.worker.name,
                session.id,
                session.generation,
            )
            return True
        return False

    def _create(self, key: str) -> Call:
        worker = self.worker
        return calls.create_session(
            self._namespace(),
            worker.name,
            worker.queues,
            worker.session_ttl_seconds,
            worker.pod_uid,
            handlers=sorted(worker.handlers),  # granted only tasks it can run
            registration_key=key,
        )

    def _namespace(self) -> str:
        """The namespace given, else the token's own (learned once from ``GET /v1/whoami``)."""
        worker = self.worker
        if worker.namespace is None:
            worker.namespace = Identity.model_validate(worker.send(calls.whoami()).json()).namespace
        return worker.namespace

    def ended(self, state: str) -> None:
        """The server says the session is no longer live: revoked ends the worker, any other
        end registers a new session before the next lease."""
        if state == "REVOKED":
            self._fatal(RuntimeError(f"worker session was revoked (worker {self.worker.name})"))
        elif not self._stopping.is_set():
            log.warning("worker %s: session is %s; registering a new one", self.worker.name, state)
            self.stale = True
