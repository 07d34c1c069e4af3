#!/usr/bin/env bash
# End to end on a throw-away kind cluster, for a machine with Docker, kind, kubectl and helm.
# NOT run by this repository's CI (there is no Docker engine there); see docs/operations/install.md.
#
#   kind cluster → build and load the image → a MySQL for testing → helm install (CRDs, operator,
#   server) → apply examples/manifests → submit a task and check it is accepted.
set -euo pipefail
cd "$(dirname "$0")/.."

CLUSTER="${CLUSTER:-orbit-e2e}"
VERSION="$(sed -n 's/^appVersion: "\(.*\)"/\1/p' charts/orbit/Chart.yaml)"
IMAGE="orbit:${VERSION}"
NS=orbit-system

kind create cluster --name "$CLUSTER" --wait 120s
trap 'echo "cluster $CLUSTER kept for inspection; delete it with: kind delete cluster --name $CLUSTER"' EXIT

docker build -t "$IMAGE" .
kind load docker-image "$IMAGE" --name "$CLUSTER"

# A MySQL for testing only: no volume, root password in the open.
kubectl create namespace "$NS"
kubectl -n "$NS" run mysql --image=mysql:8.4 --port=3306 \
  --env=MYSQL_ROOT_PASSWORD=e2e --env=MYSQL_DATABASE=orbit
kubectl -n "$NS" expose pod mysql --port=3306
kubectl -n "$NS" wait --for=condition=Ready pod/mysql --timeout=180s
until kubectl -n "$NS" exec mysql -- mysqladmin -uroot -pe2e ping >/dev/null 2>&1; do sleep 2; done
# Two users: the hook migrates as root and creates the server's own user (audit rows
# append-only for it).
kubectl -n "$NS" create secret generic orbit-database-admin \
  --from-literal=url="mysql+pymysql://root:e2e@mysql.${NS}.svc:3306/orbit"
kubectl -n "$NS" create secret generic orbit-database \
  --from-literal=url="mysql+pymysql://orbit:$(openssl rand -hex 16)@mysql.${NS}.svc:3306/orbit"

helm install orbit charts/orbit --namespace "$NS" --set crds.install=true --wait --timeout 5m
kubectl -n "$NS" rollout status deployment/orbit-server
kubectl -n "$NS" rollout status deployment/orbit-operator

# The examples (namespace shop): Queue, Quota, Credential, WorkerPool, and a submit token.
kubectl create namespace shop
kubectl -n shop create secret generic checkout-worker-token --from-literal=token="$(openssl rand -hex 32)"
SUBMIT_TOKEN="$(openssl rand -hex 32)"
kubectl -n shop create secret generic e2e-submit-token --from-literal=token="$SUBMIT_TOKEN"
kubectl apply -f examples/manifests/
kubectl -n shop apply -f - <<YAML
apiVersion: orbit.dev/v1alpha1
kind: Credential
metadata: {name: e2e-submit}
spec: {secretRef: {name: e2e-submit-token}, roles: [submit]}
YAML
kubectl -n shop wait --for=condition=Ready queue,quota,credential --all --timeout=120s

# Smoke test: submit a task through the Service and read it back.
kubectl -n "$NS" port-forward service/orbit 18080:8080 >/dev/null &
FORWARD=$!
trap 'kill $FORWARD; echo "cluster $CLUSTER kept; delete it with: kind delete cluster --name $CLUSTER"' EXIT
sleep 3
curl -fsS http://127.0.0.1:18080/readyz
curl -fsS -X POST http://127.0.0.1:18080/v1/namespaces/shop/tasks \
  -H "Authorization: Bearer $SUBMIT_TOKEN" -H 'Content-Type: application/json' \
  -d '{"queue": "checkout", "handler": "charge_card", "params": {"order": 1}, "idempotency_key": "e2e-1"}'
echo
echo "e2e: Orbit is installed, the examples are Ready and a task was accepted"
