"""docs/reference/crds.md checked against the CRDs: each kind's section gives the CRD's defaults,
its CEL rules with their messages, its printer columns, and the kinds table its plural and short
names. (tests/k8s/test_crds.py checks that every field is documented at all.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from orbit.reconcile.admission import cel_rules, crds, schema_of, version_of, walk
from orbit.reconcile.resource import QUEUE_NOT_FOUND

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reference" / "crds.md"
KINDS = ["Queue", "Quota", "Credential", "WorkerPool", "Schedule", "WorkflowDefinition"]


def section(kind: str) -> str:
    """The text of the kind's `## Kind` section."""
    text = DOCS.read_text()
    start = text.index(f"\n## {kind}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def field_rows(kind: str) -> dict[str, list[str]]:
    """The Fields table of the section: field path → its cells."""
    rows = {}
    for line in section(kind).splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if cells and re.fullmatch(r"`[^`]+`", cells[0]):
            rows[cells[0].strip("`")] = cells
    return rows


def same_value(documented: str, default: Any) -> bool:
    """Whether a Default cell (`1`, `false`, `{a: 1}`, `[fail]`…) says the CRD's default."""
    written = documented.strip("`")
    try:
        parsed = yaml.safe_load(written)
    except yaml.YAMLError:
        return False
    return bool(parsed == default or json.dumps(parsed) == json.dumps(default))


@pytest.mark.parametrize("kind", KINDS)
def test_every_default_in_the_crd_is_the_documented_default(kind: str) -> None:
    rows = field_rows(kind)
    wrong = []
    for path, node in walk(schema_of(kind)):
        if "default" not in node or path.endswith("[]") or path.startswith("spec.template."):
            continue
        cells = rows.get(path.replace("[]", "[]"))
        if cells is None:
            wrong.append(f"{path}: no row in the Fields table")
        elif not same_value(cells[2], node["default"]):
            wrong.append(f"{path}: CRD default {node['default']!r}, documented {cells[2]}")
    assert wrong == [], "\n".join(wrong)


@pytest.mark.parametrize("kind", KINDS)
def test_every_cel_rule_is_documented_with_its_message(kind: str) -> None:
    text = " ".join(section(kind).split())
    rules = [r for r in cel_rules(schema_of(kind)) if r.path != ""]  # the names rule: ## Names
    missing = [r.message for r in rules if " ".join(r.message.split()) not in text]
    assert missing == []


@pytest.mark.parametrize("kind", KINDS)
def test_printer_columns_are_documented_in_the_section(kind: str) -> None:
    text = section(kind)
    columns = version_of(crds()[kind])["additionalPrinterColumns"]
    missing = [c["name"].upper() for c in columns if f"`{c['name'].upper()}`" not in text]
    assert missing == []


def test_the_kinds_table_gives_each_plural_and_short_name() -> None:
    text = DOCS.read_text()
    for kind, crd in crds().items():
        names = crd["spec"]["names"]
        shorts = " ".join(f"`{s}`" for s in names.get("shortNames", []))
        row = f"| [{kind}](#{kind.lower()}) | `{names['plural']}` | {shorts} |"
        assert row in text, row


def test_the_ready_reasons_table_has_queue_not_found() -> None:
    assert f"| `{QUEUE_NOT_FOUND}` | `False` |" in DOCS.read_text()
