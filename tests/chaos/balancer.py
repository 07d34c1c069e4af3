"""A TCP balancer in front of the server replicas, as a Kubernetes Service would be: each new
connection goes to the next replica that accepts it. A dead replica refuses connections and is
skipped; connections it held are reset, and clients reconnect through here."""

from __future__ import annotations

import itertools
import socket
import threading

from tcp import close_both, listen_locally


class Balancer:
    def __init__(self, backends: list[int]) -> None:
        self.backends = backends
        self._next = itertools.count()
        self._listener, self.port = listen_locally()
        self._stopped = threading.Event()
        threading.Thread(target=self._accept, name="chaos-balancer", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stopped.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        start = next(self._next)
        for i in range(len(self.backends)):
            port = self.backends[(start + i) % len(self.backends)]
            try:
                upstream = socket.create_connection(("127.0.0.1", port), timeout=2)
            except OSError:
                continue
            upstream.settimeout(None)
            threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()
            _pipe(client, upstream)
            return
        client.close()  # no replica serving: the client sees a reset and retries


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        close_both(source, sink)
