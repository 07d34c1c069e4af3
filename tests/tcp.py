"""Plain TCP pieces the test harnesses' proxies share (tests/chaos/balancer.py,
tests/half_open_proxy.py): a listening socket on a free local port, and closing a connection's
two sockets whatever state they are in."""

from __future__ import annotations

import contextlib
import socket


def listen_locally() -> tuple[socket.socket, int]:
    """A socket listening on 127.0.0.1 at a free port, and the port."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(256)
    return listener, int(listener.getsockname()[1])


def close_both(*sockets: socket.socket) -> None:
    """Shut down and close each socket (one already closed is fine)."""
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
