"""How every table routes when the store is split by namespace: the one list of what is global.

The namespace is the routing unit (seed §4: "未来物理分片时先明确路由单元"; ORBIT.md §3): every
transaction touches the rows of one namespace, so a namespace can live on any shard and a
sharded deployment never needs a cross-shard transaction. Nearly every table has a
``namespace`` column (``namespaces`` is keyed by it) and is sharded by it. What is *not*
routed by a namespace value is listed here, each with the reason it is global and how it maps
to a sharded deployment (``deploy/vitess/vschema.json``, docs/operations/scaling.md "Past one
primary"):

- :data:`GLOBAL_TABLES`: tables without a namespace, kept in an unsharded keyspace (or copied to
  every shard as a reference table when namespace transactions read them);
- :data:`CROSS_NAMESPACE_READS`: the store functions allowed to read without a namespace value,
  each a non-locking read outside any writing transaction (a scatter read over every shard,
  or a lookup vindex), whose rows are then each decided in a transaction of their own
  namespace.

``tests/locality`` checks the whole store and API suites against this module: a statement on a
namespaced table that is bounded neither by a namespace value nor by a unique key, a
transaction that touches two namespaces, or a cross-namespace read not listed here fails the
suite.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from orbit_store.schema import metadata


class Placement(Enum):
    """Where a global table lives in a keyspace sharded by namespace."""

    #: One copy in the unsharded keyspace; read and written there, never inside a namespace's
    #: transaction.
    UNSHARDED = "unsharded"
    #: Written in the unsharded keyspace and copied to every shard (Vitess reference table), so a
    #: namespace's transaction reads it on its own shard.
    REFERENCE = "reference"


@dataclass(frozen=True)
class GlobalTable:
    placement: Placement
    why: str


#: Tables without a namespace. Nothing else may be global.
GLOBAL_TABLES: dict[str, GlobalTable] = {
    "alembic_version": GlobalTable(
        Placement.UNSHARDED,
        "the schema revision (Alembic's own table); every shard runs the same migrations",
    ),
    "schema_compatibility": GlobalTable(
        Placement.REFERENCE,
        "the oldest code revision the schema still serves: one row per schema, read at start-up",
    ),
    "dispatch_fence": GlobalTable(
        Placement.REFERENCE,
        "the restore epoch and whether dispatch is open: a restore restores a database, and "
        "every grant, start, renewal and completion compares its epoch inside the namespace's "
        "own transaction",
    ),
    "restore_fences": GlobalTable(
        Placement.UNSHARDED,
        "the history of restore fences: written by `orbit admin restore-fence`, read by admins",
    ),
    "server_replicas": GlobalTable(
        Placement.REFERENCE,
        "when each server replica was last seen serving: an outage of every replica is not "
        "charged to workers, and the reaper reads it inside a namespace's lapse transaction",
    ),
}


class ReadKind(Enum):
    #: Runs on every shard and merges the answers (Vitess scatter): a background finder.
    SCATTER = "scatter"
    #: Finds rows by a globally unique value through a lookup vindex.
    LOOKUP = "lookup"


@dataclass(frozen=True)
class CrossNamespaceRead:
    kind: ReadKind
    why: str


_FINDER = (
    "a background finder: lists due work of every namespace, then each item is decided in a "
    "transaction of its own namespace"
)
_ADMIN = "`orbit admin verify` over every namespace: an admin read, never locking"
_METRICS = "a gauge over every namespace (Prometheus metrics), read by the gauge loop"

#: Store functions (``module:qualified name``) that may read namespaced tables without a
#: namespace value. Each runs outside any writing transaction and takes no locks.
CROSS_NAMESPACE_READS: dict[str, CrossNamespaceRead] = {
    "orbit_store.pulse.leases.expiry:find_lapsed_attempts": CrossNamespaceRead(
        ReadKind.SCATTER, _FINDER
    ),
    "orbit_store.pulse.leases.expiry:find_overdue_waiting": CrossNamespaceRead(
        ReadKind.SCATTER, _FINDER
    ),
    "orbit_store.pulse.workers.sessions:find_expired_sessions": CrossNamespaceRead(
        ReadKind.SCATTER, _FINDER
    ),
    "orbit_store.delivery.push:push_subscriptions": CrossNamespaceRead(ReadKind.SCATTER, _FINDER),
    "orbit_store.pulse.claim.promote:namespaces_with_work": CrossNamespaceRead(
        ReadKind.SCATTER,
        "the promoter lists the namespaces with due or blocked tasks, then places each one's "
        "due tasks in transactions of its own",
    ),
    "orbit_store.weave.timers:due_instances": CrossNamespaceRead(ReadKind.SCATTER, _FINDER),
    "orbit_store.weave.timers:seconds_to_next_timer": CrossNamespaceRead(
        ReadKind.SCATTER,
        "the timer loop's wait: the earliest timer of every namespace (each shard's earliest, "
        "then the least of them), read after a pass, never locking",
    ),
    "orbit_store.weave.inbox:due_messages": CrossNamespaceRead(ReadKind.SCATTER, _FINDER),
    "orbit_store.delivery.push:push_secret_refs": CrossNamespaceRead(
        ReadKind.SCATTER,
        "the push subscriptions naming shared webhook secrets, for the sender's log when "
        "secrets must move to their namespaces' folders",
    ),
    "orbit_store.recovery.restore_fence:_namespaces": CrossNamespaceRead(
        ReadKind.SCATTER,
        "the restore fence lists every namespace with live sessions or leases, then fences "
        "each in a transaction of its own",
    ),
    "orbit_store.recovery.restore_fence:_settled": CrossNamespaceRead(
        ReadKind.SCATTER, "the restore fence's report: what became of every attempt it cut"
    ),
    "orbit_store.recovery.verify:verify": CrossNamespaceRead(ReadKind.SCATTER, _ADMIN),
    "orbit_store.pulse.views.backlog:read_backlog": CrossNamespaceRead(ReadKind.SCATTER, _METRICS),
    "orbit_store.pulse.views.routing:unrunnable_counts": CrossNamespaceRead(
        ReadKind.SCATTER, _METRICS
    ),
    "orbit_store.weave.queries:live_counts": CrossNamespaceRead(ReadKind.SCATTER, _METRICS),
    "orbit_store.weave.inbox:backlog": CrossNamespaceRead(ReadKind.SCATTER, _METRICS),
    "orbit_store.delivery.backlog:delivery_backlog": CrossNamespaceRead(ReadKind.SCATTER, _METRICS),
    "orbit_store.access.credentials:live_credentials": CrossNamespaceRead(
        ReadKind.LOOKUP,
        "a bearer token names no namespace: its hash finds the credentials that hold it "
        "(a lookup vindex on token_hash; the same token may belong to several namespaces)",
    ),
}


#: Unique keys of namespaced tables that hold no namespace and no UUIDv7 id, yet are unique
#: beyond one database by construction: a shard enforces them alone.
UNIQUE_BY_CONSTRUCTION: dict[tuple[str, str], str] = {
    ("worker_pods", "uid"): "a Kubernetes pod UID (a UUID the API server assigns)",
    ("workflow_inbox", "source_event_id"): "names a UUIDv7: 'task:<task id>:v<version>', "
    "'signal:<signal row id>' or 'resume:<instance id>:c<control version>'",
}


def namespace_column(table: str) -> str | None:
    """The column that routes ``table``'s rows, or None for a global table."""
    if table in GLOBAL_TABLES:
        return None
    if table == "namespaces":
        return "name"
    return "namespace"


def routed_tables() -> list[str]:
    """Every table of the schema that is sharded by namespace."""
    return sorted(name for name in metadata.tables if name not in GLOBAL_TABLES)
