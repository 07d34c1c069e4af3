"""Execution gates (seed §4 "通用执行门控", invariant 12): an allow/pause flag with a control
version that claims and starts read under a shared lock. Owners (a workflow instance) close a
gate to stop new grants of its tasks and open it again to let them run; in-flight attempts are
not interrupted.

Minimal version for Weave: create and flip. The gate row is written only here, with a conditional
UPDATE whose affected-row count is checked.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import sqlalchemy as sa

from orbit_store.clock import utc_now
from orbit_store.errors import Conflict, NotFound
from orbit_store.ids import new_id
from orbit_store.schema import execution_gates


@dataclass(frozen=True)
class GateState:
    gate_id: str
    allowed: bool
    control_version: int
    changed: bool


def create_gate(
    conn: sa.Connection, *, namespace: str, owner_kind: str, owner_id: str, now: dt.datetime
) -> str:
    """A new open gate (allowed, control_version 1) owned by ``owner_kind``/``owner_id``."""
    gate_id = new_id()
    conn.execute(
        execution_gates.insert().values(
            id=gate_id,
            namespace=namespace,
            owner_kind=owner_kind,
            owner_id=owner_id,
            allowed=True,
            control_version=1,
            created_at=now,
            updated_at=now,
        )
    )
    return gate_id


def set_gate(
    conn: sa.Connection,
    *,
    namespace: str,
    gate_id: str,
    allowed: bool,
    expected_control_version: int | None = None,
) -> GateState:
    """Open or close the gate, bumping its control version when it flips.

    ``expected_control_version`` makes the change conditional: a gate at another version raises
    :class:`Conflict` and nothing changes. Setting the value it already has changes nothing.
    """
    row = conn.execute(
        sa.select(execution_gates.c.allowed, execution_gates.c.control_version)
        .where(execution_gates.c.id == gate_id, execution_gates.c.namespace == namespace)
        .with_for_update()
    ).one_or_none()
    if row is None:
        raise NotFound(f"execution gate {gate_id} not found in namespace {namespace!r}")
    if expected_control_version is not None and row.control_version != expected_control_version:
        raise Conflict(
            f"execution gate {gate_id} is at control version {row.control_version}, not "
            f"{expected_control_version}: it changed since it was read; read it again"
        )
    if bool(row.allowed) == allowed:
        return GateState(gate_id, allowed, int(row.control_version), changed=False)
    new_version = int(row.control_version) + 1
    updated = conn.execute(
        execution_gates.update()
        .where(
            execution_gates.c.id == gate_id,
            execution_gates.c.control_version == row.control_version,
        )
        .values(
            allowed=allowed,
            control_version=new_version,
            updated_at=utc_now(),
        )
    )
    if updated.rowcount != 1:
        raise Conflict(f"execution gate {gate_id} changed concurrently; read it again")
    return GateState(gate_id, allowed, new_version, changed=True)
