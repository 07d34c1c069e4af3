"""WorkflowDefinition through `orbit apply` (the operator's own reconcile function): each spec
change publishes the next immutable version; an unchanged spec publishes nothing; a spec the
CRD schema accepts but Weave cannot run is refused before anything is written; pruning withdraws
the definition (no new starts) without touching running workflows."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml

from orbit.reconcile.apply import apply_manifests
from orbit.reconcile.manifests import ManifestError
from orbit_store.weave.definitions import get_definition

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "manifests" / "workflowdefinition-order.yaml"


def manifest(tmp_path: Path, **spec_changes: object) -> Path:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["metadata"]["namespace"] = "shop"
    doc["spec"].update(spec_changes)
    path = tmp_path / "order.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def versions(store: sa.Engine) -> list[tuple[int, str]]:
    with store.connect() as conn:
        info = get_definition(conn, "shop", "order-fulfilment")
    assert info is not None
    return [(v.version, v.digest) for v in info.versions]


def test_apply_publishes_a_version_per_spec_change(store: sa.Engine, tmp_path: Path) -> None:
    (line,) = apply_manifests(store, [EXAMPLE], default_namespace="shop")
    assert (line.ref, line.action) == ("WorkflowDefinition/shop/order-fulfilment", "configured")
    assert line.detail.startswith("version 1 (sha256 ")
    (again,) = apply_manifests(store, [EXAMPLE], default_namespace="shop")
    assert again.action == "unchanged"
    (changed,) = apply_manifests(store, [manifest(tmp_path, description="v2")])
    assert changed.action == "configured"
    assert [v for v, _ in versions(store)] == [1, 2]


def test_a_spec_weave_cannot_run_is_refused_before_writing(
    store: sa.Engine, tmp_path: Path
) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["metadata"]["namespace"] = "shop"
    doc["spec"]["steps"][1]["dependsOn"] = ["reserv"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    with pytest.raises(ManifestError) as err:
        apply_manifests(store, [bad])
    assert "spec.steps[1].dependsOn[0]: unknown step 'reserv'" in str(err.value)
    with store.connect() as conn:
        assert get_definition(conn, "shop", "order-fulfilment") is None


def test_pruning_withdraws_the_definition(store: sa.Engine, tmp_path: Path) -> None:
    apply_manifests(store, [EXAMPLE], default_namespace="shop")
    empty = tmp_path / "empty"
    empty.mkdir()
    (pruned,) = apply_manifests(store, [empty], prune=True, prune_namespaces=["shop"])
    assert (pruned.action, pruned.detail) == (
        "pruned",
        "withdrawn: no new starts; 0 running workflows continue on their versions",
    )
    with store.connect() as conn:
        info = get_definition(conn, "shop", "order-fulfilment")
    assert info is not None and info.retired
