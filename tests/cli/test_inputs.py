"""`--params` reads a literal, `@FILE` or `-` (standard input), so large parameters never meet
the shell's argument limit."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import typer

from orbit.cli.inputs import read_json

from .conftest import Run


def test_a_literal_is_parsed_as_json() -> None:
    assert read_json('{"a": 1}', "--params") == {"a": 1}


def test_at_file_reads_the_file(tmp_path: Path) -> None:
    big = {"rows": list(range(50_000))}
    (tmp_path / "p.json").write_text(json.dumps(big))
    assert read_json(f"@{tmp_path / 'p.json'}", "--params") == big


def test_dash_reads_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("[1, 2, 3]"))
    assert read_json("-", "--params") == [1, 2, 3]


def test_a_missing_file_is_a_usage_error_naming_the_option(tmp_path: Path) -> None:
    with pytest.raises(typer.BadParameter, match="cannot read") as error:
        read_json(f"@{tmp_path / 'nope.json'}", "--params")
    assert error.value.param_hint == "--params"


def test_invalid_json_says_where_it_came_from(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(typer.BadParameter, match=r"not valid JSON \(from .*bad.json\)"):
        read_json(f"@{tmp_path / 'bad.json'}", "--params")


@pytest.mark.parametrize(
    "text", ['{"x": NaN}', '{"x": Infinity}', "[-Infinity]", '{"x": 1e400}', '"\\ud800"']
)
def test_json_orbit_cannot_store_is_a_usage_error_naming_the_option(text: str) -> None:
    """JSON has no NaN or Infinity (Python's parser takes them anyway, and 1e400 as infinity);
    the server would refuse them: say so before sending."""
    with pytest.raises(typer.BadParameter, match=r"cannot be stored|not a JSON number") as error:
        read_json(text, "--params")
    assert error.value.param_hint == "--params"


def test_json_nested_deeper_than_orbit_stores_is_a_usage_error() -> None:
    text = '{"a": ' * 21 + "1" + "}" * 21
    with pytest.raises(typer.BadParameter, match="nested more than 20"):
        read_json(text, "--input")


@pytest.mark.parametrize(
    "args",
    [
        ["task", "submit", "--handler", "h", "--params", '{"x": NaN}'],
        ["workflow", "start", "d", "--input", '{"x": Infinity}'],
        ["workflow", "signal", "w-1", "go", "--payload", "[-Infinity]"],
    ],
    ids=["task-params", "workflow-input", "signal-payload"],
)
def test_the_cli_refuses_nan_with_one_error_naming_the_option_and_no_traceback(
    orbit: Run, args: list[str]
) -> None:
    done = orbit(*args, "--server", "http://127.0.0.1:9", "--token", "t", "-n", "ns")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if "Error" in line]
    assert len(errors) == 1 and args[-2] in errors[0], done.stderr


def test_submit_many_refuses_a_line_with_nan_naming_the_line(orbit: Run, tmp_path: Path) -> None:
    lines = tmp_path / "tasks.jsonl"
    lines.write_text('{"handler": "h"}\n{"handler": "h", "params": {"x": NaN}}\n')
    done = orbit(
        *("task", "submit-many", "--file", str(lines), "--server", "http://127.0.0.1:9"),
        *("--token", "t", "-n", "ns"),
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "line 2" in done.stderr and "NaN" in done.stderr, done.stderr
