"""The docs stay true to the repository: every relative link in README.md, CONTRIBUTING.md, docs/
and examples/ resolves to a file inside it (a clone has nothing beside it), with the heading an
anchor names; every path docs/architecture.md names exists; and the facts docs restate from code
(apply order, schema revision) match the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orbit.reconcile.manifests import KIND_ORDER
from orbit_store.upgrade import migrate

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted(
    {
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        *ROOT.glob("docs/**/*.md"),
        *ROOT.glob("examples/**/*.md"),
    }
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*]|\[|\]\([^)]*\)", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.*)$", text, re.M)}


def relative_links(path: Path) -> list[str]:
    text = CODE_SPAN.sub("", FENCE.sub("", path.read_text()))
    return [
        link
        for link in LINK.findall(text)
        if not re.match(r"^[a-z][a-z0-9+.-]*:", link)  # http:, https:, mailto: …
    ]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_inside_the_repository(document: Path) -> None:
    broken = []
    for link in relative_links(document):
        target, _, anchor = link.partition("#")
        path = (document.parent / target).resolve() if target else document
        if not path.is_relative_to(ROOT):
            broken.append(f"{link}: outside the repository")
        elif not path.exists():
            broken.append(f"{link}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{link}: no heading #{anchor} in {path.relative_to(ROOT)}")
    assert not broken, broken


def test_the_readme_names_no_path_outside_the_repository() -> None:
    text = (ROOT / "README.md").read_text()
    assert "../shared" not in text and "../seed" not in text


def test_apply_md_lists_every_kind_in_the_order_apply_uses() -> None:
    text = (ROOT / "docs/operations/apply.md").read_text()
    order = re.search(r"applied in its own transaction \(([^)]*)\)", text)
    assert order, "the apply order sentence is gone"
    named = re.findall(r"Queue|Quota|Schedule|Credential|WorkerPool|WorkflowDefinition", order[1])
    assert named == list(KIND_ORDER)


def test_server_md_shows_the_current_schema_revision() -> None:
    text = (ROOT / "docs/operations/server.md").read_text()
    shown = re.findall(r"\(schema (\d{4})\)", text)
    assert shown and set(shown) == {migrate.head_revision()}


def test_the_crd_reference_embeds_the_example_manifests_as_they_are() -> None:
    text = (ROOT / "docs/reference/crds.md").read_text()
    embedded = re.findall(r"```yaml\n# (examples/manifests/[\w.-]+)\n(.*?)\n```", text, re.S)
    names = {name for name, _ in embedded}
    assert names == {str(p.relative_to(ROOT)) for p in ROOT.glob("examples/manifests/*.yaml")}
    for name, body in embedded:
        assert body == (ROOT / name).read_text().rstrip("\n"), name


CITED_PATH = re.compile(
    r"(?<![\w/.<-])((?:[\w.-]+/)+(?:[\w.-]+\.(?:py|md|yaml|toml|json))?)(?![\w<])"
)


def cited_paths(path: Path) -> list[str]:
    """Repository paths a page names in code spans: files (``orbit_store/db.py``) and folders
    (``orbit/api/``); placeholders such as ``orbit/reconcile/<kind>.py`` are not paths."""
    spans = CODE_SPAN.findall(FENCE.sub("", path.read_text()))
    return sorted({m for span in spans for m in CITED_PATH.findall(span.strip("`")) if "/" in m})


def test_every_path_the_architecture_page_names_exists() -> None:
    page = ROOT / "docs/architecture.md"
    cited = cited_paths(page)
    assert len(cited) > 50, "the architecture page names the files of the code it maps"
    missing = [p for p in cited if not (ROOT / p).exists()]
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_the_index_links_every_page_of_the_docs() -> None:
    index = ROOT / "docs/index.md"
    linked = {(index.parent / link.partition("#")[0]).resolve() for link in relative_links(index)}
    pages = {p.resolve() for p in ROOT.glob("docs/**/*.md") if p.parent.name != "runbooks"}
    pages |= {(ROOT / "docs/runbooks/README.md").resolve()}
    missing = sorted(str(p.relative_to(ROOT)) for p in pages - linked - {index.resolve()})
    assert not missing, f"docs/index.md does not link {missing}"
