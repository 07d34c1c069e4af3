"""The web framework's own OpenTelemetry bridge is off (issue 9): newer FastAPI releases ask
the global OpenTelemetry providers on every request whether anything is configured (~2% of
the server's CPU); Orbit's telemetry is Prometheus metrics and structured logs."""

from __future__ import annotations

import inspect

import pytest
from fastapi import FastAPI

from .conftest import Api


def test_the_framework_s_telemetry_bridge_never_runs_per_request(api: Api) -> None:
    if "telemetry" not in inspect.signature(FastAPI.__init__).parameters:
        pytest.skip("this FastAPI has no telemetry bridge")
    config = api.app._telemetry  # type: ignore[attr-defined]
    assert not (config["tracing"] or config["metrics"] or config["logs"]), (
        "every request would ask the OpenTelemetry providers whether they are configured"
    )
