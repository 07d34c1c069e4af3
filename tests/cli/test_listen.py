"""The socket `orbit server` listens on: every accepted connection must send small writes at
once. Without TCP_NODELAY each response waited ~40 ms for the client's delayed ACK (Nagle),
which capped a worker at ~25 calls a second whatever the server's speed."""

from __future__ import annotations

import socket

from orbit.cli.processes.listen import bind


def test_accepted_connections_have_nagle_switched_off() -> None:
    with bind("127.0.0.1", 0, "server") as listener:
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):
            accepted, _ = listener.accept()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
