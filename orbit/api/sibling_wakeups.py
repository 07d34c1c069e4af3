"""Wake-ups between the processes of one pod (`orbit server --workers N`).

A submission wakes the lease requests waiting in its own process at once (wakeups.py). A
request waiting in a sibling process heard of it only from that process's shared probe
(ready_watch.py, every ~75 ms): dispatch p99 15-69 ms with two processes against 7-15 ms with
one (docs/performance.md). So each HTTP process binds a Unix datagram socket in a directory the
supervising process made for the pod, and passes on to its siblings what its own waiters did not
take: one small datagram per notification and sibling, never waited for — a sibling whose
buffer is full, or that is gone, misses it, and its probe remains the fallback. The supervising
process, whose engine loops (Weave) make tasks READY but hold no waiter, passes on all of theirs.

What travels is only a hint ("N tasks of this queue and handler became READY in this namespace"):
the woken requests claim through the database as always (SKIP LOCKED), so a lost, late or
doubled datagram costs a wake-up, never a task. Another pod's processes are not reached: across
replicas the probe is the mechanism; this is a shortcut inside one pod, not a message bus.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("orbit.api.sibling_wakeups")

#: Fields of a datagram: namespace, queue, handler, count (names never hold a NUL).
_SEP = "\0"
#: How long the list of siblings is trusted before the directory is read again (a process
#: restarted by the supervisor appears with a new socket).
PEERS_TTL = 1.0
_SUFFIX = ".sock"

Deliver = Callable[[str, str, str, int], object]


class SiblingWakeups:
    """This process's end of the pod's wake-up sockets in ``directory``."""

    def __init__(self, directory: str | Path, name: str | None = None) -> None:
        """``name``: of this end's socket, unique in the pod (default: the process id)."""
        self.directory = Path(directory)
        self.path = self.directory / f"{name or os.getpid()}{_SUFFIX}"
        self._sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sender.setblocking(False)
        self._receiver: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._peers: list[str] = []
        self._peers_read = -PEERS_TTL
        self._lock = threading.Lock()  # the peer list: notifications come from request threads
        self.sent = 0  # datagrams sent, for tests and the bench
        self.received = 0

    def listen(self, loop: asyncio.AbstractEventLoop, deliver: Deliver) -> None:
        """Receive the siblings' notifications on ``loop`` (this process's event loop), handing
        each to ``deliver(namespace, queue, handler, count)`` there."""
        receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        receiver.setblocking(False)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a pid reused after a crash left its file behind
        try:
            receiver.bind(str(self.path))
        except OSError as error:  # the directory gone, a path too long for a Unix socket…
            receiver.close()
            log.warning(
                "not receiving wake-ups from sibling processes: the probe alone wakes requests",
                extra={"path": str(self.path), "error": str(error)},
            )
            return
        self._receiver, self._loop = receiver, loop
        loop.add_reader(receiver.fileno(), self._drain, deliver)

    def close(self) -> None:
        if self._receiver is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._receiver.fileno())
            self._receiver.close()
            self._receiver = None
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        self._sender.close()

    def pass_on(self, namespace: str, queue: str, handler: str, count: int) -> None:
        """Tell every sibling that ``count`` tasks became READY (thread-safe, never blocks)."""
        message = _SEP.join((namespace, queue, handler, str(count))).encode()
        for peer in self._current_peers():
            try:
                self._sender.sendto(message, peer)
                self.sent += 1
            except BlockingIOError:
                pass  # its buffer is full: it is busy anyway, and its probe will find the task
            except (ConnectionRefusedError, FileNotFoundError):
                self._forget(peer)  # a process that is gone (refused: nobody bound the file)
            except OSError as error:
                log.debug("wake-up not passed on", extra={"peer": peer, "error": str(error)})

    def _current_peers(self) -> list[str]:
        with self._lock:
            if time.monotonic() - self._peers_read >= PEERS_TTL:
                own = self.path.name
                try:
                    names = os.listdir(self.directory)
                except FileNotFoundError:  # the pod is stopping
                    names = []
                self._peers = [
                    str(self.directory / name)
                    for name in names
                    if name.endswith(_SUFFIX) and name != own
                ]
                self._peers_read = time.monotonic()
            return self._peers

    def _forget(self, peer: str) -> None:
        with self._lock:
            self._peers = [p for p in self._peers if p != peer]
        with contextlib.suppress(OSError):
            os.unlink(peer)  # refused: no process has it bound, nor will (pids are unique)

    def _drain(self, deliver: Deliver) -> None:
        """Every datagram waiting (the loop calls this when the socket is readable)."""
        receiver = self._receiver
        while receiver is not None:
            try:
                data = receiver.recv(1024)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                log.exception("wake-up socket failed")
                return
            self.received += 1
            try:
                namespace, queue, handler, count = data.decode().split(_SEP)
                deliver(namespace, queue, handler, int(count))
            except ValueError:
                log.warning("malformed wake-up datagram ignored", extra={"bytes": len(data)})
