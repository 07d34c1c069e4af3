"""What one SQL statement reaches, read from its text with sqlglot: for each table it names,
whether the rows are bounded by a namespace value, by a unique key, or only through a join to
a bounded table. Parsed once per statement text (bind parameters stay names), applied to each
execution's parameters by ``watch``."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
import sqlglot
from sqlglot import exp

from orbit_store import sharding
from orbit_store.schema import metadata

logging.getLogger("sqlglot").setLevel(logging.ERROR)

#: Statements that name no rows: transaction control, session settings, metadata, DDL.
_NO_ROWS = re.compile(
    r"^\s*(SAVEPOINT|RELEASE|ROLLBACK|COMMIT|BEGIN|START|SET|SHOW|DESCRIBE|EXPLAIN|CREATE|ALTER"
    r"|DROP|GRANT|REVOKE|FLUSH|ANALYZE|OPTIMIZE|TRUNCATE|RENAME|LOCK|UNLOCK|KILL|USE|XA)\b",
    re.IGNORECASE,
)
_PYFORMAT = re.compile(r"%\((\w+)\)s")
_FORMAT = re.compile(r"%s")


@dataclass(frozen=True)
class Ref:
    """A value in a statement: a bind parameter (by name) or a literal."""

    param: str | None = None
    literal: str | None = None  # neither: SQL NULL, which names no row

    def value(self, params: Any) -> Any:
        if self.param is None:
            return self.literal
        if self.param.startswith("p_"):
            return params[int(self.param[2:])]
        return params[self.param[2:]]


@dataclass(frozen=True)
class KeyUse:
    """A unique key of the table fully bound by values: each row of ``values`` names one row."""

    columns: tuple[str, ...]
    values: tuple[tuple[Ref, ...], ...]


@dataclass(frozen=True)
class TableUse:
    """One table as a statement reaches it."""

    table: str
    namespaces: tuple[Ref, ...] = ()  # values the routing column is bound to
    key: KeyUse | None = None  # a unique key bound to values
    joined: bool = False  # bound only through a join to a bounded table
    same_namespace_join: bool = False  # ... and that join equates the namespaces
    #: Bound by a reference to other rows' ids (``instance_id = ?``): (their table, the ids).
    parent: tuple[str, tuple[Ref, ...]] | None = None
    #: Unique keys of the rows an INSERT writes, with each row's namespace (to learn keys).
    inserted: tuple[tuple[KeyUse, tuple[Ref, ...]], ...] = ()
    #: References an INSERT writes: (column's target table, one ref per row), to check that a
    #: row never refers to a row of another namespace.
    references: tuple[tuple[str, tuple[Ref | None, ...]], ...] = ()

    @property
    def bounded(self) -> bool:
        return (
            bool(self.namespaces) or self.key is not None or self.joined or self.parent is not None
        )


@dataclass(frozen=True)
class Shape:
    """A statement's text, understood."""

    kind: str  # "select", "insert", "update", "delete", "none" (names no rows)
    locking: bool = False
    uses: tuple[TableUse, ...] = ()
    error: str | None = None  # text sqlglot could not read

    @property
    def writes(self) -> bool:
        return self.kind in ("insert", "update", "delete")


@functools.lru_cache(maxsize=8192)
def shape_of(statement: str) -> Shape:
    """The :class:`Shape` of a statement as the driver receives it (``%(name)s`` or ``%s``)."""
    if _NO_ROWS.match(statement):
        return Shape("none")
    counter = iter(range(1_000_000))
    # Bind parameters become sqlglot placeholders; the prefix keeps names such as ``key``
    # from reading as keywords.
    text = _PYFORMAT.sub(lambda m: f":n_{m.group(1)}", statement)
    text = _FORMAT.sub(lambda m: f":p_{next(counter)}", text).replace("%%", "%")
    try:
        tree = sqlglot.parse_one(text, read="mysql")
    except sqlglot.errors.SqlglotError as exc:
        return Shape("select", error=str(exc).splitlines()[0])
    kind = {exp.Insert: "insert", exp.Update: "update", exp.Delete: "delete"}.get(
        type(tree), "select"
    )
    if not isinstance(tree, exp.Insert | exp.Update | exp.Delete | exp.Select | exp.Union):
        return Shape("none") if not list(tree.find_all(exp.Table)) else Shape(kind, error="?")
    locking = any(bool(s.args.get("locks")) for s in tree.find_all(exp.Select))
    return Shape(kind, locking, tuple(_Reader(tree).uses()))


@dataclass
class _Use:
    node: exp.Table
    table: str
    alias: str
    block: exp.Expression
    values: dict[str, list[tuple[Ref, ...]]] = field(default_factory=dict)
    namespaces: tuple[Ref, ...] = ()
    key: KeyUse | None = None
    joined: bool = False
    same_namespace_join: bool = False
    parent: tuple[str, tuple[Ref, ...]] | None = None
    inserted: tuple[tuple[KeyUse, tuple[Ref, ...]], ...] = ()
    references: tuple[tuple[str, tuple[Ref | None, ...]], ...] = ()


class _Reader:
    """Walks one parsed statement: its table uses, the conjuncts bounding each, the joins."""

    def __init__(self, tree: exp.Expression) -> None:
        self.tree = tree
        self.uses = self._collect
        self._all: list[_Use] = []

    def _collect(self) -> Iterator[TableUse]:
        for node in self.tree.find_all(exp.Table):
            if not node.name or node.name.lower() == "dual":
                continue
            block = _block_of(node)
            self._all.append(_Use(node, node.name, node.alias_or_name, block))
        edges: list[tuple[_Use, str, _Use, str]] = []
        for use in self._all:
            for conjunct in _conjuncts(use.block):
                edges.extend(self._bind(use, conjunct))
        for use in self._all:
            self._settle(use)
        self._join(edges)
        for use in self._all:
            yield TableUse(
                use.table,
                use.namespaces,
                use.key,
                use.joined,
                use.same_namespace_join,
                use.parent,
                use.inserted,
                use.references,
            )

    def _resolve(self, column: exp.Column, block: exp.Expression) -> _Use | None:
        """The table use a column belongs to: by qualifier in its block or an enclosing one."""
        scope: exp.Expression | None = block
        while scope is not None:
            in_scope = [u for u in self._all if u.block is scope]
            if column.table:
                for use in in_scope:
                    if use.alias == column.table:
                        return use
            elif len(in_scope) == 1:
                return in_scope[0]
            scope = _block_of(scope) if scope.parent is not None else None
        return None

    def _bind(self, use: _Use, conjunct: exp.Expression) -> list[tuple[_Use, str, _Use, str]]:
        """Record values a column of ``use`` is bound to; return column-to-column equalities."""
        edges: list[tuple[_Use, str, _Use, str]] = []
        if isinstance(conjunct, exp.EQ | exp.NullSafeEQ):
            left, right = conjunct.this, conjunct.expression
            for a, b in ((left, right), (right, left)):
                if isinstance(a, exp.Column) and self._resolve(a, use.block) is use:
                    ref = _ref(b)
                    if ref is not None:
                        use.values.setdefault(a.name, []).append((ref,))
                    elif isinstance(b, exp.Column):
                        other = self._resolve(b, use.block)
                        if other is not None and other is not use:
                            edges.append((use, a.name, other, b.name))
        elif isinstance(conjunct, exp.In) and not conjunct.args.get("query"):
            target, items = conjunct.this, conjunct.expressions
            if isinstance(target, exp.Column) and self._resolve(target, use.block) is use:
                refs = [_ref(i) for i in items]
                if refs and all(r is not None for r in refs):
                    use.values.setdefault(target.name, []).append(tuple(refs))  # type: ignore[arg-type]
            elif isinstance(target, exp.Tuple):
                self._bind_tuples(use, target, items)
        return edges

    def _bind_tuples(self, use: _Use, target: exp.Tuple, items: list[exp.Expression]) -> None:
        columns = target.expressions
        for index, column in enumerate(columns):
            if not isinstance(column, exp.Column) or self._resolve(column, use.block) is not use:
                continue
            refs = [_ref(i.expressions[index]) if isinstance(i, exp.Tuple) else None for i in items]
            if refs and all(r is not None for r in refs):
                use.values.setdefault(column.name, []).append(tuple(refs))  # type: ignore[arg-type]

    def _settle(self, use: _Use) -> None:
        """From the bound values: the namespace, a unique key, or the rows an INSERT writes."""
        ns_column = sharding.namespace_column(use.table)
        if isinstance(use.block, exp.Insert) and use.node is _insert_target(use.block):
            self._settle_insert(use, ns_column)
            return
        if ns_column and ns_column in use.values:
            use.namespaces = min(use.values[ns_column], key=len)
        for columns in _unique_keys(use.table):
            if all(c in use.values for c in columns):
                sets = [min(use.values[c], key=len) for c in columns]
                rows: list[tuple[Ref, ...]] = [()]
                for refs in sets:
                    rows = [(*row, ref) for row in rows for ref in refs]
                use.key = KeyUse(columns, tuple(rows))
                break
        if not use.namespaces and use.key is None:
            for column, bound in sorted(use.values.items()):
                target = reference_target(use.table, column)
                if target is not None:
                    use.parent = (target, min(bound, key=len))
                    break

    def _settle_insert(self, use: _Use, ns_column: str | None) -> None:
        insert = use.block
        schema = insert.this
        columns = [c.name for c in schema.expressions] if isinstance(schema, exp.Schema) else []
        values = insert.expression
        if not isinstance(values, exp.Values):
            use.joined = True  # INSERT … SELECT: bounded by its SELECT, read as its own block
            return
        rows = [[_ref(v) for v in row.expressions] for row in values.expressions]
        if ns_column and ns_column in columns:
            index = columns.index(ns_column)
            namespaces = [row[index] for row in rows]
            # A namespace that is not a plain value leaves the rows unbounded (reported).
            use.namespaces = tuple(n for n in namespaces if n is not None)
            if len(use.namespaces) < len(rows):
                use.namespaces = ()
        learned: list[tuple[KeyUse, tuple[Ref, ...]]] = []
        for key in _unique_keys(use.table):
            if all(c in columns for c in key):
                picks = [columns.index(c) for c in key]
                key_rows = tuple(tuple(row[i] for i in picks) for row in rows)
                if all(r is not None for row in key_rows for r in row):
                    learned.append((KeyUse(key, key_rows), use.namespaces))  # type: ignore[arg-type]
        use.inserted = tuple(learned)
        if learned:
            use.key = learned[0][0]
        use.references = tuple(
            (target, tuple(row[columns.index(column)] for row in rows))
            for column in columns
            if (target := reference_target(use.table, column)) is not None
        )

    def _join(self, edges: list[tuple[_Use, str, _Use, str]]) -> None:
        """A table joined to a bounded table is bounded through it when the join equates
        their namespaces, names one row of it by a unique column, or follows a reference to a
        row's id (a child carries its parent's namespace). Any other join (two queues of the
        same name, say) reaches rows of every namespace."""
        changed = True
        while changed:
            changed = False
            for use, column, other, other_column in edges:
                if _bounded(use) or not _bounded(other):
                    continue
                ns = sharding.namespace_column(use.table)
                same = column == ns and other_column == sharding.namespace_column(other.table)
                if same or _follows(use.table, column, other.table, other_column):
                    use.joined, use.same_namespace_join, changed = True, same, True


#: Reference columns declared without a foreign key (by design: a foreign key check would take
#: a lock out of the lock order), by name: the table whose id they hold.
_REFERENCED_BY_NAME = {
    "instance_id": "workflow_instances",
    "workflow_instance_id": "workflow_instances",
    "activation_id": "workflow_activations",
    "workflow_activation_id": "workflow_activations",
    "current_activation_id": "workflow_activations",
    "consumed_by_activation_id": "workflow_activations",
    "task_id": "tasks",
    "retry_of": "tasks",
    "schedule_id": "schedules",
    "current_attempt_id": "task_attempts",
    "attempt_id": "task_attempts",
    "satisfied_by_signal_id": "workflow_signals",
    "inbox_id": "workflow_inbox",
    "subscription_id": "subscriptions",
    "event_id": "result_events",
    "gate_id": "execution_gates",
    "worker_session_id": "worker_sessions",
    "definition_id": "workflow_definitions",
    "definition_version_id": "workflow_definition_versions",
}


@functools.cache
def reference_target(table: str, column: str) -> str | None:
    """The namespaced table whose row ids ``table.column`` holds, if it is a reference."""
    if table not in metadata.tables or column not in metadata.tables[table].c:
        return None
    for fk in metadata.tables[table].c[column].foreign_keys:
        target = fk.column.table
        if sharding.namespace_column(target.name) and list(target.primary_key) == [fk.column]:
            return target.name
    return _REFERENCED_BY_NAME.get(column)


def _bounded(use: _Use) -> bool:
    return bool(use.namespaces) or use.key is not None or use.joined or use.parent is not None


def _follows(table: str, column: str, other: str, other_column: str) -> bool:
    """``table.column = other.other_column`` names rows tied to one row of ``other``: the
    column is unique in ``table``, or one side is a reference to the other side's id."""
    if (column,) in _unique_keys(table):
        return True
    return _references(table, column, other, other_column) or _references(
        other, other_column, table, column
    )


def _references(table: str, column: str, other: str, other_column: str) -> bool:
    """``table.column`` holds ids of ``other`` rows: a foreign key, or a UUIDv7 reference
    column (``*_id``, String(36)) equated to ``other``'s primary key."""
    return reference_target(table, column) == other and (other_column,) == _unique_keys(other)[0]


def _block_of(node: exp.Expression) -> exp.Expression:
    """The query block (SELECT, UPDATE, DELETE, INSERT) a node belongs to."""
    parent = node.parent
    while parent is not None and not isinstance(
        parent, exp.Select | exp.Update | exp.Delete | exp.Insert
    ):
        parent = parent.parent
    return parent if parent is not None else node


def _insert_target(insert: exp.Expression) -> exp.Table | None:
    target = insert.this
    if isinstance(target, exp.Schema):
        target = target.this
    return target if isinstance(target, exp.Table) else None


def _conjuncts(block: exp.Expression) -> list[exp.Expression]:
    """The AND-ed conditions of a block's WHERE and of its joins' ON clauses."""
    found: list[exp.Expression] = []
    where = block.args.get("where")
    if where is not None:
        found.extend(_flatten(where.this))
    for join in block.args.get("joins") or []:
        on = join.args.get("on")
        if on is not None:
            found.extend(_flatten(on))
    return found


def _flatten(condition: exp.Expression) -> list[exp.Expression]:
    if isinstance(condition, exp.Paren):
        return _flatten(condition.this)
    if isinstance(condition, exp.And):
        return _flatten(condition.this) + _flatten(condition.expression)
    return [condition]


def _ref(node: exp.Expression) -> Ref | None:
    if isinstance(node, exp.Placeholder):
        return Ref(param=node.name)
    if isinstance(node, exp.Literal):
        return Ref(literal=node.this)
    if isinstance(node, exp.Null):
        return Ref()
    return None


@functools.cache
def _unique_keys(table: str) -> tuple[tuple[str, ...], ...]:
    """The table's primary key and unique keys (column names), primary key first."""
    if table not in metadata.tables:
        return ()
    meta = metadata.tables[table]
    keys = [tuple(c.name for c in meta.primary_key.columns)]
    for constraint in meta.constraints:
        if isinstance(constraint, sa.UniqueConstraint):
            keys.append(tuple(c.name for c in constraint.columns))
    for index in meta.indexes:
        if index.unique:
            keys.append(tuple(c.name for c in index.columns))
    for column in meta.columns:
        if column.unique:
            keys.append((column.name,))
    return tuple(k for k in keys if k)
