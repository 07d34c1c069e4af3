"""The CustomResourceDefinitions, their examples, the refused manifests and the operator's RBAC.

Offline and fast: CRDs are checked with kubernetes-validate, custom resources with crd_schema (which
defaults, validates and evaluates CEL rules as the API server would; the operator and `orbit
apply` admit with it). The real API server judges the same CRDs and manifests, and holds
crd_schema to its verdicts, in tests/kube/test_api_server.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from orbit.reconcile import admission as crd_schema
from orbit.reconcile.admission import (
    Refusal,
    admit,
    crds,
    load_yaml_documents,
    schema_of,
    version_of,
)

REPO = Path(__file__).resolve().parents[2]

KINDS = ["Queue", "Quota", "Credential", "WorkerPool", "Schedule", "WorkflowDefinition"]
EXAMPLES = REPO / "examples" / "manifests"
INVALID = Path(__file__).parent / "invalid"
RBAC = REPO / "charts" / "orbit" / "files" / "operator-rbac.yaml"
DOCS = REPO / "docs" / "reference" / "crds.md"
KUBERNETES = "1.33"

CRD_FILES = sorted((REPO / "crds").glob("*.yaml"))
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))
INVALID_FILES = sorted(INVALID.glob("*.yaml"))


def by_name(paths: list[Path]) -> dict[str, Any]:
    return {"argvalues": paths, "ids": [p.name for p in paths]}


def refusals_of(name: str) -> list[Refusal]:
    (doc,) = load_yaml_documents(INVALID / name)
    return admit(doc)[1]


def assert_refused_once(name: str, *, by: str, at: str, says: str) -> None:
    """The manifest is refused for exactly one reason, the one the test names."""
    refusals = refusals_of(name)
    assert len(refusals) == 1, [str(r) for r in refusals]
    (refusal,) = refusals
    assert (refusal.by, refusal.path) == (by, at), str(refusal)
    assert says in refusal.message, str(refusal)


def minimal(kind: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "orbit.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": "shop"},
        "spec": spec,
    }


WORKERPOOL = {"queues": ["emails"], "image": "shop/workers:1", "module": "shop.workers:worker"}


# --- (a) the CRDs themselves -------------------------------------------------------------------


def test_there_is_one_crd_per_kind() -> None:
    assert sorted(crds()) == sorted(KINDS)
    assert len(CRD_FILES) == len(KINDS)


@pytest.mark.parametrize("path", **by_name(CRD_FILES))
def test_crd_is_valid_for_kubernetes_1_33(path: Path) -> None:
    for doc in load_yaml_documents(path):
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)


@pytest.mark.parametrize("kind", KINDS)
def test_crd_is_namespaced_in_group_orbit_dev_and_listed_by_kubectl_get_orbit(kind: str) -> None:
    crd = crds()[kind]
    names = crd["spec"]["names"]
    assert crd["metadata"]["name"] == f"{names['plural']}.orbit.dev"
    assert crd["spec"]["group"] == "orbit.dev"
    assert crd["spec"]["scope"] == "Namespaced"
    assert names["categories"] == ["orbit"]
    assert names["shortNames"]
    assert [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]] == [
        ("v1alpha1", True, True)
    ]


def test_short_names_are_unique_and_shadow_no_builtin_short_name() -> None:
    builtin = {"quota", "q", "po", "deploy", "cm", "ns", "sa", "svc", "rs", "ds", "pv", "pvc"}
    short = [s for crd in crds().values() for s in crd["spec"]["names"]["shortNames"]]
    assert len(short) == len(set(short))
    assert not set(short) & builtin


@pytest.mark.parametrize("kind", KINDS)
def test_crd_has_status_subresource_with_observed_generation_and_conditions(kind: str) -> None:
    version = version_of(crds()[kind])
    assert version["subresources"] == {"status": {}}
    status = schema_of(kind)["properties"]["status"]["properties"]
    assert status["observedGeneration"]["type"] == "integer"
    assert status["conditions"]["type"] == "array"


@pytest.mark.parametrize("kind", KINDS)
def test_conditions_have_the_metav1_condition_shape(kind: str) -> None:
    conditions = schema_of(kind)["properties"]["status"]["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    item = conditions["items"]
    assert set(item["properties"]) == {
        "type",
        "status",
        "reason",
        "message",
        "lastTransitionTime",
        "observedGeneration",
    }
    assert set(item["required"]) == {"type", "status", "reason", "message", "lastTransitionTime"}
    assert item["properties"]["status"]["enum"] == ["True", "False", "Unknown"]
    assert item["properties"]["lastTransitionTime"]["format"] == "date-time"
    assert item["properties"]["observedGeneration"]["type"] == "integer"


def test_every_kind_declares_the_same_conditions() -> None:
    shapes = {
        kind: schema_of(kind)["properties"]["status"]["properties"]["conditions"] for kind in KINDS
    }
    assert all(shape == shapes["Queue"] for shape in shapes.values())


@pytest.mark.parametrize("kind", KINDS)
def test_schema_is_structural_every_field_has_a_type(kind: str) -> None:
    untyped = [
        path
        for path, node in crd_schema.walk(schema_of(kind))
        if "type" not in node and not node.get("x-kubernetes-int-or-string")
    ]
    assert untyped == []


@pytest.mark.parametrize("kind", KINDS)
def test_every_default_is_valid_for_its_field(kind: str) -> None:
    for path, node in crd_schema.walk(schema_of(kind)):
        if "default" in node:
            default = crd_schema.apply_defaults(node, node["default"])
            validator = jsonschema.Draft4Validator(crd_schema.to_json_schema(node))
            assert not list(validator.iter_errors(default)), path


@pytest.mark.parametrize("kind", KINDS)
def test_every_default_passes_its_cel_rules_as_written(kind: str) -> None:
    """The API server evaluates a node's CEL rules on its literal `default`, nested defaults not
    filled in: `default: {}` on an object whose rule reads its fields refuses the whole CRD."""
    for path, node in crd_schema.walk(schema_of(kind)):
        if "default" in node:
            refusals = crd_schema.cel_refusals(node, node["default"])
            assert refusals == [], (path, [str(r) for r in refusals])


@pytest.mark.parametrize("kind", KINDS)
def test_every_cel_rule_compiles_and_has_a_message(kind: str) -> None:
    rules = list(crd_schema.cel_rules(schema_of(kind)))
    assert rules, f"{kind} has no CEL rule: the loop below would check nothing"
    for rule in rules:
        crd_schema.compile_rule(rule.rule)
        assert not rule.message.startswith("failed rule"), rule.rule


def test_cross_field_rules_are_cel_rules_where_the_spec_says() -> None:
    where = {
        kind: sorted(rule.path for rule in crd_schema.cel_rules(schema_of(kind))) for kind in KINDS
    }
    # "" is the root rule every kind has: metadata.name is a DNS label (Orbit's naming rule)
    assert where == {
        "Queue": ["", "spec.retry.backoff"],
        "Quota": ["", "spec"],
        "Credential": [""],
        "WorkerPool": ["", "spec", "spec.autoscaling", "spec.autoscaling"],
        "Schedule": ["", "spec", "spec"],
        "WorkflowDefinition": ["", "spec.steps[]", "spec.steps[].sleep"],
    }


# --- (b) the examples are accepted -------------------------------------------------------------


def test_every_kind_has_an_example_named_by_kind() -> None:
    kinds = {doc["kind"] for path in EXAMPLE_FILES for doc in load_yaml_documents(path)}
    assert kinds == set(KINDS)
    for path in EXAMPLE_FILES:
        for doc in load_yaml_documents(path):
            assert path.name.startswith(doc["kind"].lower() + "-"), path.name


@pytest.mark.parametrize("path", **by_name(EXAMPLE_FILES))
def test_example_is_accepted_with_defaults_and_cel_rules(path: Path) -> None:
    for doc in load_yaml_documents(path):
        # none: kubectl puts them in its namespace, orbit apply in its context's (README)
        assert "namespace" not in doc["metadata"]
        _, refusals = admit(doc)
        assert refusals == [], [str(r) for r in refusals]


def test_queue_without_spec_gets_the_documented_defaults() -> None:
    obj = minimal("Queue")
    del obj["spec"]
    defaulted, refusals = admit(obj)
    assert refusals == []
    assert defaulted["spec"] == {
        "paused": False,
        "priority": 0,
        "retry": {
            "maxAttempts": 3,
            "backoff": {"initialSeconds": 1, "maxSeconds": 300, "multiplier": 2.0},
        },
        "leaseSeconds": 30,
        "safetyDefault": "safe",
        "deletionPolicy": "Block",
    }


def test_queue_with_initial_backoff_above_default_max_is_refused() -> None:
    _, refusals = admit(minimal("Queue", retry={"backoff": {"initialSeconds": 600}}))
    assert [(r.by, r.path) for r in refusals] == [("cel", "spec.retry.backoff.maxSeconds")]


def test_queue_with_integer_and_fractional_backoff_is_accepted() -> None:
    backoff = {"initialSeconds": 0.5, "maxSeconds": 1, "multiplier": 1}
    assert admit(minimal("Queue", retry={"backoff": backoff}))[1] == []


def test_quota_for_the_whole_namespace_is_accepted_and_burst_defaults_to_one() -> None:
    defaulted, refusals = admit(minimal("Quota", submitRate={"perSecond": 0.5}))
    assert refusals == []
    assert defaulted["spec"] == {"submitRate": {"perSecond": 0.5, "burst": 1}}


def test_credential_key_defaults_to_token() -> None:
    defaulted, refusals = admit(
        minimal("Credential", secretRef={"name": "t"}, roles=["submit", "review"])
    )
    assert refusals == []
    assert defaulted["spec"]["secretRef"] == {"name": "t", "key": "token"}


def test_workerpool_defaults_to_sixteen_attempts_per_pod_without_autoscaling() -> None:
    defaulted, refusals = admit(minimal("WorkerPool", **WORKERPOOL))
    assert refusals == []
    assert defaulted["spec"]["concurrency"] == 16
    assert "autoscaling" not in defaulted["spec"]
    assert "replicas" not in defaulted["spec"]


def test_workerpool_autoscaling_fields_get_defaults() -> None:
    defaulted, refusals = admit(
        minimal("WorkerPool", **WORKERPOOL, autoscaling={"enabled": True, "maxReplicas": 4})
    )
    assert refusals == []
    assert defaulted["spec"]["autoscaling"] == {
        "enabled": True,
        "minReplicas": 1,
        "maxReplicas": 4,
        "targetBacklogPerWorker": 10,
        "cooldownSeconds": 60,
    }


def test_workerpool_with_fixed_replicas_and_disabled_autoscaling_is_accepted() -> None:
    spec = dict(WORKERPOOL, replicas=3, autoscaling={"enabled": False})
    assert admit(minimal("WorkerPool", **spec))[1] == []


def test_workerpool_may_scale_to_zero() -> None:
    spec = dict(WORKERPOOL, autoscaling={"enabled": True, "minReplicas": 0, "maxReplicas": 5})
    assert admit(minimal("WorkerPool", **spec))[1] == []


def test_schedule_gets_cronjob_like_defaults() -> None:
    defaulted, refusals = admit(
        minimal("Schedule", schedule="0 9 * * MON-FRI", taskTemplate={"handler": "reports.daily"})
    )
    assert refusals == []
    assert defaulted["spec"] == {
        "schedule": "0 9 * * MON-FRI",
        "timeZone": "UTC",
        "suspend": False,
        "concurrencyPolicy": "Allow",
        "misfirePolicy": "FireOnce",
        "catchUpLimit": 1,
        "taskTemplate": {"handler": "reports.daily", "queue": "default", "params": {}},
    }


def test_schedule_with_bounds_in_order_is_accepted() -> None:
    spec = {
        "schedule": "@daily",
        "startAt": "2026-01-01T00:00:00Z",
        "endAt": "2026-02-01T00:00:00+01:00",
        "misfirePolicy": "CatchUp",
        "catchUpLimit": 5,
        "taskTemplate": {"handler": "h", "params": {"nested": {"any": [1, 2]}}},
    }
    assert admit(minimal("Schedule", **spec))[1] == []


def test_workerpool_template_keeps_any_pod_template_field() -> None:
    template = {"spec": {"nodeSelector": {"pool": "batch"}, "priorityClassName": "low"}}
    defaulted, refusals = admit(minimal("WorkerPool", **WORKERPOOL, template=template))
    assert refusals == []
    assert defaulted["spec"]["template"] == template


# --- (c) the invalid manifests are refused, each for its own reason ----------------------------


def test_queue_with_max_backoff_below_initial_is_refused() -> None:
    assert_refused_once(
        "queue-max-backoff-below-initial.yaml",
        by="cel",
        at="spec.retry.backoff.maxSeconds",
        says="maxSeconds must be greater than or equal to initialSeconds",
    )


def test_queue_with_unknown_safety_default_is_refused() -> None:
    assert_refused_once(
        "queue-unknown-safety-default.yaml",
        by="schema",
        at="spec.safetyDefault",
        says="'maybe' is not one of ['safe', 'unsafe']",
    )


def test_queue_with_lease_below_five_seconds_is_refused() -> None:
    assert_refused_once(
        "queue-lease-below-minimum.yaml",
        by="schema",
        at="spec.leaseSeconds",
        says="less than the minimum of 5",
    )


def test_queue_with_misspelled_field_is_refused() -> None:
    assert_refused_once(
        "queue-misspelled-field.yaml", by="schema", at="spec", says="'leaseSecond' was unexpected"
    )


def test_quota_without_any_limit_is_refused() -> None:
    assert_refused_once(
        "quota-without-any-limit.yaml",
        by="cel",
        at="spec",
        says="at least one of maxWaiting, maxRunning or submitRate",
    )


def test_quota_with_negative_max_running_is_refused() -> None:
    assert_refused_once(
        "quota-negative-max-running.yaml",
        by="schema",
        at="spec.maxRunning",
        says="less than the minimum of 0",
    )


def test_quota_with_zero_submit_rate_is_refused() -> None:
    assert_refused_once(
        "quota-zero-submit-rate.yaml",
        by="schema",
        at="spec.submitRate.perSecond",
        says="less than or equal to the minimum of 0",
    )


def test_credential_without_secret_ref_is_refused() -> None:
    assert_refused_once(
        "credential-without-secret-ref.yaml",
        by="schema",
        at="spec",
        says="'secretRef' is a required property",
    )


def test_credential_with_unknown_role_is_refused() -> None:
    assert_refused_once(
        "credential-unknown-role.yaml",
        by="schema",
        at="spec.roles.1",
        says="'superuser' is not one of ['read', 'submit', 'work', 'review', 'admin']",
    )


def test_credential_without_roles_is_refused() -> None:
    assert_refused_once(
        "credential-without-roles.yaml", by="schema", at="spec.roles", says="should be non-empty"
    )


def test_credential_with_duplicate_role_is_refused() -> None:
    assert_refused_once(
        "credential-duplicate-role.yaml",
        by="schema",
        at="spec.roles",
        says="has non-unique elements",
    )


def test_workerpool_with_max_replicas_below_min_is_refused() -> None:
    assert_refused_once(
        "workerpool-max-below-min-replicas.yaml",
        by="cel",
        at="spec.autoscaling.maxReplicas",
        says="maxReplicas must be greater than or equal to minReplicas",
    )


def test_workerpool_with_replicas_and_autoscaling_enabled_is_refused() -> None:
    assert_refused_once(
        "workerpool-replicas-with-autoscaling.yaml",
        by="cel",
        at="spec.replicas",
        says="set either replicas or autoscaling.enabled, not both",
    )


def test_workerpool_with_autoscaling_but_no_max_replicas_is_refused() -> None:
    assert_refused_once(
        "workerpool-autoscaling-without-max.yaml",
        by="cel",
        at="spec.autoscaling.maxReplicas",
        says="maxReplicas is required when autoscaling is enabled",
    )


def test_workerpool_without_image_is_refused() -> None:
    assert_refused_once(
        "workerpool-without-image.yaml",
        by="schema",
        at="spec",
        says="'image' is a required property",
    )


def test_workerpool_with_module_without_attribute_is_refused() -> None:
    assert_refused_once(
        "workerpool-module-without-attribute.yaml",
        by="schema",
        at="spec.module",
        says="'shop.workers' does not match",
    )


def test_workerpool_with_concurrency_above_1024_is_refused() -> None:
    assert_refused_once(
        "workerpool-concurrency-above-maximum.yaml",
        by="schema",
        at="spec.concurrency",
        says="greater than the maximum of 1024",
    )


def test_workerpool_without_queues_is_refused() -> None:
    assert_refused_once(
        "workerpool-without-queues.yaml",
        by="schema",
        at="spec.queues",
        says="should be non-empty",
    )


def test_schedule_with_catch_up_limit_but_another_misfire_policy_is_refused() -> None:
    assert_refused_once(
        "schedule-catch-up-limit-without-catch-up.yaml",
        by="cel",
        at="spec.catchUpLimit",
        says="catchUpLimit only applies with misfirePolicy CatchUp",
    )


def test_schedule_ending_before_it_starts_is_refused() -> None:
    assert_refused_once(
        "schedule-end-before-start.yaml",
        by="cel",
        at="spec.endAt",
        says="endAt must be later than startAt",
    )


def test_schedule_with_unknown_concurrency_policy_is_refused() -> None:
    assert_refused_once(
        "schedule-unknown-concurrency-policy.yaml",
        by="schema",
        at="spec.concurrencyPolicy",
        says="'Skip' is not one of ['Allow', 'Forbid', 'Replace']",
    )


def test_schedule_without_task_template_is_refused() -> None:
    assert_refused_once(
        "schedule-without-task-template.yaml",
        by="schema",
        at="spec",
        says="'taskTemplate' is a required property",
    )


def test_workflowdefinition_step_with_two_kinds_is_refused() -> None:
    assert_refused_once(
        "workflowdefinition-step-with-two-kinds.yaml",
        by="cel",
        at="spec.steps[0]",
        says="exactly one of task, wait, sleep or poll",
    )


def test_workflowdefinition_wait_without_signal_is_refused() -> None:
    assert_refused_once(
        "workflowdefinition-wait-without-signal.yaml",
        by="schema",
        at="spec.steps.1.wait",
        says="'signal' is a required property",
    )


def test_workflowdefinition_sleep_with_seconds_and_until_is_refused() -> None:
    assert_refused_once(
        "workflowdefinition-sleep-seconds-and-until.yaml",
        by="cel",
        at="spec.steps[0].sleep",
        says="exactly one of seconds or until",
    )


def test_workflowdefinition_step_name_that_cel_cannot_read_is_refused() -> None:
    assert_refused_once(
        "workflowdefinition-step-name-with-dash.yaml",
        by="schema",
        at="spec.steps.0.name",
        says="does not match",
    )


def test_workflowdefinition_defaults_fill_policies_and_queues() -> None:
    doc = minimal(
        "WorkflowDefinition",
        steps=[
            {"name": "a", "task": {"handler": "h"}},
            {"name": "w", "dependsOn": ["a"], "wait": {"signal": "go"}},
        ],
    )
    admitted, refusals = admit(doc)
    assert refusals == []
    first, second = admitted["spec"]["steps"]
    assert (first["onFailure"], first["task"]["queue"]) == ("fail", "default")
    assert second["wait"]["onTimeout"] == "fail"


def test_every_kind_has_invalid_manifests() -> None:
    kinds = {doc["kind"] for path in INVALID_FILES for doc in load_yaml_documents(path)}
    assert kinds == set(KINDS)


@pytest.mark.parametrize("path", **by_name(INVALID_FILES))
def test_invalid_manifest_is_refused(path: Path) -> None:
    (doc,) = load_yaml_documents(path)
    assert admit(doc)[1], f"{path.name} was accepted"


@pytest.mark.parametrize("path", **by_name(INVALID_FILES))
def test_invalid_manifest_says_what_is_wrong_and_has_a_named_test(path: Path) -> None:
    first_line = path.read_text().splitlines()[0]
    assert re.match(r"# INVALID \([^)]+\): \S", first_line), first_line
    assert f'"{path.name}"' in Path(__file__).read_text(), f"no test names {path.name}"


# --- (d) printer columns -----------------------------------------------------------------------

COLUMNS = {
    "Queue": ["Waiting", "Running", "Paused", "Ready", "Age"],
    "Quota": ["Queue", "Max-Waiting", "Max-Running", "Ready", "Age"],
    "Credential": ["Secret", "Roles", "Ready", "Age"],
    "WorkerPool": ["Ready", "Workers", "Backlog", "Age"],
    "Schedule": ["Schedule", "TimeZone", "Suspend", "Last", "Next", "Ready", "Age"],
    "WorkflowDefinition": ["Latest", "Running", "Ready", "Age"],
}
READY_CONDITION = '.status.conditions[?(@.type=="Ready")].status'
# WorkerPool's Ready counts ready pods, as a Deployment's READY column does; elsewhere it is
# the Ready condition.
READY_PATHS = {kind: READY_CONDITION for kind in KINDS} | {"WorkerPool": ".status.readyReplicas"}
OBJECT_META = {".metadata.creationTimestamp": "date", ".metadata.name": "string"}


@pytest.mark.parametrize("kind", KINDS)
def test_printer_columns_are_the_documented_ones(kind: str) -> None:
    columns = version_of(crds()[kind])["additionalPrinterColumns"]
    assert [c["name"] for c in columns] == COLUMNS[kind]
    by_name_ = {c["name"]: c for c in columns}
    assert by_name_["Age"]["jsonPath"] == ".metadata.creationTimestamp"
    assert by_name_["Ready"]["jsonPath"] == READY_PATHS[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_printer_columns_point_at_fields_in_the_schema(kind: str) -> None:
    for column in version_of(crds()[kind])["additionalPrinterColumns"]:
        path = column["jsonPath"]
        if path.startswith(".metadata."):
            assert OBJECT_META.get(path) == column["type"], column
            continue
        node = crd_schema.resolve_json_path(schema_of(kind), path)
        expected = {"integer": "integer", "boolean": "boolean", "number": "number"}
        allowed = {expected.get(node["type"], "string")}
        if node.get("format") == "date-time":
            allowed.add("date")  # kubectl shows the age
        assert column["type"] in allowed, column


def test_printer_column_path_to_a_missing_field_is_noticed() -> None:
    with pytest.raises(KeyError):
        crd_schema.resolve_json_path(schema_of("Queue"), ".status.backlog")
    with pytest.raises(KeyError):
        crd_schema.resolve_json_path(schema_of("Queue"), READY_CONDITION.replace("type", "kind"))


# --- (e) the operator's RBAC -------------------------------------------------------------------


def rbac_docs() -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in load_yaml_documents(RBAC)}


def grants() -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rbac_docs()["ClusterRole"]["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def expected_grants() -> set[tuple[str, str, str]]:
    wanted: set[tuple[str, str, str]] = set()

    def grant(group: str, resources: list[str], verbs: str) -> None:
        wanted.update((group, r, v) for r in resources for v in verbs.split())

    plurals = [crd["spec"]["names"]["plural"] for crd in crds().values()]
    grant("orbit.dev", plurals, "get list watch patch update")
    grant("orbit.dev", [f"{p}/status" for p in plurals], "get list watch patch update")
    grant("orbit.dev", [f"{p}/finalizers" for p in plurals], "update")
    grant("apps", ["deployments"], "get list watch create patch update delete")
    grant("", ["pods"], "get list watch")
    grant("", ["secrets"], "get")  # by name, the Secret a Credential names; never list or watch
    grant("", ["events"], "create")
    grant("", ["namespaces"], "list watch")
    grant("apiextensions.k8s.io", ["customresourcedefinitions"], "list watch")
    return wanted


def test_operator_rbac_is_a_service_account_cluster_role_and_binding_valid_for_1_33() -> None:
    docs = load_yaml_documents(RBAC)
    assert sorted(doc["kind"] for doc in docs) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "ServiceAccount",
    ]
    for doc in docs:
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)


def test_operator_rbac_grants_no_wildcards() -> None:
    for rule in rbac_docs()["ClusterRole"]["rules"]:
        assert "*" not in rule["verbs"], rule
        assert "*" not in rule["resources"], rule
        assert "*" not in rule["apiGroups"], rule
        assert not any("*" in r for r in rule["resources"]), rule
        assert "resourceNames" not in rule and "nonResourceURLs" not in rule, rule


def test_operator_rbac_grants_exactly_what_the_operator_needs() -> None:
    assert grants() - expected_grants() == set(), "granted but not needed"
    assert expected_grants() - grants() == set(), "needed but not granted"


def test_operator_rbac_binds_the_cluster_role_to_the_service_account() -> None:
    docs = rbac_docs()
    account = docs["ServiceAccount"]["metadata"]
    binding = docs["ClusterRoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": docs["ClusterRole"]["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    ]


def test_every_rbac_rule_has_a_comment_saying_why() -> None:
    lines = RBAC.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("  - apiGroups:")]
    assert len(starts) == len(rbac_docs()["ClusterRole"]["rules"])
    for i in starts:
        assert lines[i - 1].lstrip().startswith("#"), f"rule at line {i + 1} has no comment"


# --- the reference documentation -----------------------------------------------------------------


def documented_fields(kind: str) -> list[str]:
    """Every spec and status field of the kind, as dotted paths (condition fields excluded)."""
    paths = []
    for path, _node in crd_schema.walk(schema_of(kind)):
        top = path.split(".")[0]
        if top not in ("spec", "status") or path in ("spec", "status"):
            continue
        if path.startswith("status.conditions[]") or path.endswith("[]"):
            continue
        if path.startswith("spec.template."):
            continue
        paths.append(path)
    return paths


@pytest.mark.parametrize("kind", KINDS)
def test_reference_documents_every_field(kind: str) -> None:
    text = DOCS.read_text()
    assert f"## {kind}" in text
    missing = [p for p in documented_fields(kind) if f"`{p}`" not in text]
    assert missing == []


def test_reference_explains_the_ready_reasons_and_kubectl_get_orbit() -> None:
    text = DOCS.read_text()
    for reason in ("Reconciled", "InvalidSpec", "DatabaseUnavailable", "HasUnfinishedTasks"):
        assert f"`{reason}`" in text, reason
    assert "`SecretNotFound`" in text
    assert "kubectl get orbit" in text
