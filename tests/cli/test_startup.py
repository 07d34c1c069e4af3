"""The CLI starts fast because each command group loads only what it needs: `orbit
task …` never imports the server, the store, the operator or the CEL validator. Checked by what
is imported, in a fresh interpreter -- never by timing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("fastapi", "starlette", "uvicorn", "sqlalchemy", "pymysql", "kopf", "kubernetes", "celpy")


def imported_after(argv: list[str]) -> list[str]:
    """Run `orbit ARGV` in a fresh interpreter; which heavy modules did it import?"""
    code = (
        "import sys, json\n"
        "from orbit.cli.main import app\n"
        f"sys.argv = ['orbit', *{argv!r}]\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "ORBIT_TOKEN": "orb_not_a_real_token"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_importing_the_cli_entry_point_imports_no_server_store_operator_or_cel() -> None:
    assert imported_after(["--version"]) == []


def test_task_help_imports_no_server_store_operator_or_cel() -> None:
    assert imported_after(["task", "--help"]) == []
    assert imported_after(["task", "list", "--help"]) == []


def test_task_list_imports_none_of_them_even_when_it_talks_to_a_server() -> None:
    assert imported_after(["task", "list", "--server", "http://127.0.0.1:9"]) == []


def test_the_top_level_help_lists_every_group_without_importing_the_server() -> None:
    assert "sqlalchemy" not in imported_after(["--help"])
    assert "fastapi" not in imported_after(["--help"])


@pytest.mark.parametrize("group", ["schedule", "workflow"])
def test_schedule_and_workflow_commands_import_none_of_them(group: str) -> None:
    assert imported_after([group, "--help"]) == []
    assert imported_after([group, "list", "--server", "http://127.0.0.1:9"]) == []
