"""Watches every statement the store sends to MariaDB and judges each transaction: it must touch
one namespace (ORBIT.md §3; seed §4, the routing unit of future shards).

SQLAlchemy's public connection events (``begin``, ``before_cursor_execute``, ``commit``,
``rollback``) on every engine of the process. A statement counts as the store's when the
nearest project frame that sent it is in ``orbit_store``, ``orbit`` or ``orbit_operator``;
what a test or a migration sends itself is not judged. For each statement's tables
(``shapes``): a namespace value is taken as it is; a unique key is resolved to its row's
namespace (rows written earlier in this process are known from their INSERT, others are read
on a connection of the checker's own); a table reached without either is a violation unless
the sending function is one of ``orbit_store.sharding.CROSS_NAMESPACE_READS`` and the read is
non-locking in a transaction that writes nothing. Global tables (``sharding.GLOBAL_TABLES``)
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

from orbit_store import sharding
from orbit_store.schema import metadata

from .shapes import KeyUse, Shape, TableUse, shape_of

_HERE = str(Path(__file__).resolve().parent) + "/"
_TESTS = str(Path(__file__).resolve().parents[1]) + "/"
_MIGRATIONS = str(Path(__file__).resolve().parents[2] / "migrations") + "/"
_STORE_MODULES = ("orbit_store", "orbit.", "orbit_operator")
_INFO = "orbit_locality"
#: Set while a checker (of any LocalityWatch) runs on this thread: the statements it sends to
#: learn rows' namespaces are its own, never judged — by it or by another watch installed beside
#: it (tests/store/sharding/test_locality_check.py installs a second one), which would otherwise
#: judge each other's lookups without end.
_CHECKING = threading.local()


_Key = tuple[str, tuple[str, ...], tuple[Any, ...]]  # table, unique key's columns, values


@dataclass
class _Transaction:
    url: str
    namespaces: dict[str, str] = field(default_factory=dict)  # namespace -> first statement
    #: Namespaces only listed cross-namespace reads reached (a read-only transaction may).
    read_namespaces: dict[str, str] = field(default_factory=dict)
    #: Rows named by a key whose namespace is looked up at the end: (key, where, by a listed read)
    pending: list[tuple[_Key, str, bool]] = field(default_factory=list)
    #: Rows written with a reference: (the referenced row, the row's namespace, where).
    children: list[tuple[_Key, str, str]] = field(default_factory=list)
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
        #: The same by statement site: "class sender table" -> executions.
        self.sites: Counter[str] = Counter()
        self.test = "(outside a test)"
        self._known: dict[_Key, str] = {}
        self._readers: dict[str, sa.Engine] = {}
        self._lock = threading.Lock()
        self._listeners = [
            ("begin", self._guarded(self._begin)),
            ("before_cursor_execute", self._guarded(self._statement)),
            ("commit", self._guarded(self._end)),
            ("rollback", self._guarded(self._end)),
        ]

    def install(self) -> None:
        for name, listener in self._listeners:
            event.listen(sa.Engine, name, listener)

    def _guarded(self, listener: Any) -> Any:
        """A fault of the checker is reported as a violation, never raised into the store's
        statement (which would fail the test for the wrong reason)."""

        def guarded(*args: Any) -> None:
            if getattr(_CHECKING, "active", False):
                return
            _CHECKING.active = True
            try:
                listener(*args)
            except Exception as exc:
                self._violate(f"the locality check itself failed: {exc!r}")
            finally:
                _CHECKING.active = False

        return guarded

    def uninstall(self) -> None:
        for name, listener in self._listeners:
            event.remove(sa.Engine, name, listener)
        for reader in self._readers.values():
            reader.dispose()

    # -- events -----------------------------------------------------------------------------

    def _watched(self, conn: sa.Connection) -> bool:
        """MariaDB connections of the code under test (not the checker's own); a connection
        that was lost has no transaction left to judge."""
        if conn.invalidated:
            return False
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
        if self._watched(conn):
            tx = conn.info.pop(self._key, None)
            if tx is not None:
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
        if sharding.namespace_column(use.table) is None:
            self.counts["global"] += 1
            return
        where = f"{sender[0]} ({shape.kind} {use.table})"
        listed = any(s in sharding.CROSS_NAMESPACE_READS for s in sender)
        quiet = listed and not (shape.writes or shape.locking)
        touched = tx.read_namespaces if quiet else tx.namespaces
        if quiet:
            tx.scatter = next(s for s in sender if s in sharding.CROSS_NAMESPACE_READS)
        self.sites[f"{_kind_of(use, quiet)} {where}"] += 1
        for params in rows:
            self._learn(tx, use, params, where)
            if use.namespaces:
                self.counts["routed"] += 1
                for ref in use.namespaces:
                    value = ref.value(params)
                    if value is not None:
                        touched.setdefault(str(value), where)
            elif use.key is not None:
                self.counts["by_key"] += 1
                self._pend(tx, use.table, use.key, params, where, quiet)
            elif use.parent is not None:
                self.counts["by_parent"] += 1
                table, refs = use.parent
                pk = _primary_key(table)
                self._pend(tx, table, KeyUse(pk, tuple((r,) for r in refs)), params, where, quiet)
            elif use.joined:
                self.counts["routed" if use.same_namespace_join else "joined"] += 1
            else:
                self._unbounded(tx, shape, sender, where)

    def _unbounded(self, tx: _Transaction, shape: Shape, sender: list[str], where: str) -> None:
        """A table reached without a namespace value or key: allowed only as a listed
        cross-namespace read that reads every namespace alike (no other table of the
        statement bound to one), locks nothing, and shares no writing transaction."""
        listed = next((s for s in sender if s in sharding.CROSS_NAMESPACE_READS), None)
        partly = any(u.namespaces for u in shape.uses if sharding.namespace_column(u.table))
        if listed is None:
            self._violate(f"{where} is bounded by no namespace value and no unique key")
        elif partly:
            self._violate(f"{where} reads every namespace inside a one-namespace statement")
        elif shape.writes or shape.locking:
            self._violate(f"{where}: the cross-namespace read {listed} writes or locks")
        else:
            self.counts["scatter"] += 1
            tx.scatter = listed

    def _learn(self, tx: _Transaction, use: TableUse, params: Any, where: str) -> None:
        """Remember the namespace of each row an INSERT writes, by each of its unique keys,
        and note the rows it refers to: a reference never leaves the row's namespace."""
        namespaces = [ns.value(params) for ns in use.namespaces]
        for unique, row_namespaces in use.inserted:
            for row, ns in zip(unique.values, row_namespaces, strict=False):
                value = ns.value(params)
                if value is not None:
                    values = tuple(r.value(params) for r in row)
                    self._known[(use.table, unique.columns, values)] = str(value)
        for target, references in use.references:
            for ref, namespace in zip(references, namespaces, strict=False):
                parent = ref.value(params) if ref is not None else None
                if parent is not None and namespace is not None:
                    referred: _Key = (target, _primary_key(target), (parent,))
                    tx.children.append((referred, str(namespace), where))

    def _pend(
        self, tx: _Transaction, table: str, key: KeyUse, params: Any, where: str, quiet: bool
    ) -> None:
        for row in key.values:
            values = tuple(r.value(params) for r in row)
            if any(v is None for v in values):
                continue  # NULL names no row
            tx.pending.append(((table, key.columns, values), where, quiet))

    def _close(self, tx: _Transaction) -> None:
        found = self._namespaces_of([key for key, _where, _quiet in tx.pending], tx.url)
        for key, where, quiet in tx.pending:
            if key in found:
                (tx.read_namespaces if quiet else tx.namespaces).setdefault(found[key], where)
        if len(tx.namespaces) > 1:
            touched = "; ".join(f"{ns!r} by {where}" for ns, where in tx.namespaces.items())
            self._violate(f"one transaction touched {len(tx.namespaces)} namespaces: {touched}")
        if tx.scatter is not None and tx.writes:
            self._violate(f"the cross-namespace read {tx.scatter} ran in a writing transaction")
        parents = self._namespaces_of([key for key, _ns, _where in tx.children], tx.url)
        for key, namespace, where in tx.children:
            if key in parents and parents[key] != namespace:
                self._violate(
                    f"{where} wrote a row of {namespace!r} that refers to {key[0]} {key[2][0]} "
                    f"of {parents[key]!r}"
                )

    def _namespaces_of(self, keys: list[_Key], url: str) -> dict[_Key, str]:
        """The namespace of each row named by a unique key: known from its INSERT in this
        process, or read on the checker's own connection (committed rows; a row this
        transaction deleted is still there until it commits)."""
        found = {key: self._known[key] for key in keys if key in self._known}
        missing = [key for key in dict.fromkeys(keys) if key not in found]
        if not missing:
            return found
        with self._reader(url).connect() as conn:
            for key in missing:
                table, columns, values = key
                meta = metadata.tables[table]
                ns_column = meta.c[sharding.namespace_column(table) or ""]
                query = sa.select(ns_column).where(
                    *(meta.c[c] == v for c, v in zip(columns, values, strict=True))
                )
                for namespace in conn.execute(query).scalars():
                    found[key] = self._known[key] = str(namespace)
        return found

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


def _kind_of(use: TableUse, quiet: bool) -> str:
    """How a table use is bounded, as the counts name it."""
    if use.namespaces or (use.joined and use.same_namespace_join):
        return "routed"
    if use.key is not None:
        return "by_key"
    if use.parent is not None:
        return "by_parent"
    return "joined" if use.joined else "scatter" if quiet else "unbounded"


def _primary_key(table: str) -> tuple[str, ...]:
    return tuple(c.name for c in metadata.tables[table].primary_key.columns)


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
