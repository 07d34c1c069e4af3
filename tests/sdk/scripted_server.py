"""A scripted HTTP/1.1 server on a real socket, for the SDK's transport tests: it reads whole
requests and answers each by a script, counting the connections it accepted."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

#: What the scripted server answers to one request (its raw bytes): the bytes to send back
#: (None: send nothing, hold the connection) and whether to close the connection after.
Script = Callable[[bytes], tuple[bytes | None, bool]]


def answer(body: bytes = b'{"ok": true}', status: str = "200 OK", *extra_headers: str) -> bytes:
    headers = [f"HTTP/1.1 {status}", f"content-length: {len(body)}", *extra_headers]
    return ("\r\n".join(headers) + "\r\n\r\n").encode() + body


def ok(request: bytes) -> tuple[bytes | None, bool]:
    return answer(), False


@dataclass
class ScriptedServer:
    """A TCP server on 127.0.0.1 that reads whole HTTP/1.1 requests and answers by ``script``;
    counts the connections it accepted and keeps every request it read."""

    script: Script
    tls: ssl.SSLContext | None = None
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stop.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            reader = conn.makefile("rb")
            while (request := _read_request(reader)) is not None:
                self.requests.append(request)
                reply, close = self.script(request)
                if reply is None:
                    self._stop.wait(5)
                    return
                conn.sendall(reply)
                if close:
                    return
        except (OSError, ssl.SSLError):
            return
        finally:
            conn.close()


def _read_request(reader: BinaryIO) -> bytes | None:
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = reader.readline()
        if not line:
            return None
        head += line
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head + reader.read(length)
