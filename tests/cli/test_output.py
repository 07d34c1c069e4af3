"""`--output` everywhere: documents carry the API's field names and page shape; tables align."""

from __future__ import annotations

import datetime as dt
import json

import pytest
import yaml

from orbit.cli.output import Column, OutputFormat, cell, print_list, table
from orbit_sdk import Task

NOW = dt.datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)


def make_task(**overrides: object) -> Task:
    body: dict[str, object] = {
        "id": "t-1",
        "namespace": "shop",
        "queue": "default",
        "handler": "shop.echo",
        "params": {"x": 1},
        "state": "WAITING",
        "state_version": 1,
        "available_at": NOW,
        "created_at": NOW,
        "updated_at": NOW,
        "max_attempts": 3,
    }
    return Task.model_validate({**body, **overrides})


COLUMNS = [Column.field("id"), Column.field("state"), Column.field("queue", wide=True)]


@pytest.mark.parametrize("fmt", [OutputFormat.JSON, OutputFormat.YAML])
def test_a_list_document_has_the_apis_page_shape_and_field_names(
    fmt: OutputFormat, capsys: pytest.CaptureFixture[str]
) -> None:
    print_list([make_task()], COLUMNS, fmt, next_page_token="abc")
    text = capsys.readouterr().out
    doc = json.loads(text) if fmt is OutputFormat.JSON else yaml.safe_load(text)
    assert doc["next_page_token"] == "abc"
    assert doc["items"][0]["params"] == {"x": 1} and doc["items"][0]["state_version"] == 1
    assert set(doc["items"][0]) == set(Task.model_fields)


def test_table_aligns_columns_and_wide_adds_its_columns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    items = [make_task(id="short"), make_task(id="a-much-longer-id", state="RUNNING")]
    print_list(items, COLUMNS, OutputFormat.TABLE)
    assert capsys.readouterr().out.splitlines() == [
        "ID                STATE",
        "short             WAITING",
        "a-much-longer-id  RUNNING",
    ]
    print_list(items, COLUMNS, OutputFormat.WIDE)
    assert capsys.readouterr().out.splitlines()[0] == "ID                STATE    QUEUE"


def test_an_empty_table_says_so_on_stderr_and_prints_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_list([], COLUMNS, OutputFormat.TABLE, empty="no tasks found")
    out, err = capsys.readouterr()
    assert out == "" and "no tasks found" in err


def test_cells_show_utc_seconds_compact_json_and_none() -> None:
    assert cell(NOW) == "2025-01-02T03:04:05Z"
    assert cell({"a": [1, 2]}) == '{"a":[1,2]}'
    assert cell(None) == "<none>" and cell(False) == "false"
    assert table(["A", "B"], [["x", "y"]]) == "A  B\nx  y"
