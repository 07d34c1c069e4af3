"""A local webhook receiver for the end-to-end tests: verifies each delivery with the reference
Standard Webhooks library (not Orbit's code), dedupes by event id as docs/concepts/results.md
tells receivers to, and fails the first ``fail_first`` requests with 503."""

from __future__ import annotations

import base64
import json
import os
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


@dataclass
class Receiver:
    secret: str
    fail_first: int = 0
    always_fail: bool = False
    requests: int = 0
    rejected_signatures: int = 0
    processed: dict[str, Any] = field(default_factory=dict)  # event id -> event, once each
    duplicates: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/orbit"

    def handle(self, headers: dict[str, str], body: bytes) -> int:
        with self.lock:
            self.requests += 1
            try:
                event = Webhook(self.secret).verify(body, headers)
            except WebhookVerificationError:
                self.rejected_signatures += 1
                return 400
            if self.always_fail or self.requests <= self.fail_first:
                return 503
            if event["id"] in self.processed:
                self.duplicates += 1  # already processed: acknowledge, do nothing
                return 200
            self.processed[event["id"]] = event
            return 200

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                status = receiver.handle(dict(self.headers.items()), body)
                self.send_response(status)
                self.end_headers()
                self.wfile.write(json.dumps({"status": status}).encode())

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
