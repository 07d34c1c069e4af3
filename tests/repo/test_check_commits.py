"""scripts/check-commits against throwaway git repositories: the convention of CONTRIBUTING.md is
checked on the commits after a base, never on the history before it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check-commits"
IDENTITY = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


class Repository:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.env = {**os.environ, **IDENTITY}
        self.env.pop("ORBIT_COMMITS_BASE", None)
        path.mkdir(exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=self.path, env=self.env, capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    def commit(self, message: str) -> str:
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")

    def check(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(SCRIPT), *args], cwd=self.path, env=self.env, capture_output=True, text=True
        )


@pytest.fixture
def repository(tmp_path: Path) -> Repository:
    return Repository(tmp_path / "repo")


def test_a_long_subject_after_the_base_is_refused(repository: Repository) -> None:
    base = repository.commit("an old subject that was never checked " + "x" * 100)
    repository.commit("store: " + "a subject far longer than seventy-two characters " * 2)
    checked = repository.check(base)
    assert checked.returncode == 1, checked.stdout
    assert "characters (at most 72)" in checked.stdout


def test_a_good_subject_and_body_are_accepted_and_the_old_history_is_not_judged(
    repository: Repository,
) -> None:
    base = repository.commit("no form at all, and far too long for the convention " * 3)
    repository.commit("weave: a timer that fails backs off alone\n\nWhy, and figures: 3 ms.")
    checked = repository.check(base)
    assert checked.returncode == 0, checked.stdout
    assert "1 commit(s) after" in checked.stdout


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ("fixed the timer", "not `area: what changed`"),
        ("weave: the timer of issue 12 backs off", "issue number"),
        ("weave: the timer backs off (#12)", "issue number"),
        ("weave: the timer backs off\nwith no blank line", "second line is not blank"),
    ],
)
def test_each_rule_of_the_convention_refuses(
    repository: Repository, message: str, problem: str
) -> None:
    base = repository.commit("base: where the convention starts")
    repository.commit(message)
    checked = repository.check(base)
    assert checked.returncode == 1 and problem in checked.stdout, checked.stdout


def test_a_history_without_the_base_fails_and_says_how_to_name_one(
    repository: Repository,
) -> None:
    repository.commit("base: a history that does not hold the default base")
    checked = repository.check()
    assert checked.returncode == 2
    assert "ORBIT_COMMITS_BASE=" in checked.stdout


def test_a_shallow_clone_without_the_base_checks_every_commit_it_holds(
    repository: Repository, tmp_path: Path
) -> None:
    repository.commit("an old subject that breaks every rule of the convention " * 2)
    repository.commit("docs: an index of every page")
    repository.commit("sdk: a second good commit")
    clone = Repository.__new__(Repository)
    clone.path, clone.env = tmp_path / "clone", repository.env
    subprocess.run(
        ["git", "clone", "-q", "--depth", "2", f"file://{repository.path}", str(clone.path)],
        check=True,
        env=repository.env,
    )
    checked = clone.check()
    assert checked.returncode == 0, checked.stdout
    assert "2 commit(s) in this shallow clone" in checked.stdout
