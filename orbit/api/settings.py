"""What `orbit server` (and `orbit dev`) is told on its command line, for every process it runs.

A plain dataclass importing nothing heavy: the supervising process of `orbit server --workers N`
builds it before prometheus_client may be imported (orbit/metrics/processes.py) and hands it to
its HTTP processes as JSON.
"""

from __future__ import annotations

from dataclasses import dataclass

from orbit_store.payload import DEFAULT_MAX_PAYLOAD_BYTES
from orbit_store.timeouts import IO_TIMEOUT_SECONDS


@dataclass(frozen=True)
class ServerSettings:
    database_url: str
    host: str = "127.0.0.1"
    port: int = 8080
    reaper_interval: float = 1.0
    scheduler_interval: float = 1.0
    inbox_interval: float = 0.2
    timer_interval: float = 1.0
    weave_workers: int = 8  # threads consuming the inbox / firing timers side by side
    #: Each waiting lease request's own probe: the fallback when the shared probe is off or
    #: a kind of work stays present without being claimable (concurrency/ready_watch.py).
    lease_poll_interval: float = 1.0
    #: The process's shared probe waking waiting lease requests for work made ready anywhere
    #: (other processes and replicas, scheduler, Weave, backoff); 0 turns it off.
    wake_probe_interval: float = 0.075
    heartbeat_interval: float = 10.0
    gauge_interval: float = 15.0  # backlog gauges on /metrics (orbit/metrics/gauges.py)
    require_registered_pods: bool = False
    run_engines: bool = True  # every background loop (engine_loops and the gauge loop)
    run_gauges: bool = False  # only the gauge loop: an HTTP process of `orbit server --workers`
    delivery_interval: float = 1.0
    #: One folder per namespace of signing secrets (orbit/engines/webhooks.py).
    webhook_secrets_dir: str | None = None
    #: What push deliveries may reach beyond public addresses: CIDRs, addresses, host names,
    #: *.suffix (orbit/engines/egress.py); `orbit dev` adds loopback.
    webhook_allow: tuple[str, ...] = ()
    #: Largest params of a submission, or result + error of a completion (api/limits.py).
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    #: Warm database connections per HTTP process (as many again may overflow); None: the
    #: store's default (orbit_store.db: 20 + 20).
    db_pool_size: int | None = None
    #: Seconds one database read or write may take before its connection is taken as lost
    #: (orbit_store.db.IO_TIMEOUT_SECONDS; docs/operations/database.md).
    database_timeout: float = IO_TIMEOUT_SECONDS
    #: Submission transactions one HTTP process runs at once; one-by-one submissions arriving
    #: meanwhile wait and share the next (group commit, api/submit_groups.py). One: the
    #: requests that arrive during a transaction all go in the next, so groups are as large as
    #: the load makes them (bench/NOTES.md has the measurements that chose it).
    submit_transactions: int = 1
