"""The CRDs and manifests as a real API server judges them: every CRD accepted server-side,
every example accepted and defaulted as the offline admission defaults it, every invalid manifest
refused (tests/k8s/invalid and ones generated from the schemas), a refused example for every CEL
rule, printer columns, and the status subresource.

The offline admission (orbit/reconcile/admission.py: what `orbit apply` and the operator check
with) must agree with the server on all of it: these tests hold it to the server's verdicts.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from orbit.reconcile.admission import admit, cel_rules, crds, load_yaml_documents, schema_of

from .conftest import ORBIT, Cluster, Kube, apply, as_json, orbit_path, orbit_resource, plural_of
from .violations import violations

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "manifests").glob("*.yaml"))
#: The examples name no namespace (kubectl's or the CLI context's applies); the tests put them here.
EXAMPLES_NAMESPACE = "shop"
INVALID = sorted((ROOT / "tests" / "k8s" / "invalid").glob("*.yaml"))
KINDS = ["Queue", "Quota", "Credential", "WorkerPool", "Schedule", "WorkflowDefinition"]
# The printer columns users see (docs/reference/crds.md), as `kubectl get` prints them.
COLUMNS = {
    "Queue": ["NAME", "WAITING", "RUNNING", "PAUSED", "READY", "AGE"],
    "Quota": ["NAME", "QUEUE", "MAX-WAITING", "MAX-RUNNING", "READY", "AGE"],
    "Credential": ["NAME", "SECRET", "ROLES", "READY", "AGE"],
    "WorkerPool": ["NAME", "READY", "WORKERS", "BACKLOG", "AGE"],
    "Schedule": ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "LAST", "NEXT", "READY", "AGE"],
    "WorkflowDefinition": ["NAME", "LATEST", "RUNNING", "READY", "AGE"],
}


def example_of(kind: str) -> dict[str, Any]:
    """The example of ``kind``, placed in EXAMPLES_NAMESPACE."""
    (doc,) = [d for p in EXAMPLES for d in load_yaml_documents(p) if d["kind"] == kind]
    doc["metadata"]["namespace"] = EXAMPLES_NAMESPACE
    return doc


def dry_run(api: Kube, manifest: dict[str, Any]) -> tuple[int, str]:
    """POST with dryRun and strict field validation (as kubectl apply does): status, message."""
    meta = manifest["metadata"]
    answer = api.http.post(
        orbit_path(manifest["kind"], meta["namespace"]),
        params={"dryRun": "All", "fieldValidation": "Strict"},
        json=manifest,
    )
    body = answer.json()
    return answer.status_code, str(body.get("message", ""))


# --- the CRDs ----------------------------------------------------------------------------------


def test_every_crd_is_accepted_server_side_and_established(cluster: Cluster) -> None:
    """`kubectl apply --server-side -f crds/` (done by the fixture) and `kubectl apply -f crds/`
    both succeed; every CRD's names are accepted and it is established."""
    again = cluster.kubectl("apply", "-f", str(ROOT / "crds"))
    assert again.stdout.count("customresourcedefinition.apiextensions.k8s.io/") == len(KINDS)
    listed = as_json(cluster.kubectl("get", "crd", "-o", "json"))["items"]
    orbit = {
        crd["spec"]["names"]["kind"]: crd for crd in listed if crd["spec"]["group"] == "orbit.dev"
    }
    assert sorted(orbit) == sorted(KINDS)
    for kind, crd in orbit.items():
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions.get("Established") == "True", (kind, conditions)
        assert conditions.get("NamesAccepted") == "True", (kind, conditions)
    # Discovery as kubectl and Kopf see it: the group, the short names and the category.
    resources = cluster.kubectl("api-resources", "--api-group=orbit.dev", "-o", "name").stdout
    assert sorted(resources.split()) == sorted(f"{plural_of(k)}.orbit.dev" for k in KINDS)
    assert cluster.kubectl("get", "orbit", "-A").returncode == 0


def test_kubectl_explain_shows_the_field_descriptions(cluster: Cluster) -> None:
    """The server publishes the CRDs' OpenAPI (kubectl explain, kubectl's validation)."""
    explained = cluster.kubectl("explain", "queue.spec.retry.backoff").stdout
    assert "initialSeconds" in explained and "maxSeconds" in explained


# --- examples and defaults ---------------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_is_accepted_and_defaulted_as_orbit_defaults_it(api: Kube, path: Path) -> None:
    (doc,) = load_yaml_documents(path)
    answer = api.http.post(
        orbit_path(doc["kind"], EXAMPLES_NAMESPACE),
        params={"dryRun": "All", "fieldValidation": "Strict"},
        json=doc,
    )
    assert answer.status_code == 201, answer.text
    offline, refusals = admit(doc)
    assert refusals == []
    assert answer.json()["spec"] == offline["spec"]


def test_every_example_applies_with_kubectl_as_one_folder(cluster: Cluster) -> None:
    """`kubectl apply -f examples/manifests/` is accepted (the examples name no namespace: they go
    to kubectl's, here shop)."""
    folder = str(ROOT / "examples" / "manifests")
    out = cluster.kubectl("-n", EXAMPLES_NAMESPACE, "apply", "--dry-run=server", "-f", folder)
    assert out.stdout.count("(server dry run)") == len(EXAMPLES), out.stdout


def test_a_queue_without_spec_gets_the_documented_defaults(cluster: Cluster, api: Kube) -> None:
    namespace = f"defaults-{uuid.uuid4().hex[:8]}"
    apply(cluster, orbit_resource("Queue", namespace, "bare", {}))
    spec = (api.orbit("Queue", namespace, "bare") or {})["spec"]
    assert spec["retry"] == {
        "maxAttempts": 3,
        "backoff": {"initialSeconds": 1, "maxSeconds": 300, "multiplier": 2.0},
    }
    assert (spec["priority"], spec["leaseSeconds"], spec["safetyDefault"]) == (0, 30, "safe")
    assert (spec["paused"], spec["deletionPolicy"]) == (False, "Block")
    assert spec == admit(orbit_resource("Queue", namespace, "bare", {}))[0]["spec"]


# --- what the server refuses -------------------------------------------------------------------


@pytest.mark.parametrize("path", INVALID, ids=[p.name for p in INVALID])
def test_invalid_manifest_is_refused_by_the_server_with_its_reason(
    cluster: Cluster, path: Path
) -> None:
    """Each of tests/k8s/invalid, through `kubectl apply`: refused, and the message says what its
    first line says is wrong (the field, or the rule's message)."""
    refused = cluster.kubectl("apply", "--dry-run=server", "-f", str(path), check=False)
    assert refused.returncode != 0, f"{path.name} was accepted: {refused.stdout}"
    (doc,) = load_yaml_documents(path)
    assert admit(doc)[1], f"{path.name}: the offline admission accepts what the server refused"
    message = refused.stderr
    offline = admit(doc)[1][0]
    wanted = offline.message if offline.by == "cel" else offline.path.split(".")[-1]
    assert wanted.split(" (")[0] in message, message


def generated_violations() -> list[Any]:
    cases = []
    for kind in KINDS:
        valid, refusals = admit(example_of(kind))
        assert refusals == []
        valid["metadata"]["namespace"] = "generated"
        cases += [(kind, v) for v in violations(schema_of(kind), valid)]
    return cases


GENERATED = generated_violations()


@pytest.mark.parametrize("kind", KINDS)
def test_every_schema_constraint_breaks_refused_by_server_and_offline(api: Kube, kind: str) -> None:
    """Each constraint of the schema that the example's values are under, broken one at a time:
    the server refuses it naming the field, and the offline admission refuses it too."""
    cases = [v for k, v in GENERATED if k == kind]
    assert len(cases) >= 5, cases
    wrong = []
    for case in cases:
        status, message = dry_run(api, case.manifest)
        field = re.split(r"[.\[]", case.path)[-1].rstrip("]")
        if status not in (400, 422) or field not in message:
            wrong.append(f"{case.path} ({case.breaks}): server answered {status} {message!r}")
        elif not admit(case.manifest)[1]:
            wrong.append(f"{case.path} ({case.breaks}): refused by the server, not offline")
    assert wrong == [], "\n".join(wrong)


def refused_examples() -> list[tuple[dict[str, Any], str]]:
    """Every refused manifest the tier has: tests/k8s/invalid, and each example renamed to a
    DNS subdomain that is not a DNS label (the names rule of every kind)."""
    found = [(doc, p.name) for p in INVALID for doc in load_yaml_documents(p)]
    for kind in KINDS:
        renamed = example_of(kind)
        renamed["metadata"]["name"] = "not.a.label"
        found.append((renamed, f"{kind} named not.a.label"))
    return found


def test_every_cel_rule_has_an_example_the_server_refuses_with_its_message(api: Kube) -> None:
    """x-kubernetes-validations: each rule of each CRD is what refuses at least one manifest."""
    messages = []
    for manifest, name in refused_examples():
        status, message = dry_run(api, manifest)
        assert status in (400, 422), f"{name} was accepted"
        messages.append(message)
    uncovered = [
        f"{kind} {rule.path or '<root>'}: {rule.rule}"
        for kind in KINDS
        for rule in cel_rules(schema_of(kind))
        if not any(" ".join(rule.message.split()) in m for m in messages)
    ]
    assert uncovered == [], "no refused example for:\n" + "\n".join(uncovered)


# --- printer columns and status ----------------------------------------------------------------


def status_for_columns(kind: str) -> dict[str, Any]:
    """A status with a value behind every printer column of the kind."""
    crd = crds()[kind]
    status: dict[str, Any] = {
        "observedGeneration": 1,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Reconciled",
                "message": "in effect",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    for name, node in schema["properties"].items():
        if name in status:
            continue
        if "enum" in node:
            status[name] = node["enum"][0]
        elif node.get("format") == "date-time":
            status[name] = "2026-01-01T00:00:00Z"
        elif node.get("type") in ("integer", "number"):
            status[name] = 7
        elif node.get("type") == "boolean":
            status[name] = True
        elif node.get("type") == "string":
            status[name] = "text"
    return status


@pytest.mark.parametrize("kind", KINDS)
def test_printer_columns_show_the_status_as_documented(
    cluster: Cluster, api: Kube, kind: str
) -> None:
    namespace = f"columns-{uuid.uuid4().hex[:8]}"
    manifest = example_of(kind)
    manifest["metadata"]["namespace"] = namespace
    apply(cluster, manifest)
    name = manifest["metadata"]["name"]
    status = status_for_columns(kind)
    answer = api.http.patch(
        orbit_path(kind, namespace, name, "status"),
        json={"status": status},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert answer.status_code == 200, answer.text

    table = cluster.kubectl("get", plural_of(kind), "-n", namespace).stdout.splitlines()
    assert table[0].split() == COLUMNS[kind]
    row = dict(zip(COLUMNS[kind], re.split(r"\s{2,}", table[1].strip()), strict=True))
    assert row["NAME"] == name
    assert row["READY"] == ("7" if kind == "WorkerPool" else "True")
    assert re.fullmatch(r"\d+[smhdy]\d*[smhd]?", row["AGE"]), row


def test_status_is_a_subresource_and_spec_changes_move_the_generation(
    cluster: Cluster, api: Kube
) -> None:
    """Status written through /status does not move metadata.generation and a spec write
    cannot change it; a spec change moves the generation (what observedGeneration follows)."""
    namespace = f"status-{uuid.uuid4().hex[:8]}"
    apply(cluster, orbit_resource("Queue", namespace, "q", {"priority": 1}))
    first = api.orbit("Queue", namespace, "q") or {}
    assert first["metadata"]["generation"] == 1 and "status" not in first

    patched = api.http.patch(
        orbit_path("Queue", namespace, "q", "status"),
        json={"status": {"observedGeneration": 1, "waiting": 3}},
        headers={"Content-Type": "application/merge-patch+json"},
    ).json()
    assert patched["status"]["waiting"] == 3 and patched["metadata"]["generation"] == 1

    # A write of the main resource ignores status.
    api.http.patch(
        orbit_path("Queue", namespace, "q"),
        json={"status": {"waiting": 99}, "metadata": {"labels": {"team": "x"}}},
        headers={"Content-Type": "application/merge-patch+json"},
    ).raise_for_status()
    kept = api.orbit("Queue", namespace, "q") or {}
    assert kept["status"]["waiting"] == 3 and kept["metadata"]["generation"] == 1

    cluster.kubectl(
        "-n", namespace, "patch", "queue", "q", "--type=merge", "-p", '{"spec":{"priority":2}}'
    )
    moved = api.orbit("Queue", namespace, "q") or {}
    assert moved["metadata"]["generation"] == 2 and moved["status"]["waiting"] == 3


def test_a_finalizer_keeps_a_deleted_resource_until_it_is_removed(
    cluster: Cluster, api: Kube
) -> None:
    namespace = f"finalizer-{uuid.uuid4().hex[:8]}"
    queue = orbit_resource("Queue", namespace, "q", {})
    queue["metadata"]["finalizers"] = ["orbit.dev/finalizer"]
    apply(cluster, queue)
    cluster.kubectl("-n", namespace, "delete", "queue", "q", "--wait=false")
    marked = api.orbit("Queue", namespace, "q") or {}
    assert marked["metadata"].get("deletionTimestamp")
    cluster.kubectl(
        "-n",
        namespace,
        "patch",
        "queue",
        "q",
        "--type=merge",
        "-p",
        '{"metadata":{"finalizers":null}}',
    )
    api.wait_gone(ORBIT, "Queue", namespace, "q")


def test_yaml_of_every_example_round_trips_through_the_server(cluster: Cluster) -> None:
    """`kubectl get -o yaml` gives back what was applied (nothing pruned from the examples)."""
    namespace = f"roundtrip-{uuid.uuid4().hex[:8]}"
    for path in EXAMPLES:
        (doc,) = load_yaml_documents(path)
        doc["metadata"]["namespace"] = namespace
        apply(cluster, doc)
        got = yaml.safe_load(
            cluster.kubectl(
                "-n",
                namespace,
                "get",
                f"{plural_of(doc['kind'])}.orbit.dev",
                doc["metadata"]["name"],
                "-o",
                "yaml",
            ).stdout
        )
        assert got["apiVersion"] == ORBIT
        assert got["spec"] == admit(doc)[0]["spec"], path.name
