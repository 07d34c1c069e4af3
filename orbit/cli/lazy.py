"""Command groups loaded on first use, so `orbit --version` and `orbit task …` start fast.

Each group's module is imported only when that group runs (or a help screen lists it): `orbit
task list` never imports the server (FastAPI, uvicorn), the store (SQLAlchemy), the operator
(Kopf, Kubernetes) or the manifest validator (CEL). To add a command group, add one line to
``LAZY_COMMANDS`` in ``main.py``; keep heavy imports out of its module's top level anyway, so
`orbit --help` (which lists every group) stays fast too.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import typer
from typer.core import TyperGroup


@dataclass(frozen=True)
class LazyCommand:
    """``target`` is ``"module:attribute"``: a ``typer.Typer`` (a group) or a command function."""

    target: str

    def load(self, name: str) -> Any:
        module_name, _, attribute = self.target.partition(":")
        obj = getattr(importlib.import_module(module_name), attribute)
        # Wrapped in a plain-help Typer so the group keeps the parent's help style.
        holder = typer.Typer(rich_markup_mode=None)
        if isinstance(obj, typer.Typer):
            holder.add_typer(obj, name=name)
        else:
            holder.command(name)(obj)
            holder.callback()(lambda: None)
        return typer.main.get_command(holder).commands[name]  # type: ignore[attr-defined]


class LazyGroup(TyperGroup):
    """A Typer group whose ``lazy_commands`` are imported by ``get_command`` on demand."""

    lazy_commands: dict[str, LazyCommand] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        loaded = super().list_commands(ctx)
        return [*loaded, *(name for name in self.lazy_commands if name not in loaded)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in self.lazy_commands:
            command = self.lazy_commands[cmd_name].load(cmd_name)
            self.add_command(command, cmd_name)
        return command
