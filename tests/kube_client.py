"""A small kubectl over HTTP for the operator tiers (tests/operator's emulator, tests/kube's real
API server): create, read, patch and delete resources, and wait for a resource's Ready
condition."""

from __future__ import annotations

import base64
import ssl
from typing import Any

import httpx
from polling import WAIT_SECONDS, wait_for

ORBIT = "orbit.dev/v1alpha1"


def plural_of(kind: str) -> str:
    return kind.lower() + "s"


def path_of(
    api_version: str, plural: str, namespace: str | None, name: str | None = None, sub: str = ""
) -> str:
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    parts = [base] + ([f"namespaces/{namespace}"] if namespace else []) + [plural]
    parts += [name] if name else []
    parts += [sub] if sub else []
    return "/".join(parts)


class Kube:
    """A small kubectl over HTTP (``verify``: the server's TLS, with a client certificate)."""

    def __init__(self, url: str, verify: ssl.SSLContext | bool = True) -> None:
        self.url = url
        self.http = httpx.Client(base_url=url, timeout=10, verify=verify)

    def _check(self, response: httpx.Response) -> dict[str, Any]:
        if response.status_code >= 400:
            raise AssertionError(
                f"{response.request.method} {response.request.url}: "
                f"{response.status_code} {response.text[:500]}"
            )
        answer: dict[str, Any] = response.json()
        return answer

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        path = path_of(obj["apiVersion"], plural_of(obj["kind"]), meta.get("namespace"))
        return self._check(self.http.post(path, json=obj))

    def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        response = self.http.get(path_of(api_version, plural_of(kind), namespace, name))
        return None if response.status_code == 404 else self._check(response)

    def list(self, api_version: str, kind: str, namespace: str | None) -> list[dict[str, Any]]:
        response = self.http.get(path_of(api_version, plural_of(kind), namespace))
        return list(self._check(response)["items"])

    def patch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        patch: dict[str, Any],
        sub: str = "",
    ) -> dict[str, Any]:
        response = self.http.patch(
            path_of(api_version, plural_of(kind), namespace, name, sub),
            json=patch,
            headers={"Content-Type": "application/merge-patch+json"},
        )
        return self._check(response)

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        self._check(self.http.delete(path_of(api_version, plural_of(kind), namespace, name)))

    # --- Orbit shortcuts -------------------------------------------------------------------

    def orbit(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.get(ORBIT, kind, namespace, name)

    def ready(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The Ready condition, or None."""
        obj = self.orbit(kind, namespace, name) or {}
        conditions = (obj.get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "Ready"), None)

    def wait_ready(
        self,
        kind: str,
        namespace: str,
        name: str,
        status: str = "True",
        reason: str = "",
        timeout: float = WAIT_SECONDS,
    ) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            ready = self.ready(kind, namespace, name)
            if ready and ready["status"] == status and (not reason or ready["reason"] == reason):
                return self.orbit(kind, namespace, name)
            return None

        return wait_for(f"{kind} {namespace}/{name} Ready={status} {reason}", check, timeout)

    def wait_gone(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        wait_for(
            f"{kind} {namespace}/{name} deleted",
            lambda: self.get(api_version, kind, namespace, name) is None,
        )


def secret(namespace: str, name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def orbit_resource(kind: str, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": ORBIT,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
