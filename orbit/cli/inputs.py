"""Reading JSON arguments the way curl and kubectl do: a literal, ``@FILE``, or ``-`` for
standard input -- so large parameters never meet the shell's argument-length limit. What Orbit
cannot store (NaN, Infinity, nesting too deep: ``orbit_sdk.json_values``) is a usage error naming
the option, before anything is sent."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from orbit_sdk.json_values import storable_problem


def read_text(value: str, option: str) -> str:
    """``-`` → standard input, ``@PATH`` → that file's text, anything else → itself."""
    if value == "-":
        return sys.stdin.read()
    if value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            return path.read_text()
        except OSError as exc:
            raise typer.BadParameter(
                f"cannot read {path}: {exc.strerror or exc}", param_hint=option
            ) from exc
    return value


def read_json(value: str, option: str) -> Any:
    """A JSON value from a literal, ``@FILE`` or ``-``; a clear usage error when it is not JSON."""
    text = read_text(value, option)
    source = {"-": "standard input"}.get(value, value[1:] if value.startswith("@") else "")
    where = f" (from {source})" if source else ""
    try:
        return storable_json(text)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(
            f"not valid JSON{where}: {exc.msg} at line {exc.lineno} column {exc.colno}",
            param_hint=option,
        ) from exc
    except ValueError as exc:
        raise typer.BadParameter(f"{exc}{where}", param_hint=option) from exc


def storable_json(text: str) -> Any:
    """``text`` parsed as JSON; ``json.JSONDecodeError`` when it is not JSON, ``ValueError``
    saying where and why when Orbit cannot store it (``NaN``, which Python's parser takes)."""
    value = json.loads(text)
    problem = storable_problem(value)
    if problem is not None:
        raise ValueError(f"{problem.path or 'the value'}: {problem.reason}")
    return value
