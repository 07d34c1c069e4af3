"""Seeded fault injection. The seed fixes the schedule — which kind of fault, when, for how
long, against which replica or worker (by index) — so a failing run can be replayed; process
ids and exact timings still differ between runs.

Kinds (the issue's list): SIGKILL of a server replica, restarted soon or after longer than a
lease; an outage of every replica longer than a lease; SIGKILL of a worker mid-handler (a new
one replaces it); SIGSTOP of a worker past its lease, then SIGCONT; KILL CONNECTION of the
servers' MySQL connections; KILL CONNECTION of a server connection waiting at COMMIT (held at
COMMIT by ``BACKUP STAGE BLOCK_COMMIT``); a crash (SIGKILL) of the harness's own MariaDB and
its restart with crash recovery.
"""

from __future__ import annotations

import contextlib
import random
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .cluster import Cluster

WEIGHTS = {
    "replica_kill_short": 3,
    "replica_kill_long": 2,
    "server_outage": 1,
    "worker_kill": 4,
    "worker_pause": 3,
    "db_kill_connections": 4,
    "db_kill_at_commit": 1,
    "mariadb_crash": 1,
}
#: The part of the system a kind strikes (default: workers); faults of one part are injected
#: one at a time (their restarts must not overlap), parts are struck side by side.
RESOURCE = {
    "replica_kill_short": "servers",
    "replica_kill_long": "servers",
    "server_outage": "servers",
    "db_kill_connections": "database",
    "db_kill_at_commit": "database",
    "mariadb_crash": "database",
}


#: Faults that take a whole part of the system down come at most this often (seconds); a
#: draw that comes too soon strikes the part's cheap kind instead.
SPACED = {"mariadb_crash": 20.0, "server_outage": 20.0}
CHEAP = {"servers": "replica_kill_short", "database": "db_kill_connections"}
#: Seconds past the hard stop a stream may go on to inject a kind it has not injected yet: on a
#: starved machine each replica restart can take many seconds, and a run that never saw a kind
#: (e.g. a whole-server outage) would not have tested it.
FIRST_GRACE = 90.0


@dataclass(frozen=True)
class Plan:
    kind: str
    gap: float  # seconds after the previous fault began
    duration: float
    pick: float  # chooses the target among those available


@dataclass
class FaultLog:
    entries: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, **detail: Any) -> None:
        with self.lock:
            self.entries.append({"kind": kind, "at": time.time(), **detail})

    def counts(self) -> Counter[str]:
        with self.lock:
            return Counter(e["kind"] for e in self.entries)

    def for_pid(self, pid: int) -> list[dict[str, Any]]:
        with self.lock:
            return [e for e in self.entries if e.get("pid") == pid]


def durations(rng: random.Random, lease_seconds: float) -> dict[str, float]:
    return {
        "replica_kill_short": rng.uniform(0.2, 1.5),
        "replica_kill_long": rng.uniform(lease_seconds + 0.5, lease_seconds * 1.5),
        "server_outage": rng.uniform(lease_seconds * 1.3, lease_seconds * 2),
        "worker_pause": rng.uniform(lease_seconds * 1.2, lease_seconds * 2),
        "mariadb_crash": rng.uniform(0.0, 1.0),
    }


class Injector:
    def __init__(self, cluster: Cluster, seed: int) -> None:
        self.cluster, self.seed = cluster, seed
        self.log = FaultLog()
        self.threads: list[threading.Thread] = []
        self.errors: list[str] = []
        self.decisions: list[tuple[float, str]] = []

    def run(self, until: float, min_faults: int, hard_stop: float) -> None:
        """Inject faults until ``until`` (monotonic) and at least ``min_faults`` were injected,
        but never past ``hard_stop`` (nor ``FIRST_GRACE`` past it while a kind has not been
        injected yet). One stream per part of the system (servers, database,
        workers), each with its own seeded schedule: each injects every one of its kinds once
        first (so even a short run sees them all; a kind skipped because its target was not
        there is tried again later), then kinds drawn by weight, one fault at a
        time within its part (worker pauses run alongside)."""
        streams = [
            threading.Thread(
                target=self._stream,
                args=(part, index, until, min_faults, hard_stop),
                name=f"chaos-faults-{part}",
                daemon=True,
            )
            for index, part in enumerate(("servers", "database", "workers"))
        ]
        for stream in streams:
            stream.start()
        for stream in streams:
            stream.join()
        self.settle()

    def _stream(
        self, part: str, index: int, until: float, min_faults: int, hard_stop: float
    ) -> None:
        rng = random.Random(self.seed * 31 + index)
        kinds = [k for k in WEIGHTS if RESOURCE.get(k, "workers") == part]
        first = list(kinds)
        rng.shuffle(first)
        gap = {"servers": (0.5, 2.0), "database": (0.3, 1.0), "workers": (0.4, 1.4)}[part]
        began = time.monotonic()
        last: dict[str, float] = {}
        while True:
            now = time.monotonic()
            enough = part != "workers" or sum(self.log.counts().values()) >= min_faults
            if now >= hard_stop + (FIRST_GRACE if first else 0.0) or (
                now >= until and not first and enough
            ):
                return
            from_first = bool(first)
            kind = first.pop(0) if first else rng.choices(kinds, [WEIGHTS[k] for k in kinds])[0]
            if kind in SPACED and now - last.get(kind, -1e9) < SPACED[kind]:
                kind = CHEAP[part]  # the system must spend most of its time up, not recovering
            last[kind] = now
            plan = Plan(
                kind,
                rng.uniform(*gap),
                durations(rng, self.cluster.lease_seconds).get(kind, 0.0),
                rng.random(),
            )
            self.decisions.append((round(now - began, 1), kind))
            time.sleep(plan.gap)
            if kind == "worker_pause":  # the stream goes on while the worker is stopped
                thread = threading.Thread(target=self._run_one, args=(plan,), daemon=True)
                thread.start()
                self.threads.append(thread)
            else:
                injected = self.log.counts()[kind]
                self._run_one(plan)
                if from_first and self.log.counts()[kind] == injected:
                    # Skipped (e.g. a replica kill while the other replica is still starting on
                    # a loaded machine): try it again later, so every kind is injected once.
                    first.append(kind)

    def settle(self, timeout: float = 120) -> None:
        """Wait for every fault to be undone (replicas and MariaDB up, workers resumed)."""
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(deadline - time.monotonic(), 0.1))

    def _run_one(self, plan: Plan) -> None:
        try:
            getattr(self, plan.kind)(plan)
        except Exception as exc:  # a fault that could not be applied is reported, not hidden
            self.errors.append(f"{plan.kind}: {exc!r}")

    # --- the faults ----------------------------------------------------------------------------

    def _pick(self, items: list[Any], plan: Plan) -> Any:
        return items[int(plan.pick * len(items)) % len(items)]

    def replica_kill_short(self, plan: Plan) -> None:
        self._kill_replica(plan)

    def replica_kill_long(self, plan: Plan) -> None:
        self._kill_replica(plan)

    def _kill_replica(self, plan: Plan) -> None:
        alive = self.cluster.alive_replicas()
        if len(alive) < 2:
            self.errors.append(f"{plan.kind}: only {len(alive)} replica serving; skipped")
            return
        replica = self._pick(alive, plan)
        self.cluster.kill_replica(replica)
        self.log.add(plan.kind, port=replica.port, seconds=round(plan.duration, 2))
        time.sleep(plan.duration)
        self._restart(replica)

    def _restart(self, replica: Any) -> None:
        """Until it serves again: a fault is never left in place (a loaded machine can take a
        while to start a Python server)."""
        while True:
            try:
                self.cluster.start_replica(replica)
                return
            except RuntimeError as exc:
                self.errors.append(f"restart: {exc}")

    def server_outage(self, plan: Plan) -> None:
        replicas = self.cluster.alive_replicas()
        for replica in replicas:
            self.cluster.kill_replica(replica)
        self.log.add(plan.kind, replicas=len(replicas), seconds=round(plan.duration, 2))
        time.sleep(plan.duration)
        starters = [threading.Thread(target=self._restart, args=(r,)) for r in replicas]
        for t in starters:
            t.start()
        for t in starters:
            t.join()

    def worker_kill(self, plan: Plan) -> None:
        # Workers that had time to start and lease: a kill lands mid-handler, not mid-import.
        running = [w for w in self.cluster.running_workers() if w.age() > 4]
        if not running:
            return
        worker = self._pick(running, plan)
        worker.process.send_signal(signal.SIGKILL)
        worker.process.wait(10)
        self.log.add(plan.kind, pid=worker.process.pid)
        self.cluster.start_worker()

    def worker_pause(self, plan: Plan) -> None:
        running = self.cluster.running_workers()
        if len(running) < 3:  # keep most of the fleet working: pauses overlap otherwise
            return
        worker = self._pick(running, plan)
        worker.paused = True
        worker.process.send_signal(signal.SIGSTOP)
        self.log.add(plan.kind, pid=worker.process.pid, seconds=round(plan.duration, 2))
        time.sleep(plan.duration)
        worker.process.send_signal(signal.SIGCONT)
        worker.paused = False

    def db_kill_connections(self, plan: Plan) -> None:
        ids = self.cluster.server_connection_ids()
        if not ids:
            return
        rng = random.Random(plan.pick)
        chosen = rng.sample(ids, min(len(ids), 1 + int(plan.pick * 3)))
        assert self.cluster.instance is not None
        with self.cluster.instance.admin() as conn, conn.cursor() as cur:
            for connection_id in chosen:
                with contextlib.suppress(Exception):
                    cur.execute(f"KILL CONNECTION {connection_id}")
        self.log.add(plan.kind, connections=len(chosen))

    def db_kill_at_commit(self, plan: Plan) -> None:
        assert self.cluster.instance is not None
        killed = 0
        with self.cluster.instance.admin() as conn, conn.cursor() as cur:
            cur.execute("BACKUP STAGE START")
            cur.execute("BACKUP STAGE BLOCK_COMMIT")
            try:
                # Every commit waits meanwhile: hold the block briefly.
                deadline = time.monotonic() + 0.5
                while not killed and time.monotonic() < deadline:
                    time.sleep(0.01)
                    cur.execute(
                        "SELECT id FROM information_schema.processlist WHERE info = 'COMMIT' "
                        "AND state LIKE 'Waiting for backup lock%' AND db = 'orbit'"
                    )
                    for (connection_id,) in cur.fetchall():
                        try:
                            cur.execute(f"KILL CONNECTION {int(connection_id)}")
                            killed += 1
                        except Exception:
                            pass
            finally:
                cur.execute("BACKUP STAGE END")
        self.log.add(plan.kind, connections=killed)

    def mariadb_crash(self, plan: Plan) -> None:
        instance = self.cluster.instance
        assert instance is not None
        instance.crash()
        self.log.add(plan.kind, seconds=round(plan.duration, 2))
        time.sleep(plan.duration)
        instance.start()
