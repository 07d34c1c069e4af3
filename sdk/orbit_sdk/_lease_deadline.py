"""The lease's end on this process's own monotonic clock, so a stopped worker stops by itself.

A worker that stops (SIGSTOP, a long GC pause, a frozen VM) or cannot reach the server learns
of a lost lease only from the next heartbeat answer, and may keep writing side effects after a
newer attempt began. So every answer that sets a lease (grant, start, heartbeat) also says how
many seconds remain; the worker adds them to the moment it *sent* that request — never later
than the server's own clock — and treats the lease as lost from then on, heartbeat or not.

The monotonic clock keeps running while the process is stopped, so the first look after a
SIGCONT already sees the deadline passed. What no local check can close is the gap between a
check and the write after it; the attempt's ``generation`` is the fence for systems downstream.
"""

from __future__ import annotations

import threading
import time


class LeaseDeadline:
    """When this attempt's lease ends, as ``time.monotonic()``; None until a server said."""

    def __init__(self) -> None:
        self._at: float | None = None
        self._lock = threading.Lock()

    def update(self, measured_from: float, remaining_seconds: float | None) -> None:
        """A server answer: the lease ends ``remaining_seconds`` after ``measured_from`` (the
        monotonic time the request was sent, or an answer received for a grant). Older
        servers send nothing: then no local deadline applies."""
        if remaining_seconds is None:
            return
        with self._lock:
            self._at = measured_from + remaining_seconds

    def seconds_left(self) -> float | None:
        with self._lock:
            at = self._at
        return None if at is None else at - time.monotonic()

    def passed(self) -> bool:
        left = self.seconds_left()
        return left is not None and left <= 0


#: What a handler is told when its attempt outlived its lease here.
LOCAL_EXPIRY_REASON = "the lease's deadline passed on this worker without a renewal"


def report_timeout_passed(began: float, report_timeout: float) -> bool:
    """Report retries are bounded: after ``report_timeout`` seconds without a definitive
    answer the worker stops; the server's lease rules settle the attempt."""
    return time.monotonic() - began > report_timeout
