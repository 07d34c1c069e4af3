"""``orbit server --workers auto`` starts one HTTP process per CPU the container may use: its
CPU limit (the cgroup's quota), not the node's CPU count."""

from __future__ import annotations

import os
from pathlib import Path

from orbit.cli.processes.cpus import cgroup_cpu_quota, usable_cpus


def _cgroup_v2(root: Path, cpu_max: str) -> Path:
    (root / "cpu.max").write_text(cpu_max + "\n")
    return root


def _cgroup_v1(root: Path, quota: str, period: str) -> Path:
    (root / "cpu").mkdir(parents=True)
    (root / "cpu" / "cpu.cfs_quota_us").write_text(quota + "\n")
    (root / "cpu" / "cpu.cfs_period_us").write_text(period + "\n")
    return root


def _scheduled() -> int:
    return len(os.sched_getaffinity(0))


def test_a_cgroup_v2_limit_of_one_and_a_half_cpus_gives_two_processes(tmp_path: Path) -> None:
    cgroup = _cgroup_v2(tmp_path, "150000 100000")
    assert cgroup_cpu_quota(cgroup) == 1.5
    assert usable_cpus(cgroup) == min(2, _scheduled())


def test_a_limit_below_one_cpu_still_gives_one_process(tmp_path: Path) -> None:
    assert usable_cpus(_cgroup_v2(tmp_path, "50000 100000")) == 1


def test_without_a_cgroup_limit_every_scheduled_cpu_counts(tmp_path: Path) -> None:
    assert cgroup_cpu_quota(_cgroup_v2(tmp_path, "max 100000")) is None
    assert usable_cpus(tmp_path) == _scheduled()


def test_a_cgroup_v1_quota_counts_and_minus_one_means_none(tmp_path: Path) -> None:
    assert cgroup_cpu_quota(_cgroup_v1(tmp_path / "a", "200000", "100000")) == 2.0
    assert cgroup_cpu_quota(_cgroup_v1(tmp_path / "b", "-1", "100000")) is None


def test_no_cgroup_files_at_all_means_no_limit(tmp_path: Path) -> None:
    assert cgroup_cpu_quota(tmp_path / "missing") is None
    assert usable_cpus(tmp_path / "missing") == _scheduled()


def test_a_limit_never_raises_the_count_above_the_scheduled_cpus(tmp_path: Path) -> None:
    assert usable_cpus(_cgroup_v2(tmp_path, "6400000 100000")) == _scheduled()
