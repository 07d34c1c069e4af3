"""Ctrl-C for the CLI's endless loops (``orbit task list --watch``): the first one asks the
loop to end once the request in flight has returned; a second one interrupts at once.

A KeyboardInterrupt raised in the middle of an HTTP call can land inside the client's
connection-pool bookkeeping and leave it locked, so the process hangs on exit instead of
ending; a flag checked between calls cannot."""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any


class CtrlC:
    """``with CtrlC() as ctrl_c: while not ctrl_c.wait(interval): ...``"""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> CtrlC:
        if threading.current_thread() is threading.main_thread():  # signals go to the main one
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            self._installed = True
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)

    def _on_sigint(self, _signum: int, _frame: FrameType | None) -> None:
        self.requested.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the second one: at once

    def wait(self, seconds: float) -> bool:
        """Sleep ``seconds``; True as soon as Ctrl-C was pressed."""
        return self.requested.wait(seconds)
