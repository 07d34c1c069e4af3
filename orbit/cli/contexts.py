"""CLI contexts, as kubectl's and the Temporal CLI's: named sets of server URL, token file,
namespace and database URL in one file, one of them current. `orbit dev` writes one, so every
command in another shell finds the dev server by itself; `orbit context` shows and switches.

Where a setting comes from, first match wins: the command's flag, its environment variable, the
context (``ORBIT_CONTEXT`` or ``--context`` picks one other than the current), a built-in
default. The file is ``$ORBIT_CONFIG``, else ``$XDG_CONFIG_HOME/orbit/config.yaml``, else
``~/.config/orbit/config.yaml``.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

#: The keys of a context in the file, with the option each stands for.
KEYS = {
    "server": "--server",
    "token-file": "--token",
    "namespace": "--namespace",
    "database-url": "--database-url",
}


class ContextError(Exception):
    """The config file or a context in it cannot be used; the message says what to do."""


@dataclass(frozen=True)
class Context:
    name: str
    server: str | None = None
    token_file: str | None = None
    namespace: str | None = None
    database_url: str | None = None

    def as_entry(self) -> dict[str, str]:
        values = asdict(self)
        return {
            f.name.replace("_", "-"): values[f.name]
            for f in fields(self)
            if f.name != "name" and values[f.name]
        }

    def token(self) -> str | None:
        """The token its file holds; None without a token file."""
        if not self.token_file:
            return None
        try:
            return Path(self.token_file).read_text().strip() or None
        except OSError as exc:
            raise ContextError(
                f"context {self.name!r}: cannot read its token file {self.token_file} "
                f"({exc.strerror}); run `orbit dev` again or pass --token"
            ) from exc


def config_path() -> Path:
    explicit = os.environ.get("ORBIT_CONFIG")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "orbit" / "config.yaml"


@dataclass
class Config:
    current: str | None
    contexts: dict[str, Context]

    def get(self, name: str) -> Context:
        if name not in self.contexts:
            known = ", ".join(sorted(self.contexts)) or "none"
            raise ContextError(
                f"no context {name!r} in {config_path()} (contexts: {known}); see `orbit "
                "context list`"
            )
        return self.contexts[name]


def load() -> Config:
    path = config_path()
    if not path.exists():
        return Config(None, {})
    import yaml  # only when there is a file: commands without one stay light

    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ContextError(f"cannot read {path}: {exc}; fix or delete it") from exc
    if not isinstance(data, dict) or not isinstance(data.get("contexts") or {}, dict):
        raise ContextError(f"{path} is not an orbit config (a mapping with 'contexts'); fix it")
    contexts = {
        str(name): _context(str(name), entry, path)
        for name, entry in (data.get("contexts") or {}).items()
    }
    return Config(data.get("current"), contexts)


def _context(name: str, entry: Any, path: Path) -> Context:
    if not isinstance(entry, dict):
        raise ContextError(f"{path}: context {name!r} is not a mapping; fix it")
    unknown = sorted(set(entry) - set(KEYS))
    if unknown:  # a misspelt key silently ignored would send commands elsewhere
        raise ContextError(
            f"{path}: context {name!r} has unknown key(s) {', '.join(unknown)} "
            f"(known: {', '.join(KEYS)})"
        )
    return Context(name, **{key.replace("-", "_"): entry[key] for key in entry})


def save(config: Config) -> Path:
    import yaml

    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "current": config.current,
        "contexts": {name: c.as_entry() for name, c in sorted(config.contexts.items())},
    }
    text = "# orbit CLI contexts: `orbit context --help`\n" + yaml.safe_dump(data, sort_keys=False)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    temporary.chmod(0o600)
    temporary.replace(path)  # readers never see half a file
    return path


def put(context: Context, *, make_current: bool) -> Path:
    """Add or replace ``context`` (and make it current)."""
    config = load()
    config.contexts[context.name] = context
    if make_current:
        config.current = context.name
    return save(config)


def active() -> Context | None:
    """The context commands use: ``ORBIT_CONTEXT``'s, else the current one, else None."""
    chosen = os.environ.get("ORBIT_CONTEXT")
    config = load()
    if chosen:
        return config.get(chosen)
    if config.current is None:
        return None
    return config.contexts.get(config.current)
