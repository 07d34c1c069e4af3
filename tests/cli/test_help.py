"""Every command answers --help, flags read as flags, and `orbit worker --help` says where the
server and token come from."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from orbit.cli.main import app

runner = CliRunner()


def command_paths(group: Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    group = group or get_command(app)
    ctx = group.make_context("orbit", ["--help"], resilient_parsing=True)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        yield (*path, name)
        if hasattr(command, "list_commands"):
            yield from command_paths(command, (*path, name))


ALL = sorted(command_paths())


def test_every_group_and_command_is_reachable() -> None:
    for expected in [("task", "watch"), ("task", "list"), ("admin", "token", "list"), ("dev",)]:
        assert expected in ALL


@pytest.mark.parametrize("path", ALL, ids=" ".join)
def test_every_command_answers_help_and_shows_no_bool_metavar(path: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output and "<bool>" not in result.output


def test_worker_help_names_the_server_and_token_options_and_variables() -> None:
    text = runner.invoke(app, ["worker", "--help"]).output
    for word in ("--server", "--token", "ORBIT_SERVER", "ORBIT_TOKEN", "--namespace"):
        assert word in text


def test_namespace_options_default_to_the_tokens_own_namespace() -> None:
    text = runner.invoke(app, ["task", "list", "--help"]).output
    assert "token's own" in text and "default: default" not in text
