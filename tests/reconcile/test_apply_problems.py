"""`orbit apply` reports every problem in one run and keeps Orbit's one naming rule."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml
from typer.testing import CliRunner

from orbit.api.schemas.base import NAME_PATTERN
from orbit.cli.main import app
from orbit.reconcile.admission import crds, schema_of
from orbit.reconcile.apply import apply_manifests
from orbit.reconcile.manifests import ManifestError
from orbit_store.schema import queues

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def queue(name: str, **spec: object) -> str:
    doc = {
        "apiVersion": "orbit.dev/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": spec,
    }
    return yaml.safe_dump(doc)


def test_a_cel_error_and_an_undeclared_queue_are_both_reported_and_nothing_applied(
    store: sa.Engine, tmp_path: Path
) -> None:
    (tmp_path / "queue.yaml").write_text(
        queue("emails", retry={"backoff": {"initialSeconds": 30, "maxSeconds": 10}})
    )
    (tmp_path / "ok.yaml").write_text(queue("fine"))
    (tmp_path / "quota.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "orbit.dev/v1alpha1",
                "kind": "Quota",
                "metadata": {"name": "limits", "namespace": "shop"},
                "spec": {"queue": "nowhere", "maxWaiting": 5},
            }
        )
    )
    (tmp_path / "broken.yaml").write_text("kind: [unclosed")
    with pytest.raises(ManifestError) as error:
        apply_manifests(store, [tmp_path])
    problems = str(error.value).splitlines()
    assert any("maxSeconds must be greater than or equal to initialSeconds" in p for p in problems)
    assert any("queue 'nowhere' is not declared" in p for p in problems)
    assert any("broken.yaml: not valid YAML" in p for p in problems)
    with store.connect() as conn:
        assert conn.execute(sa.select(queues)).all() == []


NAMES = [
    "checkout",
    "a",
    "a" * 63,
    "x-1",
    "Bad_Name",
    "bad_name",
    "a" * 64,
    "-x",
    "x-",
    "x.y",
    "Äb",
]


@pytest.mark.parametrize("name", NAMES)
def test_apply_accepts_exactly_the_names_the_api_accepts(
    store: sa.Engine, tmp_path: Path, name: str
) -> None:
    (tmp_path / "queue.yaml").write_text(queue(name))
    api_accepts = re.fullmatch(NAME_PATTERN, name) is not None
    try:
        apply_manifests(store, [tmp_path], dry_run=True)
        applied = True
    except ManifestError as exc:
        assert "metadata.name must be a DNS label" in str(exc)
        applied = False
    assert applied == api_accepts


def test_the_crds_name_rule_and_queue_references_use_the_apis_pattern() -> None:
    for kind in crds():
        rules = [r["rule"] for r in schema_of(kind).get("x-kubernetes-validations", [])]
        assert any(NAME_PATTERN in rule and "metadata.name" in rule for rule in rules), kind
    assert (
        schema_of("Quota")["properties"]["spec"]["properties"]["queue"]["pattern"] == NAME_PATTERN
    )
    pool = schema_of("WorkerPool")["properties"]["spec"]["properties"]["queues"]["items"]
    assert pool["pattern"] == NAME_PATTERN


def test_dry_run_against_a_missing_sqlite_file_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "orbit.db"
    result = runner.invoke(
        app,
        [
            "apply",
            "--dry-run",
            "--database-url",
            f"sqlite:///{missing}",
            "-f",
            str(ROOT / "examples/manifests"),
        ],
    )
    assert result.exit_code == 5 and "no database at" in result.output
    assert not missing.exists() and not missing.parent.exists()


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_a_manifest_with_json_orbit_cannot_store_is_refused_naming_the_field(
    store: sa.Engine, tmp_path: Path, value: str
) -> None:
    """YAML has NaN and infinities; JSON — and so the store — has not: refused before anything
    is written, on SQLite (which would store it) as on MariaDB (which would refuse it)."""
    (tmp_path / "queue.yaml").write_text(queue("default"))
    schedule = (ROOT / "examples/manifests/schedule-nightly-report.yaml").read_text()
    (tmp_path / "schedule.yaml").write_text(schedule.replace("format: csv", f"ratio: {value}"))
    with pytest.raises(ManifestError) as error:
        apply_manifests(store, [tmp_path])
    assert "spec.taskTemplate.params.ratio" in str(error.value), error.value
    assert "not a JSON number" in str(error.value)
    with store.connect() as conn:
        assert conn.execute(sa.select(queues)).all() == []
