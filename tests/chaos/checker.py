"""Judging a chaos run after the fact (a history checked as a whole, as Jepsen does): the
tasks and attempts in Orbit's database, the handlers' side-effect ledger, the fault log, and
`orbit admin verify`.

Violations (any one fails the run):
- ``lost``: an acknowledged submission with no task (seed invariant 1);
- ``unsafe_run_twice``: an unsafe task whose handler began in two generations (invariant 7);
- ``stale_effects``: an effect *accepted* from a superseded generation after its successor
  began (invariant 3, with the generation as fence);
- ``unsettled``: a task neither terminal nor parked in NEEDS_REVIEW once the faults stopped and
  the system had time to settle (invariant 2: nothing is stranded);
- ``rerun_after_finish_unexplained``: a safe task run again after a generation had finished
  its work (its ``end`` effect) although that generation's worker was neither killed nor paused
  — work lost by the platform, e.g. across a server outage;
- ``verify``: violations found by `orbit admin verify`.
Reported, not failed: reviews and re-runs the faults explain, late writes only the fence
stopped (a worker paused between its check and its write), failed tasks by reason.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from orbit_store.db import create_store_engine
from orbit_store.schema import task_attempts, tasks, workflow_instances

from . import ledger as ledger_db
from . import timeline
from .cluster import NAMESPACE, ORBIT, ROOT, Cluster
from .faults import FaultLog
from .load import Acked

UNSETTLED = ("WAITING", "LEASED", "RUNNING")


@dataclass
class Verdict:
    counts: dict[str, Any] = field(default_factory=dict)
    violations: dict[str, list[Any]] = field(default_factory=dict)
    #: Timelines of the first flagged tasks (``timeline.explain``).
    stories: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not any(self.violations.values())

    def summary(self) -> str:
        lines = [f"  {k}: {v}" for k, v in self.counts.items()]
        lines += [
            f"  VIOLATION {k}: {len(v)} e.g. {v[:3]}" for k, v in self.violations.items() if v
        ]
        return "\n".join(lines + self.stories)


def unsettled_tasks(cluster: Cluster) -> int:
    engine = create_store_engine(cluster.database_url)
    try:
        with engine.connect() as conn:
            return int(
                conn.execute(
                    sa.select(sa.func.count()).where(
                        tasks.c.namespace == NAMESPACE, tasks.c.state.in_(UNSETTLED)
                    )
                ).scalar_one()
            )
    finally:
        engine.dispose()


def explains(fault: dict[str, Any], end_at: float, rerun_at: float) -> bool:
    """Whether a fault of the finishing worker explains a re-run after its ``end`` effect (at
    ``end_at``; the next generation's first effect at ``rerun_at``): a kill or pause from
    shortly before the write until the re-run stopped its report. A pause counts over its whole
    length: a worker stopped between its lease check and its write writes when it resumes,
    after its lease lapsed — accepted while no successor has begun, the task still runs again."""
    began = fault["at"]
    ended = began + fault.get("seconds", 0.0)
    # Two seconds of slack: a worker resumed on a loaded machine takes a while to write.
    return ended >= end_at - 2 and began <= rerun_at + 0.5


def judge(cluster: Cluster, acked: Acked, faults: FaultLog) -> Verdict:
    verdict = Verdict()
    engine = create_store_engine(cluster.database_url)
    try:
        with engine.connect() as conn:
            task_rows = {
                r.id: r
                for r in conn.execute(
                    sa.select(
                        tasks.c.id,
                        tasks.c.state,
                        tasks.c.safety,
                        tasks.c.handler,
                        tasks.c.queue,
                        tasks.c.wait_path,
                        tasks.c.available_at,
                        tasks.c.concurrency_key,
                        tasks.c.attempts_used,
                        tasks.c.error,
                    ).where(tasks.c.namespace == NAMESPACE)
                )
            }
            attempts = conn.execute(
                sa.select(
                    task_attempts.c.task_id,
                    task_attempts.c.generation,
                    task_attempts.c.outcome,
                    task_attempts.c.outcome_reason,
                ).where(task_attempts.c.namespace == NAMESPACE)
            ).all()
            flows = Counter(
                r.state
                for r in conn.execute(
                    sa.select(workflow_instances.c.state).where(
                        workflow_instances.c.namespace == NAMESPACE
                    )
                )
            )
    finally:
        engine.dispose()
    with ledger_db.connect(cluster.ledger_url) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT task_id, generation, handler, kind, accepted, pid, at FROM ledger ORDER BY id"
        )
        rows = cur.fetchall()
    effects: dict[str, list[tuple[int, str, str, bool, int, float]]] = defaultdict(list)
    for task_id, generation, handler, kind, accepted, pid, at in rows:
        effect = (generation, handler, kind, bool(accepted), pid, timeline.epoch(at))
        effects[task_id].append(effect)

    states = Counter(r.state for r in task_rows.values())
    verdict.violations["lost"] = [t for t in acked.tasks if t not in task_rows]
    verdict.violations["unsettled"] = [
        (t, r.state, r.queue, r.wait_path, str(r.available_at), r.concurrency_key)
        for t, r in task_rows.items()
        if r.state in UNSETTLED
    ]

    unsafe_twice, stale, fenced = [], [], 0
    reruns_explained, reruns_unexplained, spanning = 0, [], 0
    for task_id, rows_ in effects.items():
        began = sorted({g for g, _, kind, ok, _, _ in rows_ if kind == "begin" and ok})
        handler = rows_[0][1]
        if handler == "chaos.unsafe" and len(began) > 1:
            unsafe_twice.append((task_id, began))
        first_at: dict[int, float] = {}
        for g, _, _, _, _, at in rows_:
            first_at[g] = min(first_at.get(g, at), at)
        for g, _, kind, ok, pid, at in rows_:
            if not ok:
                fenced += 1
                continue
            successors = [t for h, t in first_at.items() if h > g]
            if successors and at > min(successors):
                stale.append((task_id, g, kind, pid))
        for g, _, kind, ok, pid, at in rows_:
            if kind != "end" or not ok:
                continue
            later = [t for h, t in first_at.items() if h > g]
            if not later:
                continue
            rerun_at = min(later)
            blamed = [f for f in faults.for_pid(pid) if explains(f, at, rerun_at)]
            if blamed:
                reruns_explained += 1
                spanning += all(f["at"] < at - 1 for f in blamed)  # the old rule's miss
            else:
                reruns_unexplained.append((task_id, g, pid))
    verdict.violations["unsafe_run_twice"] = unsafe_twice
    verdict.violations["stale_effects"] = stale
    verdict.violations["rerun_after_finish_unexplained"] = reruns_unexplained
    flagged = [t for t, *_ in reruns_unexplained] + [t for t, _ in unsafe_twice]
    if flagged:
        with engine.connect() as conn:
            verdict.stories = [
                timeline.explain(conn, cluster.root, t, effects[t], faults) for t in flagged[:3]
            ]
    engine.dispose()

    verified = subprocess.run(
        [ORBIT, "admin", "verify", "--database-url", cluster.database_url],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    try:
        report = json.loads(verified.stdout)
    except json.JSONDecodeError:
        report = {"unparsed": verified.stdout[-2000:] + verified.stderr[-2000:]}
    verdict.violations["verify"] = [] if verified.returncode == 0 else [json.dumps(report)[:2000]]

    failed = Counter(
        (
            "load" if t in acked.tasks else "schedule/workflow",
            (r.error or {}).get("type", "?") if isinstance(r.error, dict) else "?",
        )
        for t, r in task_rows.items()
        if r.state == "FAILED"
    )
    lapse_reasons = Counter(
        a.outcome_reason for a in attempts if a.outcome == "LAPSED" and a.outcome_reason
    )
    verdict.counts.update(
        {
            "faults": dict(faults.counts()),
            "faults_total": sum(faults.counts().values()),
            "acknowledged_submissions": len(acked.tasks),
            "unacknowledged_given_up": acked.unacknowledged,
            "cancel_requests": acked.cancels,
            "tasks": len(task_rows),
            "task_states": dict(states),
            "attempts": len(attempts),
            "attempt_outcomes": dict(Counter(a.outcome for a in attempts)),
            "lapses": dict(lapse_reasons),
            "failed_by_source_and_error": {f"{s}: {e}": n for (s, e), n in failed.items()},
            "workflows_started": len(acked.workflows),
            "workflow_states": dict(flows),
            "ledger_effects": len(rows),
            "late_writes_stopped_only_by_fence": fenced,
            "safe_reruns_after_finish_explained_by_worker_fault": reruns_explained,
            "of_them_only_by_a_pause_begun_before_the_write": spanning,
            "verify_exit": verified.returncode,
        }
    )
    return verdict
