"""Instants on the command line (timeflags.py): a date is midnight UTC, an instant with Z or an
offset is taken as it says, one without a zone is refused with the fix. Every fix the CLI
suggests is run here as suggested, and must be accepted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from migrated_databases import MigratedSqliteTemplate

from orbit.cli.exits import ExitCode

from .conftest import Run


@pytest.fixture
def database(migrated_sqlite_template: MigratedSqliteTemplate, tmp_path: Path) -> list[str]:
    return ["--database-url", migrated_sqlite_template.copy_to(tmp_path / "orbit.db")]


def commands(database: list[str]) -> dict[str, list[str]]:
    """Each command with a time flag, the flag last (its value is appended)."""
    return {
        "--before": ["admin", "retention", "inventory", *database, "--before"],
        "--since": ["admin", "audit", "list", *database, "--since"],
        "--from": ["schedule", "preview", "--cron", "0 3 * * *", "--from"],
    }


def suggested(stderr: str, flag: str) -> str:
    """The value the error suggests for ``flag`` (``… e.g. VALUE`` or ``… add Z: VALUE``)."""
    match = re.search(rf"{flag} \S+ .*?(?:e\.g\.|instead:) (\S+?)\)?$", stderr.strip(), re.M)
    assert match, stderr
    return match.group(1)


@pytest.mark.parametrize("flag", ["--before", "--since", "--from"])
def test_a_date_is_midnight_utc(orbit: Run, database: list[str], flag: str) -> None:
    done = orbit(*commands(database)[flag], "2026-12-05")
    assert done.returncode == 0, done.stderr
    assert orbit(*commands(database)[flag], "2026-12-05Z").stdout == done.stdout
    if flag == "--before":
        assert "Rows created before 2026-12-05T00:00:00Z" in done.stdout
    if flag == "--from":
        assert done.stdout.splitlines()[0].startswith("2026-12-05T03:00:00Z")


@pytest.mark.parametrize("flag", ["--before", "--since", "--from"])
@pytest.mark.parametrize(
    "typed", ["2026-12-05T10:30:00", "2026-12-05 10:30", "yesterday", "2026-13-01", "12/05/2026"]
)
def test_every_suggested_fix_is_accepted_when_run_as_suggested(
    orbit: Run, database: list[str], flag: str, typed: str
) -> None:
    refused = orbit(*commands(database)[flag], typed)
    assert refused.returncode == ExitCode.USAGE, refused.stdout
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    fix = suggested(refused.stderr, flag)
    if "10:30" in typed:  # the instant they typed, read as UTC: not an unrelated example
        assert fix == "2026-12-05T10:30:00Z"
    accepted = orbit(*commands(database)[flag], fix)
    assert accepted.returncode == 0, f"{fix!r} suggested, then refused: {accepted.stderr}"
