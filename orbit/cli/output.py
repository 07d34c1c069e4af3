"""`--output table|wide|json|yaml` for every command, with the API's field names.

Every time is RFC 3339 in UTC: to the second in tables (``2026-12-05T15:47:17Z``), with the
microseconds Orbit keeps in documents (``2026-12-05T15:47:17.068000Z``); ``--local`` shows the
machine's time zone instead, with its offset (``2026-12-05T16:47:17+01:00``).

``json`` and ``yaml`` print exactly what the API answered (a list as the API's page shape,
``{"items": [...], "next_page_token": ...}``), so scripts can move between the CLI and the HTTP
API without renaming anything. ``table`` is aligned plain text like kubectl's (easy to ``grep``
and ``awk``); ``wide`` adds columns. Headers are the API's field names in capitals. ``id``
prints each object's id (or name) alone on a line, as kubectl's ``-o name``, for ``$(…)``.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import typer

NONE = "<none>"


class OutputFormat(enum.StrEnum):
    TABLE = "table"
    WIDE = "wide"
    JSON = "json"
    YAML = "yaml"
    ID = "id"

    @property
    def is_document(self) -> bool:
        return self in (OutputFormat.JSON, OutputFormat.YAML)


Output = Annotated[
    OutputFormat,
    typer.Option(
        "--output",
        "-o",
        case_sensitive=False,
        help="table, wide (more columns), json or yaml (the API's field names), or id (each "
        "object's id or name alone on a line).",
    ),
]


class _Zone:
    """Whether times are shown in this machine's zone (``--local``) instead of UTC."""

    local = False


def use_local_time(local: bool) -> bool:
    """``--local``'s callback: every time printed from then on is in this machine's zone."""
    _Zone.local = local
    return local


LocalTime = Annotated[
    bool,
    typer.Option(
        "--local",
        callback=use_local_time,
        is_eager=True,
        help="Show times in this machine's time zone, with its offset, instead of UTC.",
    ),
]


def instant(value: dt.datetime, *, precise: bool = False) -> str:
    """RFC 3339: UTC with Z (or, with --local, this machine's zone and offset); ``precise``
    keeps the microseconds (documents), else to the second (tables)."""
    aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
    if _Zone.local:
        return aware.astimezone().isoformat(timespec="microseconds" if precise else "seconds")
    return aware.astimezone(dt.UTC).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ" if precise else "%Y-%m-%dT%H:%M:%SZ"
    )


def identity(item: Any) -> str:
    """An object's id, or its name when it has none."""
    data = item if isinstance(item, dict) else None
    for key in ("id", "name"):
        value = data.get(key) if data is not None else getattr(item, key, None)
        if value:
            return str(value)
    raise ValueError(f"{type(item).__name__} has no id or name")


def refuse_id(fmt: OutputFormat, what: str) -> None:
    """For commands that print no objects: ``-o id`` is an error, not silently a table."""
    if fmt is OutputFormat.ID:
        raise typer.BadParameter(
            f"{what} has no ids to print; use table, wide, json or yaml", param_hint="--output"
        )


@dataclass(frozen=True)
class Column:
    """One table column: a header and how to get the cell from an item."""

    header: str
    value: Callable[[Any], Any]
    wide: bool = False  # only with -o wide

    @classmethod
    def field(cls, name: str, *, wide: bool = False) -> Column:
        return cls(name.upper(), lambda item: getattr(item, name, None), wide)


def plain(item: Any) -> Any:
    """An API object (pydantic model) or plain data as JSON-ready data, every time in the one
    RFC 3339 form (``instant``)."""
    dump = getattr(item, "model_dump", None)
    if dump is not None:
        return plain(dump(mode="python"))
    if isinstance(item, list | tuple):
        return [plain(i) for i in item]
    if isinstance(item, dict):
        return {k: plain(v) for k, v in item.items()}
    if isinstance(item, dt.datetime):
        return instant(item, precise=True)
    if isinstance(item, dt.date):
        return item.isoformat()
    if isinstance(item, enum.Enum):
        return item.value
    return item


def document(data: Any, fmt: OutputFormat) -> str:
    if fmt is OutputFormat.YAML:
        import yaml  # only when asked for: keeps start-up light

        return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True)).rstrip("\n")
    return json.dumps(data, indent=2, ensure_ascii=False)


def cell(value: Any) -> str:
    """A value as a table cell: times to the second (``instant``), JSON compact, nothing as
    <none>."""
    if value is None or value == "":
        return NONE
    if isinstance(value, dt.datetime):
        return instant(value)
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Columns aligned with two spaces between them; the last column is not padded."""
    rows = [list(r) for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    lines = []
    for row in [list(headers), *rows]:
        padded = [v.ljust(w) for v, w in zip(row[:-1], widths[:-1], strict=True)]
        lines.append("  ".join([*padded, row[-1]]).rstrip())
    return "\n".join(lines)


def columns_for(columns: Sequence[Column], fmt: OutputFormat) -> list[Column]:
    return [c for c in columns if fmt is OutputFormat.WIDE or not c.wide]


def rows(items: Iterable[Any], columns: Sequence[Column]) -> list[list[str]]:
    return [[cell(c.value(item)) for c in columns] for item in items]


def print_list(
    items: Sequence[Any],
    columns: Sequence[Column],
    fmt: OutputFormat,
    *,
    next_page_token: str | None = None,
    empty: str = "nothing found",
) -> None:
    """A list: the API's page shape as a document, else a table (a note on stderr if empty)."""
    if fmt.is_document:
        data = {"items": [plain(i) for i in items], "next_page_token": next_page_token}
        typer.echo(document(data, fmt))
        return
    if fmt is OutputFormat.ID:
        for item in items:
            typer.echo(identity(item))
        return
    if not items:
        typer.echo(empty, err=True)
        return
    shown = columns_for(columns, fmt)
    typer.echo(table([c.header for c in shown], rows(items, shown)))


def print_rows(
    items: Sequence[Any], columns: Sequence[Column], fmt: OutputFormat, *, header: bool
) -> None:
    """Rows without the list wrapper, for watches: a table (with or without its header line),
    or one document per item (JSON lines; YAML documents separated by ``---``)."""
    if fmt is OutputFormat.JSON:
        for item in items:
            typer.echo(json.dumps(plain(item), ensure_ascii=False))
        return
    if fmt is OutputFormat.YAML:
        for item in items:
            typer.echo("---\n" + document(plain(item), fmt))
        return
    if fmt is OutputFormat.ID:
        for item in items:
            typer.echo(identity(item))
        return
    shown = columns_for(columns, fmt)
    lines = table([c.header for c in shown], rows(items, shown)).splitlines()
    typer.echo("\n".join(lines if header else lines[1:]))


def print_section(title: str, items: Sequence[Any], columns: Sequence[Column]) -> None:
    """A titled table under an object's fields (its attempts, steps, occurrences); nothing
    when there are no items."""
    if not items:
        return
    typer.echo(f"\n{title}:")
    typer.echo(table([c.header for c in columns], rows(items, columns)))


def print_fields(pairs: Sequence[tuple[str, Any]]) -> None:
    """``name:  value`` lines (kubectl describe style), for one object in table output."""
    width = max(len(name) for name, _ in pairs) + 2
    for name, value in pairs:
        typer.echo(f"{name + ':':<{width}}{cell(value)}")


def print_item(
    item: Any,
    fmt: OutputFormat,
    describe: Callable[[Any, bool], None],
    *,
    ident: Callable[[Any], str] = identity,
) -> None:
    """One object: the API's document, its ``ident`` alone (``-o id``; its id or name unless
    told), else ``describe(item, wide)``."""
    if fmt.is_document:
        typer.echo(document(plain(item), fmt))
    elif fmt is OutputFormat.ID:
        typer.echo(ident(item))
    else:
        describe(item, fmt is OutputFormat.WIDE)
