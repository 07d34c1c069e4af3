"""`orbit server --workers`: a number of HTTP processes or 'auto'; anything else is a usage error
naming the option and what it accepts, before the port or the database is touched."""

from __future__ import annotations

import pytest

from .conftest import Run


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_workers_value_is_a_usage_error_naming_the_option(orbit: Run, value: str) -> None:
    done = orbit("server", "--workers", value, "--database-url", "sqlite:///no/such/file.db")
    assert done.returncode == 2, done.stderr
    assert "--workers" in done.stderr and "'auto'" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_help_explains_workers_and_the_wake_up_probe(orbit: Run) -> None:
    done = orbit("server", "--help")
    assert done.returncode == 0
    options = ("--workers", "--wake-probe-interval", "--lease-poll-interval", "--db-pool-size")
    for option in (*options, "--submit-transactions"):
        assert option in done.stdout
