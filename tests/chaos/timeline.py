"""The story of one task a chaos run flagged, told from every record the run kept: the
handlers' ledger effects, the task's attempts in Orbit's database, the faults injected around
them, and the workers' and servers' log lines naming the task or its attempts. Printed with the
verdict, so a rare failure on a CI machine explains itself without a replay."""

from __future__ import annotations

import calendar
import datetime as dt
import json
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from orbit_store.schema import task_attempts

from .faults import FaultLog

#: Faults this long before the task's first effect (seconds) may still be part of its story.
LOOKBACK = 10.0
MAX_LOG_LINES = 40
MAX_LINES = 80


def epoch(at: dt.datetime) -> float:
    """A naive UTC database time as seconds since the epoch (comparable with ``time.time()``)."""
    return calendar.timegm(at.timetuple()) + at.microsecond / 1e6


def _attempts(conn: sa.Connection, task_id: str) -> list[Any]:
    a = task_attempts.c
    return list(
        conn.execute(
            sa.select(
                a.id,
                a.generation,
                a.leased_at,
                a.started_at,
                a.heartbeat_at,
                a.lease_expires_at,
                a.finished_at,
                a.outcome,
                a.outcome_reason,
                a.late_outcome,
                a.late_reported_at,
            )
            .where(a.task_id == task_id)
            .order_by(a.generation)
        )
    )


def _log_lines(root: Path, needles: set[str]) -> list[tuple[float, str]]:
    lines: list[tuple[float, str]] = []
    for path in sorted(root.glob("*.log")):
        for raw in path.read_text(errors="replace").splitlines():
            if not any(n in raw for n in needles):
                continue
            try:
                record = json.loads(raw)
                at = dt.datetime.fromisoformat(record["ts"]).timestamp()
                text = f"{path.stem}: {record.get('level')} {record.get('msg')}"
            except (ValueError, KeyError, TypeError):
                at, text = 0.0, f"{path.stem}: {raw}"
            lines.append((at, text[:300]))
    return lines[-MAX_LOG_LINES:]


def explain(
    conn: sa.Connection,
    root: Path,
    task_id: str,
    effects: list[tuple[int, str, str, bool, int, float]],
    faults: FaultLog,
) -> str:
    """A time-ordered account of ``task_id`` (times in seconds from its first effect)."""
    attempts = _attempts(conn, task_id)
    began = min((at for *_, at in effects), default=0.0)
    events: list[tuple[float, str]] = []
    for generation, _, kind, accepted, pid, at in effects:
        fenced = "" if accepted else " (refused by the fence)"
        events.append((at, f"effect gen {generation} {kind} by pid {pid}{fenced}"))
    for a in attempts:
        for label, at in (
            ("leased", a.leased_at),
            ("started", a.started_at),
            ("last heartbeat", a.heartbeat_at),
            ("finished " + str(a.outcome) + f" ({a.outcome_reason})", a.finished_at),
            (f"late report {a.late_outcome}", a.late_reported_at),
        ):
            if at is not None:
                events.append((epoch(at), f"attempt gen {a.generation} {label}"))
        if a.outcome in (None, "LAPSED"):
            ends = epoch(a.lease_expires_at)
            events.append((ends, f"attempt gen {a.generation} lease ends (last recorded)"))
    ended = max((at for at, _ in events), default=began)
    with faults.lock:
        nearby = [f for f in faults.entries if began - LOOKBACK <= f["at"] <= ended + 1]
    for f in nearby:
        detail = {k: v for k, v in f.items() if k not in ("kind", "at")}
        events.append((f["at"], f"FAULT {f['kind']} {detail}"))
    needles = {task_id, *(a.id for a in attempts)}
    events += [(at, f"log {text}") for at, text in _log_lines(root, needles)]
    lines = [f"  timeline of task {task_id}:"]
    lines += [f"    {at - began:+8.3f}s  {text}" for at, text in sorted(events)[:MAX_LINES]]
    return "\n".join(lines)
