"""`--params` reads a literal, `@FILE` or `-` (standard input), so large parameters never meet
the shell's argument limit (issue 13, item 6)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import typer

from orbit.cli.inputs import read_json


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
