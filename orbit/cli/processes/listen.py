"""Binding the HTTP port before anything else happens, so a taken port is one clear line (and
exit 5), not a banner followed by a JSON log line. The bound socket is handed to uvicorn, so
nothing can take the port in between."""

from __future__ import annotations

import socket
from typing import Annotated

import typer

from orbit.cli.exits import ExitCode
from orbit.cli.remote import fail

MaxPayloadBytes = Annotated[
    int,
    typer.Option(
        envvar="ORBIT_MAX_PAYLOAD_BYTES",
        min=1024,
        help="Largest params of a task, or result + error of an attempt, as JSON (413 above).",
    ),
]


def bind(host: str, port: int, command: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        reason = "is already in use" if exc.errno == 98 else f"cannot be used ({exc.strerror})"
        fail(
            f"{host}:{port} {reason}; is another `orbit {command}` running? "
            "Stop it or choose another --port.",
            ExitCode.UNAVAILABLE,
        )
    # Accepted connections inherit TCP_NODELAY from the listening socket. Without it every
    # response paid ~40 ms: uvicorn writes headers and body separately, Nagle holds the body
    # until the client's delayed ACK (asyncio sets NODELAY itself only on sockets it made with
    # proto=IPPROTO_TCP; socket.create_server leaves proto 0).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock
