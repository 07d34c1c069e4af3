"""A TCP proxy in front of MariaDB that can leave its connections half-open, as a failover or a
load balancer that lost its backend does: after :meth:`HalfOpenProxy.freeze` the connections
it already carries stay open but nothing more crosses them either way (what arrives is
swallowed), while new connections work — the database is up, only the old paths are dead.
Without a read timeout a client waits on such a connection for as long as the kernel keeps
it, which here is forever."""

from __future__ import annotations

import socket
import threading

from tcp import close_both, listen_locally


class HalfOpenProxy:
    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listener, self.port = listen_locally()
        self._lock = threading.Lock()
        self._frozen: set[int] = set()  # ids of the connections that no longer forward
        self._open: dict[int, list[socket.socket]] = {}
        self._ids = iter(range(1, 1 << 62))
        self._stopped = threading.Event()
        threading.Thread(target=self._accept, name="half-open-proxy", daemon=True).start()

    def freeze(self) -> int:
        """Leave every connection open now half-open; new ones are served. How many froze."""
        with self._lock:
            self._frozen |= set(self._open)
            return len(self._open)

    def close(self) -> None:
        """Stop accepting and close every connection (frozen ones too: their clients wake)."""
        self._stopped.set()
        self._listener.close()
        with self._lock:
            sockets = [s for pair in self._open.values() for s in pair]
        close_both(*sockets)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                conn_id = next(self._ids)
                self._open[conn_id] = [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pipe, args=(conn_id, source, sink), daemon=True
                ).start()

    def _pipe(self, conn_id: int, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if conn_id not in self._frozen:
                    sink.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                pair = self._open.pop(conn_id, [])
            close_both(*pair)
