"""Manifests that each break one OpenAPI constraint of a CRD, generated from its schema.

Starting from a valid object, every constraint of a value the object has (enum, minimum,
maximum, pattern, lengths, item counts, required fields, unknown fields) is broken in turn, one
per manifest: what the server must refuse, and the offline admission with it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

Schema = dict[str, Any]
Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Violation:
    path: str  # dotted, with [i] for items: the field the server must name
    breaks: str  # the constraint broken, e.g. "minimum 1"
    manifest: dict[str, Any]


def dotted(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _set(obj: dict[str, Any], path: Path, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    node: Any = changed
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return changed


def _delete(obj: dict[str, Any], path: Path) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    node: Any = changed
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]
    return changed


def values(schema: Schema, value: Any, path: Path = ()) -> Iterator[tuple[Path, Schema, Any]]:
    """(path, schema, value) of every value in ``value`` the schema describes."""
    yield path, schema, value
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                yield from values(sub, value[name], (*path, name))
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            yield from values(schema["items"], item, (*path, i))


def _not_matching(pattern: str) -> str | None:
    for candidate in ("Not A Name!", "-", "", "UPPER_case", "1" * 300):
        if not re.search(pattern, candidate):
            return candidate
    return None


def _broken(node: Schema, value: Any) -> Iterator[tuple[str, Any]]:
    """(what is broken, the value that breaks it) for each constraint on the value itself."""
    number = float if node.get("type") == "number" else int
    if "enum" in node:
        yield f"enum {node['enum']}", "NotOneOfThem"
    if "minimum" in node:
        yield f"minimum {node['minimum']}", number(node["minimum"]) - 1
    if "maximum" in node:
        yield f"maximum {node['maximum']}", number(node["maximum"]) + 1
    if "pattern" in node and (bad := _not_matching(node["pattern"])) is not None:
        yield f"pattern {node['pattern']}", bad
    if "maxLength" in node:
        yield f"maxLength {node['maxLength']}", "a" * (node["maxLength"] + 1)
    if node.get("minLength", 0) > 0:
        yield f"minLength {node['minLength']}", ""
    if node.get("minItems", 0) > 0:
        yield f"minItems {node['minItems']}", []
    if "maxItems" in node and isinstance(value, list) and value:
        yield f"maxItems {node['maxItems']}", [value[0]] * (node["maxItems"] + 1)


def violations(schema: Schema, valid: dict[str, Any]) -> Iterator[Violation]:
    """One manifest per constraint broken, from the ``valid`` object of the schema."""
    for path, node, value in values(schema, valid):
        if not path or path[0] != "spec":
            continue  # metadata is the server's own; status is written by the operator
        for breaks, bad in _broken(node, value):
            yield Violation(dotted(path), breaks, _set(valid, path, bad))
        if isinstance(value, dict) and node.get("type") == "object":
            for name in node.get("required", []):
                if name in value:
                    yield Violation(
                        dotted((*path, name)), "required", _delete(valid, (*path, name))
                    )
            if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
                yield Violation(
                    dotted((*path, "notAField")),
                    "unknown field",
                    _set(valid, (*path, "notAField"), 1),
                )
