"""Watches every statement the store sends to MariaDB and judges each transaction: it must touch
one namespace (ORBIT.md §3; seed §4, the routing unit of future shards).

SQLAlchemy's public connection events (``begin``, ``before_cursor_execute``, ``commit``,
``rollback``) on every engine of the process. A statement counts as the store's when the
nearest project frame that sent it is in ``orbit_store``, ``orbit`` or ``orbit_operator``;
what a test or a migration sends itself is not judged. For each statement's tables
(``shapes``): a namespace value is taken as it is; a unique key is resolved to its row's
namespace (rows written earlier in this process are known from their INSERT, others are read
on a connection of the checker's own); a table reached without either is a violation unless
the sending function is one of ``orbit_store.routing.CROSS_NAMESPACE_READS`` and the read is
non-locking in a transaction that writes nothing. Global tables (``routing.GLOBAL_TABLES``)
are free. At COMMIT or ROLLBACK, more than one namespace is a violation.
"""

from __future__ import annotations

import inspect
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.pool import NullPool

from orbit_store import routing
from orbit_store.schema import metadata

from .shapes import KeyUse, Shape, TableUse, shape_of

_HERE = str(Path(__file__).resolve().parent) + "/"
_TESTS = str(Path(__file__).resolve().parents[1]) + "/"
_MIGRATIONS = str(Path(__file__).resolve().parents[2] / "migrations") + "/"
_STORE_MODULES = ("orbit_store", "orbit.", "orbit_operator")
_INFO = "orbit_locality"


@dataclass
class _Transaction:
    url: str
    namespaces: dict[str, str] = field(default_factory=dict)  # namespace -> first statement
    pending: list[tuple[str, tuple[str, ...], tuple[Any, ...], str]] = field(default_factory=list)
    writes: bool = False
    scatter: str | None = None  # the listed cross-namespace read it ran, if any


@dataclass(frozen=True)
class Violation:
    test: str
    what: str

    def __str__(self) -> str:
        return f"{self.test}: {self.what}"


class LocalityWatch:
    """Installs the listeners; collects violations and how each table use was bounded."""

    def __init__(self, *, also: tuple[str, ...] = ()) -> None:
        """``also``: more modules whose SQL counts as the store's (the checker's own tests)."""
        self.violations: list[Violation] = []
        self._modules = (*_STORE_MODULES, *also)
        self._key = f"{_INFO}_{id(self)}"  # each watch keeps its own transaction record
        self.counts: Counter[str] = Counter()  # "routed", "by_key", "joined", "scatter", ...
        self.test = "(outside a test)"
        self._known: dict[tuple[str, tuple[str, ...], tuple[Any, ...]], str] = {}
        self._readers: dict[str, sa.Engine] = {}
        self._lock = threading.Lock()
        self._listeners = [
            ("begin", self._begin),
            ("before_cursor_execute", self._statement),
            ("commit", self._end),
            ("rollback", self._end),
        ]

    def install(self) -> None:
        for name, listener in self._listeners:
            event.listen(sa.Engine, name, listener)

    def uninstall(self) -> None:
        for name, listener in self._listeners:
            event.remove(sa.Engine, name, listener)
        for reader in self._readers.values():
            reader.dispose()

    # -- events -----------------------------------------------------------------------------

    def _watched(self, conn: sa.Connection) -> bool:
        return conn.dialect.name in ("mysql", "mariadb") and not any(
            conn.engine.pool is r.pool for r in self._readers.values()
        )

    def _begin(self, conn: sa.Connection) -> None:
        if self._watched(conn):
            url = conn.engine.url.render_as_string(hide_password=False)
            conn.info[self._key] = _Transaction(url)

    def _statement(
        self,
        conn: sa.Connection,
        cursor: Any,
        statement: str,
        parameters: Any,
        context: Any,
        executemany: bool,
    ) -> None:
        if not self._watched(conn):
            return
        sender = _store_sender(self._modules)
        if sender is None:
            return
        shape = shape_of(statement)
        if shape.kind == "none":
            return
        tx = conn.info.get(self._key)
        alone = tx is None
        if tx is None:  # autocommit: the statement is its own transaction
            tx = _Transaction(conn.engine.url.render_as_string(hide_password=False))
        if shape.error is not None:
            self._violate(f"{sender[0]} sent SQL the checker cannot read ({shape.error})")
            return
        tx.writes = tx.writes or shape.writes or shape.locking
        rows = parameters if executemany else [parameters]
        for use in shape.uses:
            self._judge(tx, shape, use, rows, sender)
        if alone:
            self._close(tx)

    def _end(self, conn: sa.Connection) -> None:
        tx = conn.info.pop(self._key, None)
        if tx is not None and self._watched(conn):
            self._close(tx)

    # -- judging ----------------------------------------------------------------------------

    def _judge(
        self,
        tx: _Transaction,
        shape: Shape,
        use: TableUse,
        rows: Iterable[Any],
        sender: list[str],
    ) -> None:
        if routing.namespace_column(use.table) is None:
            self.counts["global"] += 1
            return
        where = f"{sender[0]} ({shape.kind} {use.table})"
        for params in rows:
            self._learn(use, params)
            if use.namespaces:
                self.counts["routed"] += 1
                for ref in use.namespaces:
                    value = ref.value(params)
                    if value is not None:
                        tx.namespaces.setdefault(str(value), where)
            elif use.key is not None:
                self.counts["by_key"] += 1
                self._pend(tx, use.table, use.key, params, where)
            elif use.joined:
                self.counts["routed" if use.same_namespace_join else "joined"] += 1
            else:
                self._unbounded(tx, shape, sender, where)

    def _unbounded(self, tx: _Transaction, shape: Shape, sender: list[str], where: str) -> None:
        """A table reached without a namespace value or key: allowed only as a listed
        cross-namespace read that reads every namespace alike (no other table of the
        statement bound to one), locks nothing, and shares no writing transaction."""
        listed = next((s for s in sender if s in routing.CROSS_NAMESPACE_READS), None)
        partly = any(u.namespaces for u in shape.uses if routing.namespace_column(u.table))
        if listed is None:
            self._violate(f"{where} is bounded by no namespace value and no unique key")
        elif partly:
            self._violate(f"{where} reads every namespace inside a one-namespace statement")
        elif shape.writes or shape.locking:
            self._violate(f"{where}: the cross-namespace read {listed} writes or locks")
        else:
            self.counts["scatter"] += 1
            tx.scatter = listed

    def _learn(self, use: TableUse, params: Any) -> None:
        """Remember the namespace of each row an INSERT writes, by each of its unique keys."""
        for key, namespaces in use.inserted:
            for row, ns in zip(key.values, namespaces, strict=False):
                value = ns.value(params)
                if value is not None:
                    values = tuple(r.value(params) for r in row)
                    self._known[(use.table, key.columns, values)] = str(value)

    def _pend(self, tx: _Transaction, table: str, key: KeyUse, params: Any, where: str) -> None:
        for row in key.values:
            values = tuple(r.value(params) for r in row)
            if any(v is None for v in values):
                continue  # NULL names no row
            known = self._known.get((table, key.columns, values))
            if known is not None:
                tx.namespaces.setdefault(known, where)
            else:
                tx.pending.append((table, key.columns, values, where))

    def _close(self, tx: _Transaction) -> None:
        for (table, columns, values), namespace, where in self._resolve(tx):
            self._known[(table, columns, values)] = namespace
            tx.namespaces.setdefault(namespace, where)
        if len(tx.namespaces) > 1:
            touched = "; ".join(f"{ns!r} by {where}" for ns, where in tx.namespaces.items())
            self._violate(f"one transaction touched {len(tx.namespaces)} namespaces: {touched}")
        if tx.scatter is not None and tx.writes:
            self._violate(f"the cross-namespace read {tx.scatter} ran in a writing transaction")

    def _resolve(
        self, tx: _Transaction
    ) -> Iterable[tuple[tuple[str, tuple[str, ...], tuple[Any, ...]], str, str]]:
        """The namespaces of rows named by a unique key and not written in this process, read
        on the checker's own connection (committed rows; a row this transaction deleted is
        still there until it commits)."""
        if not tx.pending:
            return
        reader = self._reader(tx.url)
        with reader.connect() as conn:
            for table, columns, values, where in tx.pending:
                meta = metadata.tables[table]
                ns_column = meta.c[routing.namespace_column(table) or ""]
                query = sa.select(ns_column).where(
                    *(meta.c[c] == v for c, v in zip(columns, values, strict=True))
                )
                namespace = conn.execute(query).scalar()
                if namespace is not None:
                    yield (table, columns, values), namespace, where

    def _reader(self, url: str) -> sa.Engine:
        with self._lock:
            if url not in self._readers:
                self._readers[url] = sa.create_engine(
                    url, poolclass=NullPool, isolation_level="AUTOCOMMIT"
                )
            return self._readers[url]

    def _violate(self, what: str) -> None:
        with self._lock:
            self.violations.append(Violation(self.test, what))


def _store_sender(modules: tuple[str, ...]) -> list[str] | None:
    """The store functions (``module:qualname``, innermost first) that sent the statement
    being executed, or None when a test or a migration sent it itself."""
    frame = inspect.currentframe()
    chain: list[str] = []
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        filename = frame.f_code.co_filename
        if module.startswith(modules) or module == "orbit":
            chain.append(f"{module}:{frame.f_code.co_qualname}")
        elif filename.startswith(_HERE):
            pass  # the checker's own frames
        elif filename.startswith((_TESTS, _MIGRATIONS)) or module.startswith("alembic"):
            return chain or None
        frame = frame.f_back
    return chain or None
