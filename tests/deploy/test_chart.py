"""The Helm chart (charts/orbit), rendered by the real helm binary and checked offline:
lint, Kubernetes schemas (kubernetes-validate), values.schema.json, and what each object must be."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml

from orbit import __version__
from orbit.reconcile.admission import load_yaml_documents

from .conftest import CHART, KUBERNETES, REPO, Run

NAMESPACE = "orbit-system"
EVERY_OPTION = {
    "crds.install": "true",
    "metrics.serviceMonitor.enabled": "true",
    "metrics.prometheusRule.enabled": "true",
    "metrics.dashboard.enabled": "true",
    "networkPolicy.enabled": "true",
    "server.ingress.enabled": "true",
    "server.ingress.tlsSecretName": "orbit-tls",
    "database.migrationSecret": "orbit-database-admin",
    "operator.namespaces[0]": "shop-*",
    "webhooks.secrets.shop": "orbit-webhooks-shop",
    "webhooks.secrets.billing": "orbit-webhooks-billing",
    "webhooks.allow[0]": "receiver.billing.svc.cluster.local",
    "networkPolicy.egress.enabled": "true",
    "networkPolicy.egress.databaseTo[0].ipBlock.cidr": "10.0.5.10/32",
}
# Kinds of the Prometheus Operator: kubernetes-validate knows only Kubernetes' own schemas.
MONITORING_KINDS = {"ServiceMonitor", "PrometheusRule"}

Doc = dict[str, Any]


def render(helm: Run, values: dict[str, str] | None = None) -> list[Doc]:
    sets = [f"--set={key}={value}" for key, value in (values or {}).items()]
    result = helm(
        "template", "rel", str(CHART), "--namespace", NAMESPACE, "--kube-version", KUBERNETES, *sets
    )
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def one(docs: list[Doc], kind: str, name_suffix: str = "") -> Doc:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, [d["metadata"]["name"] for d in found]
    return found[0]


def containers(docs: list[Doc]) -> list[tuple[str, Doc, Doc]]:
    """(workload name, pod spec, container) for every container the chart runs."""
    found = []
    for doc in docs:
        if doc["kind"] in ("Deployment", "Job"):
            pod = doc["spec"]["template"]["spec"]
            found += [(doc["metadata"]["name"], pod, c) for c in pod["containers"]]
    return found


@pytest.fixture(scope="module")
def default_docs(helm: Run) -> list[Doc]:
    return render(helm)


@pytest.fixture(scope="module")
def full_docs(helm: Run) -> list[Doc]:
    return render(helm, EVERY_OPTION)


def test_helm_lint_strict_passes(helm: Run) -> None:
    result = helm("lint", "--strict", str(CHART))
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


def test_lint_passes_with_every_option_enabled(helm: Run) -> None:
    sets = [f"--set={key}={value}" for key, value in EVERY_OPTION.items()]
    helm("lint", "--strict", str(CHART), *sets)


@pytest.mark.parametrize("docs_fixture", ["default_docs", "full_docs"])
def test_every_rendered_manifest_validates_against_kubernetes(
    docs_fixture: str, request: pytest.FixtureRequest
) -> None:
    docs: list[Doc] = request.getfixturevalue(docs_fixture)
    checked = 0
    for doc in docs:
        if doc["kind"] in MONITORING_KINDS:
            continue  # test_monitoring.py checks these
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)
        checked += 1
    assert checked >= 8


def test_defaults_render_server_operator_migration_and_rbac_but_no_optional_parts(
    default_docs: list[Doc],
) -> None:
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in default_docs)
    assert kinds == [
        ("ClusterRole", "rel-orbit-operator"),
        ("ClusterRoleBinding", "rel-orbit-operator"),
        ("Deployment", "rel-orbit-operator"),
        ("Deployment", "rel-orbit-server"),
        ("Job", "rel-orbit-migrate-1"),
        ("PodDisruptionBudget", "rel-orbit-server"),
        ("Service", "rel-orbit"),
        ("Service", "rel-orbit-operator-metrics"),
        ("ServiceAccount", "rel-orbit-operator"),
        ("ServiceAccount", "rel-orbit-server"),
    ]


def test_every_option_adds_its_objects(full_docs: list[Doc]) -> None:
    kinds = {d["kind"] for d in full_docs}
    assert {
        "CustomResourceDefinition",
        "ServiceMonitor",
        "PrometheusRule",
        "ConfigMap",
        "NetworkPolicy",
        "Ingress",
    } <= kinds


def test_the_database_url_only_ever_comes_from_the_existing_secret(full_docs: list[Doc]) -> None:
    assert not [d for d in full_docs if d["kind"] == "Secret"], "the chart creates no Secret"
    for workload, _pod, container in containers(full_docs):
        (url,) = [e for e in container["env"] if e["name"] == "ORBIT_DATABASE_URL"]
        assert set(url) == {"name", "valueFrom"}, workload
        ref = url["valueFrom"]["secretKeyRef"]
        expected = "orbit-database-admin" if "migrate" in workload else "orbit-database"
        assert ref == {"name": expected, "key": "url"}, workload


def test_migration_job_is_a_pre_install_and_pre_upgrade_hook_running_orbit_admin_migrate(
    default_docs: list[Doc],
) -> None:
    job = one(default_docs, "Job")
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert "before-hook-creation" in annotations["helm.sh/hook-delete-policy"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["admin", "migrate"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_every_container_is_non_root_read_only_without_capabilities_and_has_resources(
    full_docs: list[Doc],
) -> None:
    found = containers(full_docs)
    assert len(found) == 3
    for workload, pod, container in found:
        assert pod["securityContext"]["runAsNonRoot"] is True, workload
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, workload
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True, workload
        assert security["allowPrivilegeEscalation"] is False, workload
        assert security["capabilities"] == {"drop": ["ALL"]}, workload
        assert set(container["resources"]) == {"requests", "limits"}, workload
        assert {"cpu", "memory"} <= set(container["resources"]["requests"]), workload
        assert "memory" in container["resources"]["limits"], workload
        assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"], workload


def test_server_probes_healthz_and_readyz_and_spreads_its_replicas(
    default_docs: list[Doc],
) -> None:
    server = one(default_docs, "Deployment", "-server")
    pod = server["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert server["spec"]["replicas"] >= 2
    assert server["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    assert pod["automountServiceAccountToken"] is False
    pdb = one(default_docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"] == server["spec"]["selector"]


def test_operator_runs_exactly_one_replica_with_the_recreate_strategy(
    default_docs: list[Doc],
) -> None:
    operator = one(default_docs, "Deployment", "-operator")
    assert operator["spec"]["replicas"] == 1
    assert operator["spec"]["strategy"] == {"type": "Recreate"}
    (container,) = operator["spec"]["template"]["spec"]["containers"]
    assert container["args"][0] == "operator"
    assert not [a for a in container["args"] if "peering" in a or "priority" in a]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_operator_replicas_is_not_a_value(helm: Run) -> None:
    result = helm("template", "rel", str(CHART), "--set", "operator.replicas=2", check=False)
    assert result.returncode != 0
    assert "replicas" in result.stderr


def test_workers_are_given_this_releases_service_url(default_docs: list[Doc]) -> None:
    operator = one(default_docs, "Deployment", "-operator")
    (container,) = operator["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ORBIT_SERVER_URL"] == f"http://rel-orbit.{NAMESPACE}.svc:8080"


def test_operator_cluster_role_is_the_reviewed_rbac_file(default_docs: list[Doc]) -> None:
    (role,) = [
        d
        for d in load_yaml_documents(CHART / "files" / "operator-rbac.yaml")
        if d["kind"] == "ClusterRole"
    ]
    assert one(default_docs, "ClusterRole")["rules"] == role["rules"]
    binding = one(default_docs, "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "rel-orbit-operator", "namespace": NAMESPACE}
    ]


def test_crds_are_not_installed_unless_asked(default_docs: list[Doc]) -> None:
    assert not [d for d in default_docs if d["kind"] == "CustomResourceDefinition"]


def test_crds_are_the_repositorys_crds_kept_on_uninstall(full_docs: list[Doc]) -> None:
    rendered = {
        d["metadata"]["name"]: d for d in full_docs if d["kind"] == "CustomResourceDefinition"
    }
    sources = {}
    for path in sorted((REPO / "crds").glob("*.yaml")):
        (crd,) = load_yaml_documents(path)
        sources[crd["metadata"]["name"]] = crd
    assert sorted(rendered) == sorted(sources)
    for name, crd in rendered.items():
        assert crd["spec"] == sources[name]["spec"], name
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_crds_can_be_left_to_helm_on_uninstall(helm: Run) -> None:
    docs = render(helm, {"crds.install": "true", "crds.keep": "false"})
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    assert crds
    for crd in crds:
        assert "helm.sh/resource-policy" not in (crd["metadata"].get("annotations") or {})


def test_disabling_the_operator_drops_it_and_cluster_mode(helm: Run) -> None:
    docs = render(helm, {"operator.enabled": "false"})
    assert not [d for d in docs if "operator" in d["metadata"]["name"]]
    (container,) = one(docs, "Deployment", "-server")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ORBIT_REQUIRE_REGISTERED_PODS"] == "false"


def test_network_policies_admit_only_the_declared_peers_on_the_served_ports(
    full_docs: list[Doc],
) -> None:
    policies = {d["metadata"]["name"]: d for d in full_docs if d["kind"] == "NetworkPolicy"}
    server = policies["rel-orbit-server"]["spec"]
    assert server["policyTypes"] == ["Ingress", "Egress"]
    assert server["ingress"][0]["ports"] == [{"port": "http", "protocol": "TCP"}]
    operator = policies["rel-orbit-operator"]["spec"]
    assert {p["port"] for p in operator["ingress"][0]["ports"]} == {"metrics", "liveness"}


def test_default_image_is_the_one_the_dockerfile_and_e2e_script_build(
    default_docs: list[Doc],
) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == __version__
    image = f"orbit:{__version__}"
    for _workload, _pod, container in containers(default_docs):
        assert container["image"] == image
    assert 'docker build -t "$IMAGE"' in (REPO / "scripts" / "e2e-kind.sh").read_text()
    assert 'IMAGE="orbit:' in (REPO / "scripts" / "e2e-kind.sh").read_text()


def test_notes_tell_the_user_what_to_do_next(helm: Run) -> None:
    result = helm("install", "rel", str(CHART), "--dry-run=client", "--namespace", NAMESPACE)
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "create secret generic orbit-database" in notes
    assert "rollout status deployment/rel-orbit-server" in notes
    assert "crds.install=true" in notes


# --- values.schema.json ------------------------------------------------------------------------

BAD_VALUES = {
    "a string where a number goes": ("server.replicas=two", "replicas"),
    "zero server replicas": ("server.replicas=0", "replicas"),
    "an unknown value (typo)": ("server.replica=2", "replica"),
    "an unknown pull policy": ("image.pullPolicy=Sometimes", "pullPolicy"),
    "no database Secret": ("database.existingSecret=", "existingSecret"),
    "a database URL in plain values": ("database.url=mysql://x", "url"),
    "a bad log level": ("server.logLevel=LOUD", "logLevel"),
    "a port out of range": ("operator.metricsPort=70000", "metricsPort"),
    "a bad interval": ("metrics.serviceMonitor.interval=often", "interval"),
}


@pytest.mark.parametrize("setting, field", BAD_VALUES.values(), ids=list(BAD_VALUES))
def test_values_schema_rejects_a_bad_value(helm: Run, setting: str, field: str) -> None:
    result = helm("template", "rel", str(CHART), "--set", setting, check=False)
    assert result.returncode != 0, f"{setting} was accepted"
    assert "values don't meet the specifications of the schema" in result.stderr
    assert field in result.stderr


def test_values_schema_describes_every_default_value() -> None:
    """Every key of values.yaml is declared in the schema (which forbids undeclared keys)."""
    import json

    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def undeclared(value: Any, node: dict[str, Any], path: str) -> list[str]:
        if not isinstance(value, dict) or "properties" not in node:
            return []
        missing = []
        for key, child in value.items():
            if key not in node["properties"]:
                missing.append(f"{path}{key}")
            else:
                missing += undeclared(child, node["properties"][key], f"{path}{key}.")
        return missing

    assert undeclared(values, schema, "") == []
    assert schema.get("additionalProperties") is False


def test_server_workers_value_becomes_the_servers_workers_option(
    helm: Run, default_docs: list[Doc]
) -> None:
    def args(docs: list[Doc]) -> list[str]:
        (container,) = one(docs, "Deployment", "-server")["spec"]["template"]["spec"]["containers"]
        return list(container["args"])

    assert "--workers=1" in args(default_docs)
    assert "--workers=4" in args(render(helm, {"server.workers": "4"}))
    assert "--workers=auto" in args(render(helm, {"server.workers": "auto"}))
    refused = helm("template", "rel", str(CHART), "--set", "server.workers=0", check=False)
    assert refused.returncode != 0 and "workers" in refused.stderr


# --- security defaults ---------------------------------------------------------------------------


def env_of(container: Doc) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def secret_ref(value: Any) -> tuple[str, str]:
    ref = value["secretKeyRef"]
    return ref["name"], ref["key"]


def test_a_default_install_migrates_as_the_admin_user_and_grants_the_servers_own_user(
    default_docs: list[Doc],
) -> None:
    """Seed §2, invariant 8: in a default install the server and the operator run as a user
    the migration hook created with INSERT/SELECT only on audit_log (tests/schema/test_grants.py and
    tests/e2e/security/test_least_privilege.py show the hook does that on MariaDB)."""
    envs = {workload: env_of(c) for workload, _pod, c in containers(default_docs)}
    job = envs["rel-orbit-migrate-1"]
    assert secret_ref(job["ORBIT_DATABASE_URL"]) == ("orbit-database-admin", "url")
    assert secret_ref(job["ORBIT_RUNTIME_DATABASE_URL"]) == ("orbit-database", "url")
    assert job["ORBIT_RUNTIME_USER_HOST"] == "%"
    for workload in ("rel-orbit-server", "rel-orbit-operator"):
        assert secret_ref(envs[workload]["ORBIT_DATABASE_URL"]) == ("orbit-database", "url")
        assert "ORBIT_RUNTIME_DATABASE_URL" not in envs[workload]


def test_a_one_user_install_is_refused_unless_accepted_and_then_the_notes_say_the_cost(
    helm: Run,
) -> None:
    refused = helm("template", "rel", str(CHART), "--set", "database.migrationSecret=", check=False)
    assert refused.returncode != 0
    assert "can UPDATE and DELETE audit rows" in refused.stderr
    assert "database.singleUser=true" in refused.stderr
    both = ["--set", "database.singleUser=true"]
    assert helm("template", "rel", str(CHART), *both, check=False).returncode != 0

    accepted = ["--set", "database.migrationSecret=", *both]
    docs = render(helm, {"database.migrationSecret": "", "database.singleUser": "true"})
    job = env_of(next(c for w, _p, c in containers(docs) if "migrate" in w))
    assert secret_ref(job["ORBIT_DATABASE_URL"]) == ("orbit-database", "url")
    assert "ORBIT_RUNTIME_DATABASE_URL" not in job
    result = helm("install", "rel", str(CHART), "--dry-run=client", *accepted)
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "WARNING: database.singleUser=true" in notes
    assert "UPDATEing or DELETEing audit rows" in notes


def test_each_namespaces_webhook_secrets_are_mounted_in_its_own_folder(
    full_docs: list[Doc],
) -> None:
    server = one(full_docs, "Deployment", "-server")["spec"]["template"]["spec"]
    (container,) = server["containers"]
    volumes = {v["name"]: v for v in server["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    for namespace in ("shop", "billing"):
        mount = mounts[f"/etc/orbit/webhook-secrets/{namespace}"]
        assert mount["readOnly"] is True
        secret = volumes[mount["name"]]["secret"]["secretName"]
        assert secret == f"orbit-webhooks-{namespace}"
    assert env_of(container)["ORBIT_WEBHOOK_SECRETS_DIR"] == "/etc/orbit/webhook-secrets"


def test_the_webhook_allow_list_and_the_payload_limit_reach_the_processes(
    helm: Run, full_docs: list[Doc], default_docs: list[Doc]
) -> None:
    envs = {w: env_of(c) for w, _p, c in containers(full_docs)}
    assert envs["rel-orbit-server"]["ORBIT_WEBHOOK_ALLOW"] == "receiver.billing.svc.cluster.local"
    defaults = {w: env_of(c) for w, _p, c in containers(default_docs)}
    assert "ORBIT_WEBHOOK_ALLOW" not in defaults["rel-orbit-server"], "nothing allowed by default"
    assert "ORBIT_WEBHOOK_SECRETS_DIR" not in defaults["rel-orbit-server"]
    raised = {w: env_of(c) for w, _p, c in containers(render(helm, {"maxPayloadBytes": "4194304"}))}
    for workload in ("rel-orbit-server", "rel-orbit-operator"):
        assert defaults[workload]["ORBIT_MAX_PAYLOAD_BYTES"] == "1048576"
        assert raised[workload]["ORBIT_MAX_PAYLOAD_BYTES"] == "4194304"


def test_the_egress_policy_admits_dns_the_database_and_public_receivers_only(
    helm: Run, full_docs: list[Doc]
) -> None:
    policy = one(full_docs, "NetworkPolicy", "-server")["spec"]
    dns, database, webhooks = policy["egress"]
    assert {p["port"] for p in dns["ports"]} == {53}
    assert database["to"] == [{"ipBlock": {"cidr": "10.0.5.10/32"}}]
    assert database["ports"] == [{"port": 3306, "protocol": "TCP"}]
    (receivers,) = webhooks["to"]
    assert receivers["ipBlock"]["cidr"] == "0.0.0.0/0"
    assert {"10.0.0.0/8", "169.254.0.0/16", "127.0.0.0/8"} <= set(receivers["ipBlock"]["except"])
    sets = ["--set", "networkPolicy.enabled=true", "--set", "networkPolicy.egress.enabled=true"]
    refused = helm("template", "rel", str(CHART), *sets, check=False)
    assert refused.returncode != 0 and "networkPolicy.egress.databaseTo" in refused.stderr


def test_the_operator_knows_its_own_namespace_for_the_reserved_system_namespace(
    default_docs: list[Doc],
) -> None:
    """orbit/reconcile/reserved.py: the operator declares resources in orbit-system only when
    it runs there; the chart tells it where it runs."""
    (container,) = one(default_docs, "Deployment", "-operator")["spec"]["template"]["spec"][
        "containers"
    ]
    own = env_of(container)["ORBIT_OPERATOR_NAMESPACE"]
    assert own == {"fieldRef": {"fieldPath": "metadata.namespace"}}
