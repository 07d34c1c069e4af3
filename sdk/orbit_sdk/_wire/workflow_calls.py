"""Every workflow API call as a ``Call`` value (see ``_calls``): paths, bodies, retry safety."""

from __future__ import annotations

import uuid
from typing import Any

from .calls import _ns, _seg
from .transport import Call


def publish(namespace: str, name: str, spec: dict[str, Any], reason: str = "") -> Call:
    # Resending is harmless: the same spec again is recognised by its digest (no new version).
    body: dict[str, Any] = {"name": name, "spec": spec}
    if reason:
        body["reason"] = reason
    return Call("POST", f"{_ns(namespace)}/workflow-definitions", json=body)


def get_definition(namespace: str, name: str) -> Call:
    return Call("GET", f"{_ns(namespace)}/workflow-definitions/{_seg(name)}")


def start(
    namespace: str, definition: str, *, input: Any, start_key: str | None, version: int | None
) -> Call:
    """The start key is fixed here, before the first try: every retry is the same start."""
    body: dict[str, Any] = {
        "definition": definition,
        "input": {} if input is None else input,
        "start_key": start_key or str(uuid.uuid4()),
    }
    if version is not None:
        body["version"] = version
    return Call("POST", f"{_ns(namespace)}/workflows", json=body)


def get(namespace: str, workflow_id: str) -> Call:
    return Call("GET", f"{_ns(namespace)}/workflows/{_seg(workflow_id)}")


def history(namespace: str, workflow_id: str) -> Call:
    return Call("GET", f"{_ns(namespace)}/workflows/{_seg(workflow_id)}/history")


def list_(
    namespace: str,
    *,
    state: str | None,
    definition: str | None,
    page_size: int,
    page_token: str | None,
) -> Call:
    params = {
        "state": state,
        "definition": definition,
        "page_size": page_size,
        "page_token": page_token,
    }
    return Call("GET", f"{_ns(namespace)}/workflows", params=params)


def signal(
    namespace: str, workflow_id: str, name: str, payload: Any, signal_id: str | None
) -> Call:
    """The signal id is fixed here: a resent signal is a replay, never a second signal."""
    body = {"signal_id": signal_id or str(uuid.uuid4()), "name": name, "payload": payload}
    return Call("POST", f"{_ns(namespace)}/workflows/{_seg(workflow_id)}/signals", json=body)


def control(namespace: str, workflow_id: str, action: str, reason: str) -> Call:
    # Pause, resume and cancel change nothing the second time: safe to resend.
    path = f"{_ns(namespace)}/workflows/{_seg(workflow_id)}/{action}"
    return Call("POST", path, json={"reason": reason})
