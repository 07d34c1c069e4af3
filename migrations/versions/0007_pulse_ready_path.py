"""Pulse under contention: wait paths, semaphores, quota counters, handler routing.

- tasks.wait_path puts every WAITING task on exactly one path (READY, SCHEDULED, BLOCKED_GATE,
  BLOCKED_KEY) with narrow indexes per path, so claims read only runnable rows;
- concurrency keys become semaphores (limit and held count on the key row) and permits belong
  to tasks (held from READY until the attempt ends);
- quotas keep counters of the tasks they count (tasks.quota_counted), namespaces.has_quotas;
- worker sessions declare handlers; live_worker_name makes two live sessions of one worker
  name impossible;
- credentials.token_hash and execution gates' owners are unique per namespace, not globally.

Existing rows are converted: WAITING tasks are placed on their path, live attempts keep their
permits, free permits go to blocked tasks in priority order, quota counters are counted.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

UTC_DATETIME = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Contracting: tasks gain NOT NULL wait_path/quota_counted columns that older code does not write,
# permits and token uniqueness are rebuilt. Older servers cannot run on this schema: upgrade with
# the old replicas stopped (docs/operations/database.md#the-compatibility-window).
expand_only = False

UNFINISHED = ("WAITING", "LEASED", "RUNNING")

# Frozen, minimal views of the tables the data conversion touches.
tasks = sa.table(
    "tasks",
    sa.column("id", sa.String),
    sa.column("namespace", sa.String),
    sa.column("queue", sa.String),
    sa.column("state", sa.String),
    sa.column("priority", sa.Integer),
    sa.column("available_at", UTC_DATETIME),
    sa.column("gate_id", sa.String),
    sa.column("concurrency_key", sa.String),
    sa.column("concurrency_limit", sa.Integer),
    sa.column("current_attempt_id", sa.String),
    sa.column("wait_path", sa.String),
    sa.column("quota_counted", sa.Boolean),
)
gates = sa.table("execution_gates", sa.column("id", sa.String), sa.column("allowed", sa.Boolean))
keys = sa.table(
    "concurrency_keys",
    sa.column("namespace", sa.String),
    sa.column("concurrency_key", sa.String),
    sa.column("permit_limit", sa.Integer),
    sa.column("held", sa.Integer),
)
quotas = sa.table(
    "quotas",
    sa.column("id", sa.String),
    sa.column("namespace", sa.String),
    sa.column("queue", sa.String),
    sa.column("waiting", sa.Integer),
    sa.column("running", sa.Integer),
)
namespaces = sa.table(
    "namespaces", sa.column("name", sa.String), sa.column("has_quotas", sa.Boolean)
)
sessions = sa.table(
    "worker_sessions",
    sa.column("id", sa.String),
    sa.column("namespace", sa.String),
    sa.column("worker_name", sa.String),
    sa.column("generation", sa.Integer),
    sa.column("state", sa.String),
    sa.column("ended_at", UTC_DATETIME),
    sa.column("end_reason", sa.String),
    sa.column("live_worker_name", sa.String),
)


def _now() -> sa.ColumnElement[object]:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        return sa.text("strftime('%Y-%m-%d %H:%M:%f', 'now')")  # type: ignore[return-value]
    return sa.text("UTC_TIMESTAMP(6)")  # type: ignore[return-value]


def upgrade() -> None:
    with op.batch_alter_table("namespaces") as batch:
        batch.add_column(
            sa.Column("has_quotas", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("credentials") as batch:
        batch.drop_constraint(op.f("uq_credentials_token_hash"), type_="unique")
        batch.create_unique_constraint(
            op.f("uq_credentials_token_hash_namespace"), ["token_hash", "namespace"]
        )
    with op.batch_alter_table("execution_gates") as batch:
        batch.drop_constraint(op.f("uq_execution_gates_owner_kind_owner_id"), type_="unique")
        batch.create_unique_constraint(
            op.f("uq_execution_gates_namespace_owner_kind_owner_id"),
            ["namespace", "owner_kind", "owner_id"],
        )
    with op.batch_alter_table("quotas") as batch:
        batch.add_column(sa.Column("waiting", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("running", sa.Integer(), nullable=False, server_default="0"))
    _upgrade_sessions()
    _upgrade_tasks()
    _upgrade_semaphores()
    _count_quotas()
    # The session foreign key gets an index of its own (no state in it; see the metadata).
    op.create_index("ix_task_attempts_by_session", "task_attempts", ["worker_session_id"])
    op.drop_index("ix_task_attempts_session", "task_attempts")


def _upgrade_sessions() -> None:
    with op.batch_alter_table("worker_sessions") as batch:
        batch.add_column(sa.Column("handlers", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("live_worker_name", sa.String(length=255), nullable=True))
    bind = op.get_bind()
    live = bind.execute(
        sa.select(sessions.c.id, sessions.c.namespace, sessions.c.worker_name)
        .where(sessions.c.state.in_(["ACTIVE", "DRAINING"]))
        .order_by(sessions.c.namespace, sessions.c.worker_name, sessions.c.generation.desc())
    ).all()
    seen: set[tuple[str, str]] = set()
    for row in live:
        name = (row.namespace, row.worker_name)
        if name in seen:  # an older live session of the same worker: close it
            bind.execute(
                sessions.update()
                .where(sessions.c.id == row.id)
                .values(state="CLOSED", ended_at=_now(), end_reason="replaced (migration 0007)")
            )
            continue
        seen.add(name)
        bind.execute(
            sessions.update()
            .where(sessions.c.id == row.id)
            .values(live_worker_name=row.worker_name)
        )
    with op.batch_alter_table("worker_sessions") as batch:
        batch.create_unique_constraint(
            op.f("uq_worker_sessions_namespace_live_worker_name"), ["namespace", "live_worker_name"]
        )
        batch.create_check_constraint(
            op.f("ck_worker_sessions_live_name_iff_live"),
            "(state IN ('ACTIVE', 'DRAINING')) = (live_worker_name IS NOT NULL)",
        )


def _upgrade_tasks() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("wait_path", sa.String(length=16), nullable=True))
        batch.add_column(
            sa.Column("quota_counted", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.drop_index("ix_tasks_claim")
    bind = op.get_bind()
    closed_gate = sa.exists().where(gates.c.id == tasks.c.gate_id, gates.c.allowed.is_(False))
    bind.execute(
        tasks.update()
        .where(tasks.c.state == "WAITING")
        .values(
            wait_path=sa.case(
                (tasks.c.available_at > _now(), "SCHEDULED"),
                (closed_gate, "BLOCKED_GATE"),
                (tasks.c.concurrency_key.is_not(None), "BLOCKED_KEY"),  # permits: see below
                else_="READY",
            )
        )
    )
    with op.batch_alter_table("tasks") as batch:
        batch.create_check_constraint(
            op.f("ck_tasks_wait_path"),
            "wait_path IN ('READY', 'SCHEDULED', 'BLOCKED_GATE', 'BLOCKED_KEY')",
        )
        batch.create_check_constraint(
            op.f("ck_tasks_waiting_iff_on_a_path"), "(state = 'WAITING') = (wait_path IS NOT NULL)"
        )
        batch.create_index(
            "ix_tasks_ready", ["namespace", "queue", "wait_path", "priority", "available_at"]
        )
        batch.create_index(
            "ix_tasks_ready_by_handler",
            ["namespace", "queue", "wait_path", "handler", "priority", "available_at"],
        )
        batch.create_index("ix_tasks_due", ["namespace", "wait_path", "available_at"])
        batch.create_index(
            "ix_tasks_key_waiting",
            ["namespace", "wait_path", "concurrency_key", "priority", "available_at"],
        )
        batch.create_index("ix_tasks_gate", ["wait_path", "gate_id"])
        batch.create_index("ix_tasks_queue_state", ["namespace", "queue", "state"])


def _upgrade_semaphores() -> None:
    with op.batch_alter_table("concurrency_keys") as batch:
        batch.add_column(
            sa.Column("permit_limit", sa.Integer(), nullable=False, server_default="1")
        )
        batch.add_column(sa.Column("held", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("limit_changed_at", UTC_DATETIME, nullable=True))
        batch.create_check_constraint(
            op.f("ck_concurrency_keys_semaphore_in_range"), "permit_limit >= 1 AND held >= 0"
        )
    bind = op.get_bind()
    # Permits move from attempts to tasks: the live attempts' tasks keep theirs.
    old = sa.table(
        "concurrency_permits",
        sa.column("namespace", sa.String),
        sa.column("concurrency_key", sa.String),
        sa.column("task_id", sa.String),
        sa.column("acquired_at", UTC_DATETIME),
    )
    held = bind.execute(sa.select(old)).mappings().all()
    op.drop_table("concurrency_permits")
    permits = op.create_table(
        "concurrency_permits",
        sa.Column("task_id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("concurrency_key", sa.String(length=255), nullable=False),
        sa.Column("acquired_at", UTC_DATETIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["namespace", "concurrency_key"],
            ["concurrency_keys.namespace", "concurrency_keys.concurrency_key"],
            name=op.f("fk_concurrency_permits_namespace"),
        ),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name=op.f("fk_concurrency_permits_task_id")
        ),
        sa.PrimaryKeyConstraint("task_id", name=op.f("pk_concurrency_permits")),
    )
    assert permits is not None
    if held:
        bind.execute(permits.insert(), [dict(row) for row in held])
    # Each key's limit: the largest any unfinished task of it declared.
    declared = bind.execute(
        sa.select(
            tasks.c.namespace, tasks.c.concurrency_key, sa.func.max(tasks.c.concurrency_limit)
        )
        .where(tasks.c.concurrency_key.is_not(None), tasks.c.state.in_(UNFINISHED))
        .group_by(tasks.c.namespace, tasks.c.concurrency_key)
    ).all()
    for namespace, key, limit in declared:
        taken = sum(1 for p in held if (p["namespace"], p["concurrency_key"]) == (namespace, key))
        bind.execute(
            keys.update()
            .where(keys.c.namespace == namespace, keys.c.concurrency_key == key)
            .values(permit_limit=max(int(limit), 1), held=taken)
        )
        _release_blocked(bind, permits, namespace, key, max(int(limit), 1) - taken)


def _release_blocked(
    bind: sa.Connection, permits: sa.Table, namespace: str, key: str, free: int
) -> None:
    if free <= 0:
        return
    blocked = (
        bind.execute(
            sa.select(tasks.c.id)
            .where(
                tasks.c.namespace == namespace,
                tasks.c.concurrency_key == key,
                tasks.c.wait_path == "BLOCKED_KEY",
            )
            .order_by(tasks.c.priority, tasks.c.available_at)
            .limit(free)
        )
        .scalars()
        .all()
    )
    for task_id in blocked:
        bind.execute(tasks.update().where(tasks.c.id == task_id).values(wait_path="READY"))
        bind.execute(
            permits.insert().values(
                task_id=task_id, namespace=namespace, concurrency_key=key, acquired_at=_now()
            )
        )
    if blocked:
        bind.execute(
            keys.update()
            .where(keys.c.namespace == namespace, keys.c.concurrency_key == key)
            .values(held=keys.c.held + len(blocked))
        )


def _count_quotas() -> None:
    bind = op.get_bind()
    for quota in bind.execute(sa.select(quotas)).all():
        scope = [tasks.c.namespace == quota.namespace, tasks.c.state.in_(UNFINISHED)]
        if quota.queue != "*":
            scope.append(tasks.c.queue == quota.queue)
        bind.execute(tasks.update().where(*scope).values(quota_counted=True))
        counts = dict(
            bind.execute(
                sa.select(tasks.c.state, sa.func.count()).where(*scope).group_by(tasks.c.state)
            ).all()
        )
        bind.execute(
            quotas.update()
            .where(quotas.c.id == quota.id)
            .values(
                waiting=counts.get("WAITING", 0),
                running=counts.get("LEASED", 0) + counts.get("RUNNING", 0),
            )
        )
        bind.execute(
            namespaces.update().where(namespaces.c.name == quota.namespace).values(has_quotas=True)
        )


def downgrade() -> None:
    bind = op.get_bind()
    op.create_index("ix_task_attempts_session", "task_attempts", ["worker_session_id", "state"])
    op.drop_index("ix_task_attempts_by_session", "task_attempts")
    live = (
        bind.execute(
            sa.select(
                tasks.c.id, tasks.c.namespace, tasks.c.concurrency_key, tasks.c.current_attempt_id
            )
            .where(tasks.c.state.in_(["LEASED", "RUNNING"]), tasks.c.concurrency_key.is_not(None))
            .order_by(tasks.c.namespace, tasks.c.concurrency_key, tasks.c.id)
        )
        .mappings()
        .all()
    )
    op.drop_table("concurrency_permits")
    permits = op.create_table(
        "concurrency_permits",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("concurrency_key", sa.String(length=255), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.String(length=36), nullable=False),
        sa.Column("attempt_id", sa.String(length=36), nullable=False),
        sa.Column("acquired_at", UTC_DATETIME, nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"], ["task_attempts.id"], name=op.f("fk_concurrency_permits_attempt_id")
        ),
        sa.ForeignKeyConstraint(
            ["namespace", "concurrency_key"],
            ["concurrency_keys.namespace", "concurrency_keys.concurrency_key"],
            name=op.f("fk_concurrency_permits_namespace"),
        ),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name=op.f("fk_concurrency_permits_task_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_concurrency_permits")),
        sa.UniqueConstraint("attempt_id", name=op.f("uq_concurrency_permits_attempt_id")),
        sa.UniqueConstraint(
            "namespace",
            "concurrency_key",
            "slot",
            name=op.f("uq_concurrency_permits_namespace_concurrency_key_slot"),
        ),
    )
    assert permits is not None
    slot: dict[tuple[str, str], int] = {}
    for row in live:
        name = (row["namespace"], row["concurrency_key"])
        slot[name] = slot.get(name, -1) + 1
        bind.execute(
            permits.insert().values(
                id=row["current_attempt_id"],
                namespace=row["namespace"],
                concurrency_key=row["concurrency_key"],
                slot=slot[name],
                task_id=row["id"],
                attempt_id=row["current_attempt_id"],
                acquired_at=_now(),
            )
        )
    with op.batch_alter_table("concurrency_keys") as batch:
        batch.drop_constraint(op.f("ck_concurrency_keys_semaphore_in_range"), type_="check")
        batch.drop_column("limit_changed_at")
        batch.drop_column("held")
        batch.drop_column("permit_limit")
    with op.batch_alter_table("tasks") as batch:
        for index in (
            "ix_tasks_queue_state",
            "ix_tasks_gate",
            "ix_tasks_key_waiting",
            "ix_tasks_due",
            "ix_tasks_ready_by_handler",
            "ix_tasks_ready",
        ):
            batch.drop_index(index)
        batch.drop_constraint(op.f("ck_tasks_waiting_iff_on_a_path"), type_="check")
        batch.drop_constraint(op.f("ck_tasks_wait_path"), type_="check")
        batch.drop_column("quota_counted")
        batch.drop_column("wait_path")
        batch.create_index(
            "ix_tasks_claim", ["namespace", "queue", "state", "priority", "available_at"]
        )
    with op.batch_alter_table("worker_sessions") as batch:
        batch.drop_constraint(op.f("ck_worker_sessions_live_name_iff_live"), type_="check")
        batch.drop_constraint(op.f("uq_worker_sessions_namespace_live_worker_name"), type_="unique")
        batch.drop_column("live_worker_name")
        batch.drop_column("handlers")
    with op.batch_alter_table("quotas") as batch:
        batch.drop_column("running")
        batch.drop_column("waiting")
    with op.batch_alter_table("execution_gates") as batch:
        batch.drop_constraint(
            op.f("uq_execution_gates_namespace_owner_kind_owner_id"), type_="unique"
        )
        batch.create_unique_constraint(
            op.f("uq_execution_gates_owner_kind_owner_id"), ["owner_kind", "owner_id"]
        )
    with op.batch_alter_table("credentials") as batch:
        batch.drop_constraint(op.f("uq_credentials_token_hash_namespace"), type_="unique")
        batch.create_unique_constraint(op.f("uq_credentials_token_hash"), ["token_hash"])
    with op.batch_alter_table("namespaces") as batch:
        batch.drop_column("has_quotas")
