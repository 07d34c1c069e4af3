"""The SDK's own CPU per ``Client.submit``: the client against a bare ASGI app under uvicorn
that answers every request with a submitted task's JSON at once, so the figure is the client's
alone (building the request, httpx, the socket, reading the answer, the ``Task`` model).

Three ways of sending are alternated in one process against one server: ``direct`` (the SDK's
default: each request handed to its own transport, ``orbit_sdk._http11``), ``httpx transport``
(handed to ``httpx.HTTPTransport``, the SDK's default before, and what a client given
``transport=httpx.HTTPTransport()`` does) and ``send`` (through ``httpx.Client.send``, as under
environment proxies), plus plain ``httpx.Client.post`` for reference. Prints CPU µs per call
(user + system) per round and the medians.
Usage: ``.venv/bin/python bench/sdk_calls.py [--calls 2000] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from orbit_sdk import Client

ROOT = Path(__file__).resolve().parents[1]
TASK = {
    "id": "01a2408b-f2b6-7e7f-9f55-eb0cb1a7bf37",
    "namespace": "bench",
    "queue": "default",
    "handler": "bench.noop",
    "params": {"i": 1},
    "state": "WAITING",
    "state_version": 1,
    "priority": 0,
    "available_at": "2026-12-04T10:14:03.190237Z",
    "deadline_at": None,
    "created_at": "2026-12-04T10:14:03.190237Z",
    "updated_at": "2026-12-04T10:14:03.190237Z",
    "finished_at": None,
    "attempts_used": 0,
    "max_attempts": 3,
    "safety": "safe",
    "concurrency_key": None,
    "cancel_requested": False,
    "retry_of": None,
    "result": None,
    "error": None,
    "replayed": False,
    "waiting_reason": "ready",
}
BODY = json.dumps(TASK).encode()


async def answer(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The bare ASGI app: reads the body, answers 201 with the task."""
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(BODY))]
    await send({"type": "http.response.start", "status": 201, "headers": headers})
    await send({"type": "http.response.body", "body": BODY})


@contextlib.contextmanager
def answering_server() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [sys.executable, "-m", "uvicorn", "bench.sdk_calls:answer", "--port", str(port)]
    argv += ["--log-level", "warning", "--no-access-log", "--http", "httptools"]
    proc = subprocess.Popen(argv, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            with contextlib.suppress(httpx.HTTPError):
                httpx.post(base, timeout=1)
                break
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait()


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per way per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with answering_server() as base:
        direct = Client(base, token="t")  # the SDK's own transport (orbit_sdk._http11)
        httpx_direct = Client(base, token="t", transport=httpx.HTTPTransport())
        through_send = Client(base, token="t", transport=httpx.HTTPTransport())
        through_send._transport.direct = None  # what every call did before _wire
        plain = httpx.Client(base_url=base, headers={"authorization": "Bearer t"})

        def submit(client: Client) -> Callable[[int], object]:
            return lambda i: client.submit("bench", handler="bench.noop", params={"i": i})

        ways: dict[str, Callable[[int], object]] = {
            "direct": submit(direct),
            "httpx transport": submit(httpx_direct),
            "send": submit(through_send),
            "httpx post": lambda i: plain.post("/v1/namespaces/bench/tasks", json={"i": i}).json(),
        }
        per: dict[str, list[float]] = {name: [] for name in ways}
        for way in ways.values():  # warm: connections open, paths cached
            for i in range(100):
                way(i)
        for round_ in range(args.rounds):
            order = list(ways) if round_ % 2 == 0 else list(reversed(ways))
            for name in order:
                began = cpu()
                for i in range(args.calls):
                    ways[name](i)
                per[name].append((cpu() - began) / args.calls * 1e6)
            print("  ".join(f"{name} {per[name][-1]:5.0f} µs" for name in ways), flush=True)
        print("median CPU per call:", end="")
        print("  ".join(f" {name} {statistics.median(v):.0f} µs" for name, v in per.items()))
        for client in (direct, httpx_direct, through_send):
            client.close()
        plain.close()


if __name__ == "__main__":
    main()
