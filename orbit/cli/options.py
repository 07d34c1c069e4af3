"""Options shared by several commands."""

from __future__ import annotations

from typing import Annotated

import typer

DatabaseUrl = Annotated[
    str,
    typer.Option(
        "--database-url",
        envvar="ORBIT_DATABASE_URL",
        help="mysql+pymysql://USER:PASS@HOST:PORT/DB or sqlite:///PATH (env ORBIT_DATABASE_URL).",
        show_default=False,
    ),
]
