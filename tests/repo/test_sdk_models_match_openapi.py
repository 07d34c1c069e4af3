"""The SDK's models (sdk/orbit_sdk) are its own copy of the wire: the SDK speaks HTTP only and
cannot import the server's bodies. This compares each body the SDK parses with the server's
OpenAPI document: every field the server sends must be a field of the SDK's model, of a type
that accepts every value the server may send there (``null`` included), nested bodies alike.
The SDK may accept more (defaults, ``Any``, a plain ``str`` for an enum: a newer server may
add values); it may not accept less."""

from __future__ import annotations

import datetime as dt
import enum
import types
import typing
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic import BaseModel

import orbit_sdk
from orbit.api.app import create_app
from orbit.api.context import ServerSettings
from orbit_sdk import results as sdk_results

#: The bodies the SDK parses, by the server's component name; nested bodies are paired
#: through the fields that hold them.
PARSED: dict[str, type[BaseModel]] = {
    "Task": orbit_sdk.Task,
    "TaskDetail": orbit_sdk.TaskDetail,
    "TaskPage": orbit_sdk.TaskPage,
    "Identity": orbit_sdk.Identity,
    "Session": orbit_sdk.Session,
    "LeaseBatch": orbit_sdk.LeaseBatch,
    "StartResponse": orbit_sdk.StartResponse,
    "HeartbeatResponse": orbit_sdk.HeartbeatResponse,
    "CompletionResponse": orbit_sdk.CompletionResponse,
    "SubmissionItemResult": orbit_sdk.SubmissionResult,
    "Problem": orbit_sdk.Problem,
    "Schedule": orbit_sdk.Schedule,
    "SchedulePage": orbit_sdk.SchedulePage,
    "Preview": orbit_sdk.SchedulePreview,
    "Definition": orbit_sdk.WorkflowDefinition,
    "Workflow": orbit_sdk.Workflow,
    "WorkflowDetail": orbit_sdk.WorkflowDetail,
    "WorkflowPage": orbit_sdk.WorkflowPage,
    "WorkflowEvent": orbit_sdk.WorkflowEvent,
    "Signal": orbit_sdk.Signal,
    "Subscription": sdk_results.Subscription,
    "EventBatch": sdk_results.EventBatch,
    "AuditPage": sdk_results.AuditPage,
}

#: What a Python annotation accepts, in the JSON Schema's terms.
ACCEPTS: dict[Any, set[str]] = {
    str: {"string", "date-time"},
    int: {"integer"},
    float: {"number", "integer"},
    bool: {"boolean"},
    dt.datetime: {"date-time"},
    type(None): {"null"},
}


@pytest.fixture(scope="module")
def components() -> dict[str, Any]:
    # Building the document reaches no database.
    engine = sa.create_engine("mysql+pymysql://nobody@127.0.0.1:1/none")
    app = create_app(engine, ServerSettings(database_url="x", run_engines=False))
    return dict(app.openapi()["components"]["schemas"])


def mismatches(
    components: dict[str, Any], name: str, model: type[BaseModel], seen: set[str]
) -> list[str]:
    """Each field of the server's ``name`` body that ``model`` lacks or types otherwise."""
    if name in seen:
        return []
    seen.add(name)
    fields = {(f.alias or n): f for n, f in model.model_fields.items()}
    found = []
    for field, schema in components[name].get("properties", {}).items():
        where = f"{model.__name__}.{field} (server {name})"
        if field not in fields:
            found.append(f"{where}: missing")
            continue
        found += _compare(components, where, schema, fields[field].annotation, seen)
    return found


def _compare(
    components: dict[str, Any], where: str, schema: dict[str, Any], hint: Any, seen: set[str]
) -> list[str]:
    if hint is Any:
        return []
    alternatives = _flat(schema)
    accepted = [_accepting(components, where, s, hint, seen) for s in alternatives]
    refused = [s for s, answer in zip(alternatives, accepted, strict=True) if answer is None]
    found = [a for answer in accepted if answer for a in answer]
    return found + [f"{where}: the server sends {s}, the SDK takes {hint}" for s in refused]


def _accepting(
    components: dict[str, Any], where: str, schema: dict[str, Any], hint: Any, seen: set[str]
) -> list[str] | None:
    """The mismatches inside one form of a value ``hint`` accepts; None if it refuses it."""
    for option in _options(hint):
        if option is Any:
            return []
        kind = _kind(schema)
        if "$ref" in schema and isinstance(option, type) and issubclass(option, BaseModel):
            return mismatches(components, schema["$ref"].rsplit("/", 1)[-1], option, seen)
        if kind == "array" and typing.get_origin(option) is list:
            (item,) = typing.get_args(option)
            return _compare(components, f"{where}[]", schema.get("items", {}), item, seen)
        if kind == "object" and (typing.get_origin(option) is dict or option is dict):
            return []
        if kind in _accepts(option):
            return []
    return None


def _flat(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The forms a value may take: each ``anyOf`` alternative, a lone ``allOf`` reference."""
    if "anyOf" in schema:
        return [form for alternative in schema["anyOf"] for form in _flat(alternative)]
    if len(schema.get("allOf", ())) == 1:
        return _flat(schema["allOf"][0])
    return [schema]


def _kind(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return "object"
    if schema.get("type") == "string" and schema.get("format") == "date-time":
        return "date-time"
    return str(schema.get("type", "any"))


def _options(hint: Any) -> list[Any]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return list(typing.get_args(hint))
    return [hint]


def _accepts(option: Any) -> set[str]:
    if typing.get_origin(option) is typing.Literal:
        return {"string"} if all(isinstance(v, str) for v in typing.get_args(option)) else set()
    if isinstance(option, type) and issubclass(option, enum.StrEnum):
        return {"string"}
    return ACCEPTS.get(option, set())


@pytest.mark.parametrize("name", sorted(PARSED))
def test_the_sdk_model_takes_every_field_the_server_sends(
    components: dict[str, Any], name: str
) -> None:
    assert mismatches(components, name, PARSED[name], set()) == []


def test_a_field_the_sdk_lacks_or_types_otherwise_is_found(components: dict[str, Any]) -> None:
    class NarrowIdentity(BaseModel):
        namespace: int
        roles: list[int]

    found = mismatches(components, "Identity", NarrowIdentity, set())
    assert "NarrowIdentity.name (server Identity): missing" in found
    assert any(
        f.startswith("NarrowIdentity.namespace (server Identity): the server") for f in found
    )
    assert any(f.startswith("NarrowIdentity.roles (server Identity)[]: the server") for f in found)
