"""Restore fencing (seed §7): the dispatch fence of this database and its history.

A restore from backup rolls the records back while workers may still hold grants the restored
rows know nothing about (or consider current). The fence belongs to the database, not to a
namespace: a restore restores a database, so every database has its own fence.
"""

from __future__ import annotations

import sqlalchemy as sa

from .base import metadata
from .types import KEY_LENGTH, UtcDateTime, id_column

# One row (id = 1): the current restore epoch and whether dispatch is open. Every attempt records
# the epoch it was granted under (task_attempts.epoch); start, renewal and completion refuse an
# older one. The epoch is the database clock in microseconds at the fence (or the old epoch + 1,
# whichever is larger), so a database restored from a backup and then fenced gets a larger epoch
# than any issued before — even by fences that happened after the backup and were lost with it.
dispatch_fence = sa.Table(
    "dispatch_fence",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
    sa.Column("epoch", sa.BigInteger(), nullable=False),
    sa.Column("dispatch_open", sa.Boolean(), nullable=False),
    # The restore_fences row that set the epoch (NULL before the first fence).
    sa.Column("fence_id", sa.String(36), nullable=True),
    sa.Column("changed_at", UtcDateTime, nullable=False),
    sa.CheckConstraint("id = 1", name="single_row"),
)

# Every fence, newest epoch last: who fenced, why, and who reopened dispatch after reconciling.
restore_fences = sa.Table(
    "restore_fences",
    metadata,
    id_column(),
    sa.Column("epoch", sa.BigInteger(), nullable=False),
    sa.Column("previous_epoch", sa.BigInteger(), nullable=False),
    sa.Column("reason", sa.String(1024), nullable=False),
    sa.Column("fenced_by", sa.String(KEY_LENGTH), nullable=False),
    sa.Column("fenced_at", UtcDateTime, nullable=False),
    sa.Column("reopened_at", UtcDateTime, nullable=True),
    sa.Column("reopened_by", sa.String(KEY_LENGTH), nullable=True),
    sa.Column("reopen_reason", sa.String(1024), nullable=True),
    sa.UniqueConstraint("epoch"),
    sa.CheckConstraint("epoch > previous_epoch", name="epoch_increases"),
    sa.CheckConstraint(
        "(reopened_at IS NULL) = (reopened_by IS NULL)", name="reopened_iff_reopened_by"
    ),
)
