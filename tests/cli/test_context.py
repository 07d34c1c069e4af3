"""CLI contexts (orbit/cli/contexts.py): a command finds its server, token, namespace and database
in the current context; its flags and environment variables still win; a broken or misspelt
config is an error naming what to fix, never silently ignored."""

from __future__ import annotations

from pathlib import Path

import pytest
from migrated_databases import MigratedSqliteTemplate

from orbit.cli.exits import ExitCode

from .conftest import Run

UNREACHABLE = "http://127.0.0.1:9"  # nothing listens on port 9 (discard)


@pytest.fixture
def config(tmp_path: Path) -> dict[str, str]:
    return {"ORBIT_CONFIG": str(tmp_path / "config.yaml")}


def set_unreachable_context(orbit: Run, config: dict[str, str], tmp_path: Path) -> None:
    """The current context ``local``: a server nobody answers at, and a token file."""
    (tmp_path / "token").write_text("orb_not_a_real_token\n")
    done = orbit(
        *("context", "set", "local", "--server", UNREACHABLE),
        *("--token-file", str(tmp_path / "token")),
        env=config,
    )
    assert done.returncode == 0, done.stderr


def test_set_then_show_and_list_the_context(orbit: Run, config: dict[str, str], tmp_path: Path):
    (tmp_path / "token").write_text("orb_not_a_real_token\n")
    saved = orbit(
        *("context", "set", "local", "--server", UNREACHABLE, "--namespace", "shop"),
        *("--token-file", str(tmp_path / "token"), "--database-url", "sqlite:///x.db"),
        env=config,
    )
    assert saved.returncode == 0, saved.stderr
    assert "context local saved" in saved.stdout and "(current)" in saved.stdout
    shown = orbit("context", env=config)
    assert shown.returncode == 0, shown.stderr
    fields = dict(line.split(":", 1) for line in shown.stdout.splitlines())
    assert {k: v.strip() for k, v in fields.items()} == {
        "name": "local",
        "server": UNREACHABLE,
        "token-file": str(tmp_path / "token"),
        "namespace": "shop",
        "database-url": "sqlite:///x.db",
    }
    listed = orbit("context", "list", env=config)
    assert listed.stdout.splitlines()[1].split() == [
        "*",
        "local",
        UNREACHABLE,
        "shop",
        "sqlite:///x.db",
    ]


def test_a_command_goes_to_the_contexts_server_with_its_token(
    orbit: Run, config: dict[str, str], tmp_path: Path
) -> None:
    set_unreachable_context(orbit, config, tmp_path)
    done = orbit("task", "list", env=config)
    # not "no token": the context's token file was read; the context's server was tried
    assert done.returncode == ExitCode.UNAVAILABLE, done.stderr
    assert f"cannot reach the Orbit server at {UNREACHABLE}" in done.stderr


def test_flags_and_environment_win_over_the_context(
    orbit: Run, config: dict[str, str], tmp_path: Path
) -> None:
    set_unreachable_context(orbit, config, tmp_path)
    by_env = orbit("task", "list", env={**config, "ORBIT_SERVER": "http://127.0.0.1:7"})
    assert "cannot reach the Orbit server at http://127.0.0.1:7" in by_env.stderr
    by_flag = orbit(
        "task",
        "list",
        "--server",
        "http://127.0.0.1:13",
        env={**config, "ORBIT_SERVER": "http://127.0.0.1:7"},
    )
    assert "cannot reach the Orbit server at http://127.0.0.1:13" in by_flag.stderr


def test_admin_commands_use_the_contexts_database_and_say_how_without_one(
    orbit: Run,
    config: dict[str, str],
    migrated_sqlite_template: MigratedSqliteTemplate,
    tmp_path: Path,
) -> None:
    missing = orbit("admin", "verify", env=config)
    assert missing.returncode == ExitCode.USAGE
    assert "no database: pass --database-url or set ORBIT_DATABASE_URL" in missing.stderr
    database = migrated_sqlite_template.copy_to(tmp_path / "dev.db")
    orbit("context", "set", "local", "--database-url", database, env=config)
    verified = orbit("admin", "verify", env=config)
    assert verified.returncode == 0, verified.stderr
    assert '"clean": true' in verified.stdout


def test_a_misspelt_key_or_an_unknown_context_is_an_error_naming_it(
    orbit: Run, config: dict[str, str]
) -> None:
    Path(config["ORBIT_CONFIG"]).write_text(
        "current: local\ncontexts:\n  local:\n    sever: http://x\n"
    )
    done = orbit("task", "list", env=config)
    assert done.returncode == ExitCode.USAGE
    assert "context 'local' has unknown key(s) sever" in done.stderr
    Path(config["ORBIT_CONFIG"]).write_text("current: local\ncontexts:\n  local: {}\n")
    chosen = orbit("--context", "other", "task", "list", env=config)
    assert chosen.returncode == ExitCode.USAGE
    assert "no context 'other'" in chosen.stderr and "contexts: local" in chosen.stderr
    used = orbit("context", "use", "other", env=config)
    assert used.returncode == ExitCode.USAGE and "no context 'other'" in used.stderr
