"""`orbit admin restore-fence`: fence, show, reopen from the command line, with truthful exit
codes and the actor recorded in the audit."""

from __future__ import annotations

import json

from typer.testing import CliRunner, Result

from orbit.cli.main import app

from ..drivers.pulse_driver import PulseDriver

runner = CliRunner()


def fence_cli(pulse: PulseDriver, *args: str) -> Result:
    url = pulse.engine.url.render_as_string(hide_password=False)
    return runner.invoke(
        app, ["admin", "restore-fence", "--database-url", url, "--actor", "oncall", *args]
    )


def test_fence_status_and_reopen(isolated_pulse: PulseDriver) -> None:
    isolated_pulse.submit()
    isolated_pulse.claim_one()
    fenced = fence_cli(isolated_pulse, "--reason", "restored the 02:00 backup")
    assert fenced.exit_code == 0, fenced.output
    assert "dispatch CLOSED" in fenced.output
    assert "tasks settled by the lease rules: WAITING 1" in fenced.output

    shown = fence_cli(isolated_pulse, "--status", "-o", "json")
    status = json.loads(shown.output)
    assert (status["dispatch_open"], status["history"][0]["fenced_by"]) == (False, "oncall")

    reopened = fence_cli(isolated_pulse, "--reopen", "--reason", "reconciled")
    assert reopened.exit_code == 0, reopened.output
    assert f"restore epoch {status['epoch']}" in reopened.output
    assert "dispatch:      open" in fence_cli(isolated_pulse, "--status").output


def test_reopening_an_open_dispatch_exits_1(isolated_pulse: PulseDriver) -> None:
    refused = fence_cli(isolated_pulse, "--reopen", "--reason", "by mistake")
    assert refused.exit_code == 1
    assert "already open" in refused.output


def test_a_fence_without_a_reason_exits_2_and_changes_nothing(
    isolated_pulse: PulseDriver,
) -> None:
    refused = fence_cli(isolated_pulse)
    assert refused.exit_code == 2
    assert "--reason is required" in refused.output
    assert "dispatch:      open" in fence_cli(isolated_pulse, "--status").output
