"""Source says why in its own words. No module cites an issue number (issues live outside the
repository), and no module of the packages points into docs/performance.md for its reasons (its
figures go stale; they belong in bench/NOTES.md and commit messages — bench/ itself may)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["orbit", "orbit_store", "sdk/orbit_sdk", "operator/orbit_operator"]
ISSUE = re.compile(r"\bissues? \d+\b", re.IGNORECASE)
# The commit checker's tests use an issue number as a sample subject it must refuse.
EXEMPT = {"tests/repo/test_check_commits.py"}


def lines_matching(folders: list[str], pattern: re.Pattern[str]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for folder in folders
        for path in sorted((ROOT / folder).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in EXEMPT
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]


def test_no_module_cites_an_issue_number() -> None:
    found = lines_matching([*PACKAGES, "tests", "bench"], ISSUE)
    assert not found, "\n".join(found)


def test_no_package_module_points_into_the_performance_page() -> None:
    found = lines_matching(PACKAGES, re.compile(r"docs/performance\.md"))
    assert not found, "\n".join(found)
