"""How many CPUs this process may use: what ``orbit server --workers auto`` starts one HTTP
process per. ``os.cpu_count()`` is the node's count — in a Kubernetes pod with a CPU limit of 2
on a 64-core node it says 64, and 64 processes would share two CPUs' worth of time. The answer
here is the smallest of the CPUs the process may be scheduled on (its CPU set) and the cgroup's
CPU quota (the container's limit), rounded up."""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def usable_cpus(cgroup: Path = CGROUP) -> int:
    """At least 1."""
    counts = [_scheduled_cpus()]
    quota = cgroup_cpu_quota(cgroup)
    if quota is not None:
        counts.append(math.ceil(quota))
    return max(1, min(counts))


def _scheduled_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cgroup_cpu_quota(cgroup: Path = CGROUP) -> float | None:
    """The CPU limit in CPUs (quota / period), or None when there is none: cgroup v2's
    ``cpu.max`` ("max 100000" or "200000 100000"), else cgroup v1's ``cpu.cfs_quota_us`` (-1:
    none) and ``cpu.cfs_period_us``."""
    v2 = _read(cgroup / "cpu.max")
    if v2 is not None:
        quota, _, period = v2.partition(" ")
        return _ratio(quota, period)
    return _ratio(
        _read(cgroup / "cpu" / "cpu.cfs_quota_us"), _read(cgroup / "cpu" / "cpu.cfs_period_us")
    )


def _ratio(quota: str | None, period: str | None) -> float | None:
    try:
        q, p = int(quota or ""), int(period or "")
    except ValueError:  # "max", missing or unreadable: no limit
        return None
    return q / p if q > 0 and p > 0 else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
