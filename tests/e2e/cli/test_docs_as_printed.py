"""Every runnable block of the README, docs/ and examples/ typed into terminals against `orbit
dev`, as printed (runnable_docs.py says what "runnable" means); and every command an example's
docstring prints is one of them. The README quick starts' outcomes (the task's and the
workflow's) are checked too: the README is typed once, here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from ..conftest import ROOT
from .runnable_docs import Session, documents_with_runnable_blocks, runnable_blocks

pytestmark = pytest.mark.slow

DOCUMENTS = documents_with_runnable_blocks()


@pytest.mark.parametrize("document", DOCUMENTS, ids=[str(p.relative_to(ROOT)) for p in DOCUMENTS])
def test_every_runnable_block_runs_as_printed(document: Path, tmp_path: Path) -> None:
    session = Session(tmp_path)
    try:
        for block in runnable_blocks(document):
            session.play(block)
        if document.name == "README.md" and document.parent == ROOT:
            _the_quick_start_did_what_it_says(session)
    finally:
        session.close()


def _the_quick_start_did_what_it_says(session: Session) -> None:
    submitted = session.output_of(".venv/bin/orbit task submit")
    assert re.search(r"state:\s+SUCCEEDED", submitted), submitted
    assert re.search(r'result:\s+\{"x":1\}', submitted), submitted
    assert "shop.echo  SUCCEEDED" in session.output_of(".venv/bin/orbit task list")
    # The workflow quick start: exit 0 of `workflow wait` is SUCCEEDED; its output is the
    # approval's payload joined with what the steps returned.
    ended = session.output_of(".venv/bin/orbit workflow wait")
    assert re.search(r"state:\s+SUCCEEDED", ended), ended
    output = r'output:\s+\{"approvedBy":"me","order":7,"tracking":"TRK-BOX-7"\}'
    assert re.search(output, ended), ended


def test_the_readme_and_the_examples_have_runnable_blocks() -> None:
    names = {str(p.relative_to(ROOT)) for p in DOCUMENTS}
    assert {"README.md", "examples/outbox/README.md"} <= names


def _docstring_commands(path: Path) -> list[str]:
    """Commands an example's module docstring prints: `…` spans and indented lines that start
    with ``orbit`` or ``python``."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    spans = re.findall(r"`([^`]+)`", doc) + [line.strip() for line in doc.splitlines()]
    return [s for s in spans if re.match(r"(orbit|python) \S", s) and "…" not in s]


def _normalised(command: str) -> str:
    return re.sub(r"\s+", " ", command.replace(".venv/bin/", "").split(" #", 1)[0]).strip()


@pytest.mark.parametrize(
    "example", sorted(ROOT.glob("examples/**/*.py")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_every_command_an_examples_docstring_prints_is_run_by_a_runnable_block(
    example: Path,
) -> None:
    typed = {
        _normalised(command)
        for document in DOCUMENTS
        for block in runnable_blocks(document)
        if block.language == "sh"
        for command, _ in block.commands()
    }
    # a full command must be typed as printed; a command's name alone, one that begins it
    missing = [
        c
        for c in _docstring_commands(example)
        if not any(t == _normalised(c) or t.startswith(_normalised(c) + " ") for t in typed)
    ]
    assert not missing, f"{example.name} prints commands no runnable block runs: {missing}"
