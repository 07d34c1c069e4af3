"""The web framework's own OpenTelemetry bridge is off: newer FastAPI releases ask the global
OpenTelemetry providers on every request whether anything is configured, for nothing — Orbit's
telemetry is Prometheus metrics and structured logs.

Seen through OpenTelemetry's public API: a tracer provider that records who asks it for a tracer,
installed in a fresh process (the global provider can be set once per process)."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fastapi import FastAPI

PROBE = textwrap.dedent(
    """
    import sys
    from opentelemetry import trace
    from fastapi.testclient import TestClient

    from orbit.api.app import create_app
    from orbit.api.settings import ServerSettings
    from orbit_store.upgrade import migrate
    from orbit_store.db import create_store_engine

    class Recorder(trace.TracerProvider):
        asked: list[str] = []

        def get_tracer(self, name, *args, **kwargs):
            self.asked.append(name)
            return trace.NoOpTracer()

    recorder = Recorder()
    trace.set_tracer_provider(recorder)
    url = "sqlite:///" + sys.argv[1]
    engine = create_store_engine(url)
    migrate.upgrade(engine)
    app = create_app(engine, ServerSettings(database_url=url, run_engines=False))
    with TestClient(app) as client:
        for _ in range(3):
            assert client.get("/healthz").status_code == 200
    print("asked:", ",".join(recorder.asked))
    """
)


def test_the_framework_s_telemetry_bridge_never_runs_per_request(tmp_path: Path) -> None:
    if "telemetry" not in inspect.signature(FastAPI.__init__).parameters:
        pytest.skip("this FastAPI has no telemetry bridge")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "orbit.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    asked = done.stdout.strip().rpartition("asked:")[2].strip()
    assert "fastapi" not in asked.split(","), (
        "every request would ask the OpenTelemetry providers whether they are configured"
    )
