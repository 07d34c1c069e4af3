"""The Kubernetes API calls the handlers make themselves (Kopf makes the rest): read Secrets and
Deployments, apply Deployments, list pods, patch a resource's status from outside its handlers.

Bodies go and come as plain JSON dicts through the official client's configured connection (in
cluster: the ServiceAccount; elsewhere: ``$KUBECONFIG`` or ``~/.kube/config``), so nothing here
depends on the client's generated models.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes import config as _config

from .settings import FIELD_MANAGER

# The client's loaders and responses are untyped; these are used through Any.
config: Any = _config

Obj = dict[str, Any]

REQUEST_TIMEOUT = 30.0
MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


class KubeError(Exception):
    def __init__(self, status: int, method: str, path: str, body: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:500]}")
        self.status = status


def path_of(
    api_version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    parts = ["/api/v1" if api_version == "v1" else f"/apis/{api_version}"]
    if namespace is not None:
        parts.append(f"namespaces/{namespace}")
    parts.append(plural)
    if name is not None:
        parts.append(name)
    if subresource is not None:
        parts.append(subresource)
    return "/".join(parts)


def secret_data(secret: Mapping[str, Any]) -> dict[str, str]:
    """A Secret's values, decoded (values that are not UTF-8 text are left out)."""
    data: dict[str, str] = {}
    for key, value in (secret.get("data") or {}).items():
        try:
            data[key] = base64.b64decode(str(value), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            continue
    # stringData is write-only on a real server; an emulator may keep it.
    data.update({k: str(v) for k, v in (secret.get("stringData") or {}).items()})
    return data


class Kube:
    def __init__(self, api: client.ApiClient) -> None:
        self.api: Any = api

    @classmethod
    def from_environment(cls) -> Kube:
        """In a pod, the ServiceAccount; elsewhere the kubeconfig (``$KUBECONFIG``)."""
        configuration = client.Configuration()
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(
                config_file=os.environ.get("KUBECONFIG") or None,
                client_configuration=configuration,
            )
        return cls(client.ApiClient(configuration))

    def close(self) -> None:
        self.api.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str | None = None,
        query: Mapping[str, str] | None = None,
    ) -> Obj | None:
        """The JSON answer, or None for 404; other errors raise :class:`KubeError`."""
        headers = {"Accept": "application/json"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        elif body is not None:
            headers["Content-Type"] = "application/json"
        serialized = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        http_method, url, header_params, request_body, post_params = serialized
        response = self.api.call_api(
            http_method,
            url,
            header_params=header_params,
            body=request_body,
            post_params=post_params,
            _request_timeout=REQUEST_TIMEOUT,
        )
        raw = response.read() or b"{}"
        if response.status == 404:
            return None
        if response.status >= 400:
            raise KubeError(response.status, method, path, raw.decode(errors="replace"))
        answer: Obj = json.loads(raw)
        return answer

    # --- what the handlers use ---------------------------------------------------------------

    def get(self, api_version: str, plural: str, namespace: str | None, name: str) -> Obj | None:
        return self.request("GET", path_of(api_version, plural, namespace, name))

    def list(
        self,
        api_version: str,
        plural: str,
        namespace: str | None,
        label_selector: str | None = None,
    ) -> list[Obj]:
        query = {"labelSelector": label_selector} if label_selector else None
        answer = self.request("GET", path_of(api_version, plural, namespace), query=query)
        return list((answer or {}).get("items") or [])

    def read_secret(self, namespace: str, name: str) -> dict[str, str] | None:
        """The Secret's decoded data, or None when it does not exist."""
        secret = self.get("v1", "secrets", namespace, name)
        return None if secret is None else secret_data(secret)

    def apply(self, obj: Obj, api_version: str, plural: str) -> Obj:
        """Server-side apply ``obj`` as the operator's field manager (creates it if absent)."""
        meta = obj["metadata"]
        answer = self.request(
            "PATCH",
            path_of(api_version, plural, meta.get("namespace"), meta["name"]),
            body=obj,
            content_type=APPLY_PATCH,
            query={"fieldManager": FIELD_MANAGER, "force": "true"},
        )
        if answer is None:
            raise KubeError(404, "PATCH", meta["name"], "not found while applying")
        return answer

    def patch_status(
        self,
        api_version: str,
        plural: str,
        namespace: str,
        name: str,
        status: Mapping[str, Any],
    ) -> None:
        self.request(
            "PATCH",
            path_of(api_version, plural, namespace, name, "status"),
            body={"status": dict(status)},
            content_type=MERGE_PATCH,
        )
