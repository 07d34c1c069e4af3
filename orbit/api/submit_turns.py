"""Submission transactions shared by a pod's HTTP processes: at most N at once (issue 9).

``--submit-transactions N`` bounds the submission groups' transactions (``submit_groups``). Each
HTTP process of ``orbit server --workers M`` groups only the submissions it receives; when each
also ran its own N transactions, the pod ran M x N at once, every process started a transaction
as soon as one submission arrived, and the groups shrank with each process added (two
processes: 1.95 submissions per group instead of 3.87, docs/performance.md) — so each
submission cost the server and MariaDB more, on the same cores.

A *turn* is one of N lock files in the pod's shared directory, held with ``flock`` for one
transaction. A process's group thread takes a turn before it takes its group: while another
process's transaction runs, this process's submissions wait and go together in the next one.
A process waits for a turn in a doorway (one more lock file, held until a turn is its own), so
a process that just let its turn go and wants the next queues behind one that was already
waiting, instead of taking the turn back before the waiter wakes: two busy processes alternate.

The kernel releases a turn whose process dies, so a crashed process cannot hold one. A turn is
about cost, not correctness (concurrent submission transactions are safe): when the lock files
cannot be used (the directory is gone while the pod stops), a transaction runs without a turn.

A lone process (no shared directory) needs no turns: its own thread pool is the bound.
"""

from __future__ import annotations

import fcntl
import itertools
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_PREFIX = "submit-turn-"
log = logging.getLogger("orbit.server")


class SubmitTurns:
    """The pod's ``count`` submission turns, as lock files in ``directory``."""

    def __init__(self, directory: str | Path, count: int) -> None:
        if count < 1:
            raise ValueError("count must be at least 1")
        self.paths = [Path(directory) / f"{_PREFIX}{i}.lock" for i in range(count)]
        self.doorway = Path(directory) / f"{_PREFIX}doorway.lock"
        self._next = itertools.count()  # the turn to wait for when none is free

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Hold one turn for the block: a free one if there is one, else wait for one. Each
        turn is taken through a descriptor of its own (``flock`` locks belong to an open file,
        so two threads of one process sharing a descriptor would not exclude each other)."""
        try:
            with self._in_doorway():
                fd = self._free()
                if fd is None:
                    fd = self._wait()
        except OSError as exc:
            log.warning("submission turns unavailable, running without one: %s", exc)
            yield
            return
        try:
            yield
        finally:
            os.close(fd)  # releases the lock

    @contextmanager
    def _in_doorway(self) -> Iterator[None]:
        fd = _locked(self.doorway)
        try:
            yield
        finally:
            os.close(fd)

    def _free(self) -> int | None:
        for path in self.paths:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return fd
        return None

    def _wait(self) -> int:
        return _locked(self.paths[next(self._next) % len(self.paths)])


def _locked(path: Path) -> int:
    """A descriptor of ``path`` holding its exclusive lock, once it could be had."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the GIL is released while it waits
    except BaseException:
        os.close(fd)
        raise
    return fd
