"""The reserved system namespace through the operator (orbit/reconcile/reserved.py): an admin
credential in ``orbit-system`` is database-wide admin (restore fencing, reopening dispatch), so
a Kubernetes user who can create resources in a namespace of that name gets nothing from it
unless the operator itself runs there."""

from __future__ import annotations

import functools
import secrets as random
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import sqlalchemy as sa
from conftest import ORBIT, Kube, orbit_resource, secret, wait_for
from orbit_operator.adapter import reserved
from orbit_operator.settings import OperatorConfig

from orbit_store.access.credentials import authenticate, create_token
from orbit_store.db import run_transaction
from orbit_store.fencing import SYSTEM_NAMESPACE
from orbit_store.schema import credentials, queues

pytestmark = pytest.mark.slow


def rows(engine: sa.Engine, table: sa.Table, name: str) -> list[Any]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                sa.select(table).where(table.c.namespace == SYSTEM_NAMESPACE, table.c.name == name)
            )
        )


def declare_admin_credential(kube: Kube, name: str, token: str) -> dict[str, Any]:
    """An admin Credential and its Secret in orbit-system, once the operator refused it."""
    kube.create(secret(SYSTEM_NAMESPACE, f"{name}-token", token=token))
    spec = {"secretRef": {"name": f"{name}-token"}, "roles": ["admin"]}
    kube.create(orbit_resource("Credential", SYSTEM_NAMESPACE, name, spec))
    return kube.wait_ready(
        "Credential", SYSTEM_NAMESPACE, name, status="False", reason="InvalidSpec"
    )


def test_a_credential_in_orbit_system_is_refused_by_an_operator_running_elsewhere(
    kube: Kube, engine: sa.Engine
) -> None:
    name, token = f"fencer-{uuid.uuid4().hex[:8]}", random.token_hex(20)
    obj = declare_admin_credential(kube, name, token)
    message = obj["status"]["conditions"][0]["message"]
    assert message.startswith("metadata.namespace: 'orbit-system' is Orbit's reserved system")
    assert "orbit admin token create -n orbit-system" in message
    assert rows(engine, credentials, name) == []
    with engine.connect() as conn:
        assert authenticate(conn, token) is None


def test_an_ordinary_resource_in_orbit_system_is_refused_too(kube: Kube, engine: sa.Engine) -> None:
    name = f"q-{uuid.uuid4().hex[:8]}"
    kube.create(orbit_resource("Queue", SYSTEM_NAMESPACE, name, {}))
    kube.wait_ready("Queue", SYSTEM_NAMESPACE, name, status="False", reason="InvalidSpec")
    assert rows(engine, queues, name) == []


def test_deleting_a_refused_resource_leaves_the_system_namespaces_rows_alone(
    kube: Kube, engine: sa.Engine
) -> None:
    """The system admin token made with `orbit admin token create -n orbit-system` survives a
    stray resource of the same name being created and deleted."""
    name = f"restore-{uuid.uuid4().hex[:8]}"
    issued = run_transaction(
        engine,
        functools.partial(create_token, namespace=SYSTEM_NAMESPACE, name=name, roles=["admin"]),
    )
    declare_admin_credential(kube, name, random.token_hex(20))
    kube.delete(ORBIT, "Credential", SYSTEM_NAMESPACE, name)
    kube.wait_gone(ORBIT, "Credential", SYSTEM_NAMESPACE, name)
    with engine.connect() as conn:
        still = wait_for("the token still works", lambda: authenticate(conn, issued.token))
    assert (still.namespace, still.name) == (SYSTEM_NAMESPACE, name)


def test_the_operator_declares_orbit_system_only_when_it_runs_there(tmp_path: Path) -> None:
    """Where the operator runs: the chart's downward-API variable, else the pod's service
    account file; unknown outside a pod, and then orbit-system is refused."""
    in_pod = tmp_path / "namespace"
    in_pod.write_text("orbit-system\n")
    assert OperatorConfig.from_env({}, in_pod).own_namespace == SYSTEM_NAMESPACE
    named = {"ORBIT_OPERATOR_NAMESPACE": "orbit"}
    assert OperatorConfig.from_env(named, in_pod).own_namespace == "orbit"
    assert OperatorConfig.from_env({}, tmp_path / "absent").own_namespace is None

    body = {"metadata": {"namespace": SYSTEM_NAMESPACE, "name": "fencer"}}
    for own, refused in ((SYSTEM_NAMESPACE, False), ("orbit", True), (None, True)):
        ctx: Any = SimpleNamespace(config=OperatorConfig(own_namespace=own))
        assert (reserved(ctx, body) is not None) == refused, own
    ordinary: Any = SimpleNamespace(config=OperatorConfig(own_namespace="orbit"))
    assert reserved(ordinary, {"metadata": {"namespace": "shop"}}) is None
