"""What the hostile-input suite (test_hostile_input.py) sends, derived from the server's own
OpenAPI document so that a new route or a new field is attacked without anyone listing it:
every field of every request body (nested ones too), every path and query parameter, with
values a careless or malicious client sends — and the rules every answer must keep."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

#: Stands in a document for a raw JSON text (``NaN`` is no JSON value json.dumps would write).
RAW = "\u2063raw\u2063"


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


#: Values for a body field, as raw JSON text: non-JSON numbers, huge and negative integers,
#: deep nesting, text no store or terminal expects, wrong types.
BODY_VALUES: dict[str, str] = {
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "1e400": "1e400",
    "huge-int": str(10**30),
    "int64-min-minus-1": str(-(2**63) - 1),
    "negative": "-1",
    "64-deep": nested(64),
    "unicode": json.dumps("Ünï 😀 \u202e名前 \u0301", ensure_ascii=False),
    "control-chars": json.dumps("a\u0000b\u0007\u001b[31m\u007f"),
    "lone-surrogate": '"\\ud800"',
    "oversized": json.dumps("x" * 100_000),
    "empty": '""',
    "list": "[1, 2]",
    "object": '{"k": "v"}',
    "bool": "true",
    "null": "null",
}

#: Values for a path or query parameter (percent-encoded when sent).
PARAM_VALUES: dict[str, str] = {
    "NaN": "NaN",
    "1e400": "1e400",
    "huge-int": str(10**30),
    "negative": "-1",
    "unicode": "Ünï😀\u202e名前",
    "control-chars": "a\u0000b\u001b",
    "dot-dot": "../../v1/whoami",
    "long": "x" * 5000,
    "invalid-utf8": "\udcff",  # sent as %FF
}


@dataclass(frozen=True)
class Operation:
    method: str
    path: str  # the template, e.g. /v1/namespaces/{namespace}/tasks/{task_id}
    path_params: tuple[str, ...]
    query_params: tuple[str, ...]
    body_schema: dict[str, Any] | None
    #: Takes a bearer token (everything but the probes and /metrics, the operator's endpoints).
    authenticated: bool

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"


def operations(openapi: dict[str, Any]) -> list[Operation]:
    """Every operation of the document, with its parameters and its body's schema."""
    found = []
    for path, methods in openapi["paths"].items():
        for method, op in methods.items():
            params = op.get("parameters", [])
            content = op.get("requestBody", {}).get("content", {})
            schema = content.get("application/json", {}).get("schema")
            found.append(
                Operation(
                    method.upper(),
                    path,
                    tuple(p["name"] for p in params if p["in"] == "path"),
                    tuple(p["name"] for p in params if p["in"] == "query"),
                    resolve(openapi, schema) if schema else None,
                    any(p["in"] == "header" and p["name"] == "authorization" for p in params),
                )
            )
    return found


def resolve(openapi: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``$ref`` and nullable ``anyOf`` replaced by what they name."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return resolve(openapi, openapi["components"]["schemas"][name])
    choices = [s for s in schema.get("anyOf", []) if s.get("type") != "null"]
    if len(choices) == 1:
        return resolve(openapi, choices[0])
    return schema


def field_paths(openapi: dict[str, Any], schema: dict[str, Any], prefix: tuple[Any, ...] = ()):  # type: ignore[no-untyped-def]
    """Every field a body may carry, as paths (``("items", 0, "params")``): the properties of
    objects, nested objects' and the first item of an array of objects (two levels deep)."""
    for name, sub in schema.get("properties", {}).items():
        path = (*prefix, name)
        yield path
        if len(prefix) >= 3:
            continue
        target = resolve(openapi, sub)
        if target.get("type") == "object" or "properties" in target:
            yield from field_paths(openapi, target, path)
        items = resolve(openapi, target.get("items", {})) if target.get("type") == "array" else {}
        if "properties" in items:
            yield from field_paths(openapi, items, (*path, 0))


def with_value(body: Any, path: tuple[Any, ...], raw: str) -> str:
    """``body`` as JSON text with the raw JSON ``raw`` at ``path`` (made where it is missing)."""
    document: Any = copy.deepcopy(body) if body is not None else {}
    node: Any = document
    for part, after in itertools.pairwise(path):
        if isinstance(part, int):
            while len(node) <= part:
                node.append({})
            node = node[part]
        else:
            if not isinstance(node.get(part), dict | list):
                node[part] = [] if isinstance(after, int) else {}
            node = node[part]
    last = path[-1]
    if isinstance(last, int):
        while len(node) <= last:
            node.append(None)
    node[last] = RAW
    text = json.dumps(document, ensure_ascii=False)
    return text.replace(json.dumps(RAW, ensure_ascii=False), raw)


def names(problem: Any, field: str) -> bool:
    """The problem names ``field``: in an error's ``loc``, its ``field`` member or its detail."""
    if not isinstance(problem, dict):
        return False
    locs = [[str(p) for p in e.get("loc", [])] for e in problem.get("errors") or []]
    return (
        any(field in loc for loc in locs)
        or field in str(problem.get("field", ""))
        or field in str(problem.get("detail", ""))
    )


def server_errors(document: Any) -> Iterator[Any]:
    """Problems inside an answer (a batch's items) whose status is a server error."""
    if isinstance(document, dict):
        status = document.get("status")
        if isinstance(status, int) and status >= 500 and "type" in document:
            yield document
        for value in document.values():
            yield from server_errors(value)
    elif isinstance(document, list):
        for value in document:
            yield from server_errors(value)
