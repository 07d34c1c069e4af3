"""Paging for list commands: `--limit`, `--page-token`, `--all`, over any API page shape.

The API serves at most ``MAX_PAGE_SIZE`` items a page; the CLI fetches as many pages as the limit
needs and says on stderr when more match, with the token that continues -- never a silent cut.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar

import typer

T = TypeVar("T")
#: The API's largest page_size.
MAX_PAGE_SIZE = 500

Limit = Annotated[
    int,
    typer.Option("--limit", min=1, help="Show at most this many (fetched in pages of up to 500)."),
]
PageToken = Annotated[
    str | None,
    typer.Option(
        "--page-token",
        help="Continue where an earlier list stopped (the token it printed).",
        show_default=False,
    ),
]
All = Annotated[bool, typer.Option("--all", "-A", help="Every match, however many (no --limit).")]

Fetch = Callable[[int, str | None], tuple[list[T], str | None]]


def collect(
    fetch: Fetch[T], *, limit: int | None, page_token: str | None
) -> tuple[list[T], str | None]:
    """Items from as many pages as ``limit`` needs (``None``: all of them), and the token of the
    next page when more match."""
    items: list[T] = []
    token = page_token
    while True:
        want = MAX_PAGE_SIZE if limit is None else min(MAX_PAGE_SIZE, limit - len(items))
        page, token = fetch(want, token)
        items += page
        if not token or (limit is not None and len(items) >= limit):
            return items, token


def more_hint(shown: int, token: str | None, noun: str = "items") -> None:
    """Tell a person (on stderr) that the list was cut, and how to see the rest."""
    if token:
        typer.echo(
            f"showing the first {shown} {noun}; more match: add --page-token {token} "
            "for the next ones, or --all",
            err=True,
        )
