"""Admit Orbit custom resources the way the Kubernetes API server would, without one.

`orbit apply` (and the tests) have no API server, so this module plays the part of the
apiextensions server for our own CRDs — the CRD YAML under ``crds/`` is the single source of
truth for defaults and validation, in the cluster and out of it:

1. **Defaulting** - fill in every absent field that has a ``default``, recursing into the values
   just filled in (so ``default: {}`` on ``spec.retry`` brings the defaults of its fields too).
2. **Schema validation** - the ``openAPIV3Schema`` as JSON Schema draft 4 (OpenAPI 3.0's boolean
   ``exclusiveMinimum`` is draft 4's), after dropping ``x-kubernetes-*`` keys. Two of those keys
   are translated rather than dropped, because the server enforces them: ``list-type: set`` becomes
   ``uniqueItems``, and objects with ``properties`` refuse unknown fields (``kubectl`` asks for
   strict field validation by default; without it the server silently prunes them).
3. **CEL rules** - every ``x-kubernetes-validations`` rule is evaluated with ``cel-python``, with
   ``self`` bound to the value at the rule's level and typed from the schema (``number`` fields are
   CEL doubles even when written as ``1``, as the server types them).

Only what our CRDs use is implemented: no ``oldSelf`` transition rules, no ``int-or-string``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import yaml
from celpy import celtypes

from orbit_sdk.json_values import storable_problem

CRD_DIR = Path(str(resources.files("orbit_crds")))
GROUP = "orbit.dev"
VERSION = "v1alpha1"

Schema = dict[str, Any]


@dataclass(frozen=True)
class Refusal:
    """One reason the server would refuse an object."""

    by: str  # "schema", "json" (what the store cannot keep) or "cel"
    path: str  # dotted path of the offending field, e.g. "spec.retry.backoff.maxSeconds"
    message: str

    def __str__(self) -> str:
        return f"{self.by}: {self.path or '<root>'}: {self.message}"


@dataclass(frozen=True)
class CelRule:
    path: str  # dotted path of the value `self` is bound to
    rule: str
    message: str
    field_path: str


def load_yaml_documents(path: Path) -> list[dict[str, Any]]:
    with path.open() as fh:
        return [doc for doc in yaml.safe_load_all(fh) if doc is not None]


@cache
def crds() -> dict[str, dict[str, Any]]:
    """Every CRD under crds/, by kind."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        for doc in load_yaml_documents(path):
            found[doc["spec"]["names"]["kind"]] = doc
    return found


def version_of(crd: dict[str, Any], name: str = VERSION) -> dict[str, Any]:
    return next(v for v in crd["spec"]["versions"] if v["name"] == name)


def schema_of(kind: str) -> Schema:
    schema: Schema = version_of(crds()[kind])["schema"]["openAPIV3Schema"]
    return schema


def crd_for(obj: dict[str, Any]) -> dict[str, Any]:
    if obj.get("apiVersion") != f"{GROUP}/{VERSION}":
        raise LookupError(f"apiVersion {obj.get('apiVersion')!r} is not {GROUP}/{VERSION}")
    try:
        return crds()[obj["kind"]]
    except KeyError:
        raise LookupError(f"no CRD for kind {obj.get('kind')!r}") from None


# --- defaulting ------------------------------------------------------------------------------


def apply_defaults(schema: Schema, value: Any) -> Any:
    """Return a copy of ``value`` with the schema's defaults applied, as the server does."""
    value = copy.deepcopy(value)
    _default_in_place(schema, value)
    return value


def _default_in_place(schema: Schema, value: Any) -> None:
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                _default_in_place(sub, value[name])
    elif isinstance(value, list) and "items" in schema:
        for item in value:
            _default_in_place(schema["items"], item)


# --- schema validation -----------------------------------------------------------------------


def to_json_schema(schema: Schema) -> Schema:
    """The structural schema as JSON Schema draft 4, enforcing what the server enforces."""
    out: Schema = {}
    for key, sub in schema.items():
        if key.startswith("x-kubernetes-") or key == "default":
            continue
        if key == "properties":
            out[key] = {name: to_json_schema(prop) for name, prop in sub.items()}
        elif key == "items":
            out[key] = to_json_schema(sub)
        else:
            out[key] = sub
    if schema.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    if (
        schema.get("type") == "object"
        and "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def schema_refusals(schema: Schema, obj: dict[str, Any]) -> list[Refusal]:
    validator = jsonschema.Draft4Validator(to_json_schema(schema))
    return [
        Refusal("schema", ".".join(str(p) for p in error.absolute_path), error.message)
        for error in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.path)))
    ]


# --- CEL -------------------------------------------------------------------------------------

_ENV = celpy.Environment()


@cache
def compile_rule(rule: str) -> celpy.Runner:
    return _ENV.program(_ENV.compile(rule))


def cel_rules(schema: Schema, path: str = "") -> Iterator[CelRule]:
    """Every x-kubernetes-validations rule in the schema, with the path `self` is bound to."""
    for entry in schema.get("x-kubernetes-validations", []):
        yield CelRule(
            path=path,
            rule=entry["rule"],
            message=entry.get("message", f"failed rule: {entry['rule']}"),
            field_path=entry.get("fieldPath", ""),
        )
    for name, sub in schema.get("properties", {}).items():
        yield from cel_rules(sub, f"{path}.{name}" if path else name)
    if "items" in schema:
        yield from cel_rules(schema["items"], f"{path}[]")


def to_cel(schema: Schema, value: Any) -> Any:
    """A CEL value typed from the schema, as the API server types it."""
    if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
        return celpy.json_to_cel(value)  # type: ignore[attr-defined]
    kind = schema.get("type")
    if kind == "number":
        return celtypes.DoubleType(float(value))
    if kind == "integer":
        return celtypes.IntType(value)
    if kind == "boolean":
        return celtypes.BoolType(value)
    if kind == "string":
        return celtypes.StringType(value)
    if kind == "array":
        return celtypes.ListType([to_cel(schema.get("items", {}), item) for item in value])
    if kind == "object":
        props = schema.get("properties", {})
        return celtypes.MapType(
            {celtypes.StringType(k): to_cel(props.get(k, {}), v) for k, v in value.items()}
        )
    return celpy.json_to_cel(value)  # type: ignore[attr-defined]


def _values_at(schema: Schema, value: Any, path: list[str]) -> Iterator[tuple[Schema, Any, str]]:
    """(schema, value, concrete path) of every value at the rule path; absent values yield none."""
    if not path:
        yield schema, value, ""
        return
    head, rest = path[0], path[1:]
    if head.endswith("[]"):
        name = head[:-2]
        sub = schema["properties"][name] if name else schema
        items = value.get(name) if name else value
        if not isinstance(items, list):
            return
        for i, item in enumerate(items):
            for s, v, p in _values_at(sub["items"], item, rest):
                yield s, v, f"{name}[{i}]" + (f".{p}" if p else "")
        return
    if not isinstance(value, dict) or head not in value:
        return
    for s, v, p in _values_at(schema["properties"][head], value[head], rest):
        yield s, v, head + (f".{p}" if p else "")


def cel_refusals(schema: Schema, obj: dict[str, Any]) -> list[Refusal]:
    refusals = []
    for rule in cel_rules(schema):
        steps = rule.path.split(".") if rule.path else []
        for sub, value, where in _values_at(schema, obj, steps):
            result: Any
            try:
                result = compile_rule(rule.rule).evaluate({"self": to_cel(sub, value)})
            except celpy.CELEvalError as exc:  # type: ignore[attr-defined]
                result = exc
            if isinstance(result, celtypes.BoolType) and bool(result):
                continue
            field = where + rule.field_path if rule.field_path else where
            message = rule.message
            if not isinstance(result, celtypes.BoolType):
                message = f"{message} (evaluation error: {result!s})"
            refusals.append(Refusal("cel", field, message))
    return refusals


# --- the whole admission -----------------------------------------------------------------------


def admit(obj: dict[str, Any]) -> tuple[dict[str, Any], list[Refusal]]:
    """Default ``obj`` and validate it; returns the defaulted object and why it is refused.

    CEL rules run only on an object that passed the schema, as their values may be mistyped.
    """
    schema = version_of(crd_for(obj))["schema"]["openAPIV3Schema"]
    defaulted = apply_defaults(schema, obj)
    refusals = schema_refusals(schema, defaulted) + json_refusals(defaulted)
    if not refusals:
        refusals = cel_refusals(schema, defaulted)
    return defaulted, refusals


def json_refusals(obj: dict[str, Any]) -> list[Refusal]:
    """What of the spec Orbit cannot store as JSON (``orbit_sdk.json_values``): YAML has NaN
    and infinities (``.nan``, ``.inf``), JSON has not; the API server would store them, the
    store refuses them (or, on SQLite, keeps what the API cannot send back)."""
    problem = storable_problem(obj.get("spec"), "spec")
    return [] if problem is None else [Refusal("json", problem.path, problem.reason)]


# --- structure of the schema itself ------------------------------------------------------------


def walk(schema: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}" if path else name)
    if "items" in schema:
        yield from walk(schema["items"], f"{path}[]")


def resolve_json_path(schema: Schema, json_path: str) -> Schema:
    """The schema node a printer column's jsonPath points at (KeyError if it points nowhere).

    Understands the subset kubectl columns use: ``.a.b``, ``[*]``, ``[0]`` and filters
    ``[?(@.field=="value")]`` (the filtered field must exist in the items too).
    """
    node = schema
    for token in re.findall(r"\.([A-Za-z0-9_-]+)|\[([^\]]*)\]", json_path):
        field, index = token
        if field:
            if node.get("type") != "object" or field not in node.get("properties", {}):
                raise KeyError(f"{json_path}: no field {field!r}")
            node = node["properties"][field]
            continue
        if node.get("type") != "array":
            raise KeyError(f"{json_path}: [{index}] applied to a non-array")
        node = node["items"]
        filt = re.fullmatch(r'\?\(@\.([A-Za-z0-9_-]+)\s*==\s*"[^"]*"\)', index)
        if filt and filt.group(1) not in node.get("properties", {}):
            raise KeyError(f"{json_path}: filter on missing field {filt.group(1)!r}")
        if not filt and not re.fullmatch(r"\*|\d+", index):
            raise KeyError(f"{json_path}: unsupported index [{index}]")
    return node
