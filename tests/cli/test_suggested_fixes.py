"""A fix the CLI suggests is a command that works when typed as printed (time flags' fixes are
run in test_time_flags.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from orbit.cli.exits import ExitCode

from .conftest import Run


def test_a_missing_sqlite_file_suggests_the_migrate_command_that_creates_it(
    orbit: Run, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'orbit.db'}"
    refused = orbit("admin", "verify", "--database-url", url)
    assert refused.returncode == ExitCode.UNAVAILABLE
    suggestion = re.search(r"create it with `orbit ([^`]+)`", refused.stderr)
    assert suggestion, refused.stderr
    created = orbit(*shlex.split(suggestion.group(1)))
    assert created.returncode == 0, created.stderr
    assert orbit("admin", "verify", "--database-url", url).returncode == 0
