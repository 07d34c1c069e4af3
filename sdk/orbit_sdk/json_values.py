"""Which JSON values Orbit can store: the rule the server applies at its door to params, results,
errors, workflow input, signal payloads and schedule templates, and the SDK applies before it
sends anything (the server imports it from here, so the two cannot drift apart).

A value is storable when it is plain JSON that every database Orbit runs on accepts:

- numbers are finite: JSON has no NaN, Infinity or -Infinity (Python's ``json`` writes them,
  MariaDB's JSON check refuses them);
- arrays and objects nest at most :data:`MAX_JSON_DEPTH` deep (MariaDB refuses JSON nested 32
  deep; Orbit keeps room for the records it wraps values in, such as result events and the
  audit log);
- text is valid Unicode (no lone surrogate such as ``"\\ud800"``), in strings and in keys;
- only JSON types: dicts with string keys, lists or tuples, str, int, float, bool, None.
"""

from __future__ import annotations

import json
import math
from typing import Any

#: The deepest nesting of arrays and objects a value may have: ``{"a": 1}`` is 1 deep,
#: ``{"a": [1]}`` 2, a scalar 0.
MAX_JSON_DEPTH = 20


class Unstorable(ValueError):
    """``value`` cannot be stored; ``path`` says where (``params.a[2]``), ``reason`` why;
    ``not_json``: it holds something that is no JSON type at all (a set, a datetime)."""

    def __init__(self, path: str, reason: str, *, not_json: bool = False) -> None:
        super().__init__(f"{path or '<value>'}: {reason}")
        self.path, self.reason, self.not_json = path, reason, not_json


def check_storable(value: Any, path: str = "") -> None:
    """Raise :class:`Unstorable` naming the first place in ``value`` (below ``path``, e.g. the
    field's name) that Orbit cannot store; return when it can store all of it."""
    if _is_container(value) and _deeper_than(value, MAX_JSON_DEPTH - 1):
        _find(value, path)  # first: it bounds the recursion of what follows
    try:  # the common case, in C: finite numbers, encodable text, JSON types only
        _ENCODER.encode(value).encode()
    except (ValueError, TypeError, UnicodeEncodeError):
        _find(value, path)  # raises, naming the place
        raise Unstorable(path, "is not a JSON value") from None


def storable_problem(value: Any, path: str = "") -> Unstorable | None:
    """:func:`check_storable`'s refusal, or None."""
    try:
        check_storable(value, path)
    except Unstorable as exc:
        return exc
    return None


_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=False)
_CONTAINERS = (dict, list, tuple)


def _deeper_than(node: Any, room: int) -> bool:
    """Whether ``node`` (an array or object) holds arrays or objects more than ``room`` levels
    below it. Scalars are only looked at, never walked."""
    for child in node.values() if isinstance(node, dict) else node:
        if isinstance(child, _CONTAINERS) and (room == 0 or _deeper_than(child, room - 1)):
            return True
    return False


def _is_container(value: Any) -> bool:
    return isinstance(value, _CONTAINERS)


def _child(where: str, node: Any, key: Any) -> str:
    if not isinstance(node, dict):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else str(key)


def _too_deep() -> str:
    return (
        f"arrays and objects nested more than {MAX_JSON_DEPTH} deep cannot be stored "
        f"(the limit is {MAX_JSON_DEPTH}): flatten the value, or store it elsewhere and pass "
        "a reference"
    )


def _find(value: Any, where: str, depth: int = 0) -> None:
    """Walk ``value`` and raise :class:`Unstorable` at the first thing that cannot be stored
    (the walk goes no deeper than :data:`MAX_JSON_DEPTH`)."""
    if _is_container(value) and depth == MAX_JSON_DEPTH:
        raise Unstorable(where, _too_deep())
    if value is None or isinstance(value, bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            name = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
            raise Unstorable(
                where,
                f"{name} is not a JSON number (JSON has no NaN or Infinity): send null, a "
                "finite number or a string",
            )
        return
    if isinstance(value, str):
        _check_text(value, where)
        return
    if isinstance(value, dict):
        for key, child in value.items():
            if isinstance(key, str):
                _check_text(key, where)
            elif not isinstance(key, int | float | bool | None):  # json writes those as text
                raise Unstorable(
                    where, f"key {key!r} is not text: JSON keys are strings", not_json=True
                )
            _find(child, _child(where, value, key), depth + 1)
        return
    if isinstance(value, list | tuple):
        for index, child in enumerate(value):
            _find(child, _child(where, value, index), depth + 1)
        return
    raise Unstorable(where, f"a {type(value).__name__} is not a JSON value", not_json=True)


def _check_text(text: str, where: str) -> None:
    try:
        text.encode()
    except UnicodeEncodeError:
        raise Unstorable(
            where,
            "text with a lone surrogate (such as \\ud800) is not valid Unicode and cannot be "
            "stored",
        ) from None
