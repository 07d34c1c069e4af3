"""A Kubernetes API server good enough for Kopf, built on KMock (pinned: kmock==0.8, this reaches
into its internals). /work/shared/design/TESTING-K8S.md lists what KMock lacks; this fills it:

- objects get ``uid``, ``creationTimestamp``, ``generation`` (bumped when anything but metadata
  and status changes) and a ``resourceVersion`` bumped on every write; ``generateName`` works;
- PATCH understands merge patches, JSON patches (a failed ``test`` answers 422) and server-side
  apply (approximated: the applied ``spec`` replaces the old one; it creates missing objects);
- the ``status`` subresource: only ``/status`` writes change ``.status`` of such resources;
- deletion honours finalizers (``deletionTimestamp`` first, gone once the last one is removed)
  and collects the dependents named by ``ownerReferences``;
- lists carry ``kind``, ``apiVersion`` and the real ``resourceVersion``; label and field
  selectors (equality, inequality, existence) are applied;
- watches resume from ``?resourceVersion=`` and never miss an event between list and watch;
- a posted CustomResourceDefinition makes its resource discoverable.

It runs in its own thread and event loop (:class:`EmulatorThread`); tests talk to it over HTTP.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import copy
import datetime as dt
import logging
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

import attrs
import jsonpatch
import jsonpointer
import kmock
import yaml
from kmock._internal import enums, k8s, references, rendering

Obj = dict[str, Any]
Key = tuple[references.resource, str | None, str]

CRD = references.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: dicts merge, ``null`` removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _lookup(obj: Obj, dotted: str) -> Any:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def selected(obj: Obj, label_selector: str | None, field_selector: str | None) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, (t.strip() for t in (label_selector or "").split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    for term in filter(None, (t.strip() for t in (field_selector or "").split(","))):
        negate = "!=" in term
        path, value = term.replace("!=", "=").replace("==", "=").split("=", 1)
        if (str(_lookup(obj, path.strip())) == value.strip()) == negate:
            return False
    return True


def _error(status: int, reason: str, message: str) -> k8s.KubernetesError:
    return k8s.KubernetesError(status=status, reason=reason, message=message, details={})


@attrs.define(kw_only=True)
class OrbitKubeEmulator(k8s.KubernetesScaffold):
    _store: dict[Key, Obj] = attrs.field(factory=dict, init=False)
    _log: list[tuple[int, references.resource, Obj]] = attrs.field(factory=list, init=False)
    _rv: int = attrs.field(default=1, init=False)
    _tick: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)
    # (action, plural) of every request served: what the operator asked the API server for.
    served: set[tuple[str, str]] = attrs.field(factory=set, init=False)
    served_lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.fallback[enums.action.LIST] << self._serve_list
        self.fallback[enums.action.WATCH] << self._serve_watch
        self.fallback[enums.action.FETCH] << self._serve_fetch
        self.fallback[enums.action.CREATE] << self._serve_create
        self.fallback[enums.action.UPDATE] << self._serve_update
        self.fallback[enums.action.DELETE] << self._serve_delete

    async def _handle(self, request: rendering.Request) -> Any:
        # KMock matches a request to its reactions by scanning every request served so far
        # (quadratic over a session of watch-heavy Kopf traffic). Nothing here asserts on
        # KMock's request history, so keep only the request being served (the last one,
        # appended just before this call with no await in between).
        del self._requests[:-1]
        if request.action is not None and request.resource is not None:
            with self.served_lock:
                self.served.add((request.action.value, request.resource.plural))
        return await super()._handle(request)

    # --- resources -----------------------------------------------------------------------

    def _known(self, request: rendering.Request) -> references.resource:
        resource = request.resource
        if resource is None or resource not in self.resources:
            raise k8s.KubernetesResourceNotFoundError()
        return resource

    def _info(self, resource: references.resource) -> references.ResourceInfo:
        return self.resources[resource]

    def _namespaced(self, resource: references.resource) -> bool:
        return self._info(resource).namespaced is not False

    def _has_status(self, resource: references.resource) -> bool:
        return "status" in self._info(resource).subresources

    def register_crd(self, crd: Obj) -> None:
        spec = crd["spec"]
        names = spec["names"]
        for version in spec["versions"]:
            if not version.get("served", True):
                continue
            key = f"{spec['group']}/{version['name']}/{names['plural']}"
            self.resources[key] = kmock.ResourceInfo(
                kind=names["kind"],
                singular=names.get("singular") or names["kind"].lower(),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                verbs=set(VERBS),
                shortnames=set(names.get("shortNames") or []),
                categories=set(names.get("categories") or []),
                subresources=set((version.get("subresources") or {}).keys()),
            )

    def _api_version(self, resource: references.resource) -> str:
        return resource.version if not resource.group else f"{resource.group}/{resource.version}"

    # --- the write path ------------------------------------------------------------------

    def _commit(self, resource: references.resource, key: Key, obj: Obj | None, kind: str) -> Obj:
        """Store (or drop) an object as a new resourceVersion and publish the event."""
        self._rv += 1
        if obj is None:
            gone = copy.deepcopy(self._store.pop(key))
            gone["metadata"]["resourceVersion"] = str(self._rv)
            event = {"type": kind, "object": gone}
            result = gone
        else:
            obj["metadata"]["resourceVersion"] = str(self._rv)
            self._store[key] = obj
            event = {"type": kind, "object": copy.deepcopy(obj)}
            result = obj
        self._log.append((self._rv, resource, event))
        self._tick.set()
        self._tick = asyncio.Event()
        return copy.deepcopy(result)

    def _create(self, resource: references.resource, namespace: str | None, body: Obj) -> Obj:
        meta = body.setdefault("metadata", {})
        if not self._namespaced(resource):
            namespace = None
        if namespace is not None:
            meta["namespace"] = namespace
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise _error(422, "Invalid", "metadata.name or metadata.generateName is required")
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        key = (resource, namespace, meta["name"])
        if key in self._store:
            raise _error(409, "AlreadyExists", f"{meta['name']} already exists")
        if self._has_status(resource):
            body.pop("status", None)
        info = self._info(resource)
        body.setdefault("apiVersion", self._api_version(resource))
        if info.kind:
            body.setdefault("kind", info.kind)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now(), generation=1)
        meta.pop("resourceVersion", None)
        if resource == CRD:
            self.register_crd(body)
        return self._commit(resource, key, body, "ADDED")

    def _patched(self, old: Obj, request: rendering.Request) -> Obj:
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        data = request.data
        if data is None and request.text:
            data = yaml.safe_load(request.text)
        try:
            if content_type == "application/json-patch+json":
                return jsonpatch.apply_patch(old, data)
            if content_type == "application/apply-patch+yaml":
                new = merge_patch(old, {k: v for k, v in data.items() if k != "spec"})
                if "spec" in data:
                    new["spec"] = copy.deepcopy(data["spec"])
                return new
            return merge_patch(old, data)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            raise _error(422, "Invalid", f"the patch cannot be applied: {exc}") from exc

    def _update(self, request: rendering.Request, resource: references.resource) -> Obj:
        key = (resource, request.namespace, str(request.name))
        old = self._store.get(key)
        content_type = request.headers.get("Content-Type", "")
        if old is None:
            if content_type.startswith("application/apply-patch") and not request.subresource:
                return self._create(resource, request.namespace, copy.deepcopy(request.data))
            raise k8s.KubernetesObjectNotFoundError()
        new = self._patched(copy.deepcopy(old), request)
        if request.subresource == "status":
            new = {**copy.deepcopy(old), "status": new.get("status")}
            if new["status"] is None:
                new.pop("status")
        elif request.subresource:
            raise _error(404, "NotFound", f"subresource {request.subresource} is not served")
        elif self._has_status(resource):
            new.pop("status", None)
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
        meta, old_meta = new.setdefault("metadata", {}), old["metadata"]
        for field in ("uid", "creationTimestamp", "name", "namespace", "resourceVersion"):
            if field in old_meta:
                meta[field] = old_meta[field]
        meta["generation"] = old_meta.get("generation", 1)
        if new == old:
            return copy.deepcopy(old)
        strip = ("metadata", "status")
        if {k: v for k, v in new.items() if k not in strip} != {
            k: v for k, v in old.items() if k not in strip
        }:
            meta["generation"] += 1
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._remove(resource, key)
        return self._commit(resource, key, new, "MODIFIED")

    def _delete(self, resource: references.resource, key: Key) -> Obj:
        obj = self._store[key]
        if obj["metadata"].get("finalizers"):
            if obj["metadata"].get("deletionTimestamp"):
                return copy.deepcopy(obj)
            marked = copy.deepcopy(obj)
            marked["metadata"]["deletionTimestamp"] = _now()
            return self._commit(resource, key, marked, "MODIFIED")
        return self._remove(resource, key)

    def _remove(self, resource: references.resource, key: Key) -> Obj:
        uid = self._store[key]["metadata"].get("uid")
        gone = self._commit(resource, key, None, "DELETED")
        dependents = [
            k
            for k, obj in self._store.items()
            if any(o.get("uid") == uid for o in obj["metadata"].get("ownerReferences") or [])
        ]
        for dependent in dependents:
            if dependent in self._store:
                self._delete(dependent[0], dependent)
        return gone

    # --- the served verbs ----------------------------------------------------------------

    def _matching(self, request: rendering.Request, resource: references.resource) -> list[Obj]:
        return [
            obj
            for (res, namespace, _name), obj in sorted(
                self._store.items(), key=lambda item: (item[0][1] or "", item[0][2])
            )
            if res == resource
            and (request.namespace is None or namespace == request.namespace)
            and selected(
                obj, request.params.get("labelSelector"), request.params.get("fieldSelector")
            )
        ]

    async def _serve_list(self, request: rendering.Request) -> Obj:
        resource = self._known(request)
        return {
            "apiVersion": self._api_version(resource),
            "kind": f"{self._info(resource).kind or 'Object'}List",
            "metadata": {"resourceVersion": str(self._rv)},
            "items": copy.deepcopy(self._matching(request, resource)),
        }

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[Any]:
        resource = self._known(request)
        yield b""  # send the headers now
        since = request.params.get("resourceVersion")
        if since in (None, "", "0"):
            start = self._rv
            for obj in self._matching(request, resource):
                yield {"type": "ADDED", "object": copy.deepcopy(obj)}
        else:
            start = int(since)
        position = bisect.bisect_right([rv for rv, _, _ in self._log], start)
        loop = asyncio.get_running_loop()
        timeout = float(request.params.get("timeoutSeconds") or 0)
        deadline = loop.time() + timeout if timeout else None
        raw = request._raw_request
        while True:
            tick = self._tick
            while position < len(self._log):
                _, res, event = self._log[position]
                position += 1
                obj = event["object"]
                namespace = obj["metadata"].get("namespace")
                if (
                    res == resource
                    and (request.namespace is None or namespace == request.namespace)
                    and selected(
                        obj,
                        request.params.get("labelSelector"),
                        request.params.get("fieldSelector"),
                    )
                ):
                    yield event
            if raw is None or raw.transport is None or raw.transport.is_closing():
                return
            if deadline is not None and loop.time() >= deadline:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(tick.wait(), 1.0)

    async def _serve_fetch(self, request: rendering.Request) -> Obj:
        resource = self._known(request)
        obj = self._store.get((resource, request.namespace, str(request.name)))
        if obj is None:
            raise k8s.KubernetesObjectNotFoundError()
        return copy.deepcopy(obj)

    async def _serve_create(self, request: rendering.Request) -> Obj:
        resource = self._known(request)
        if not isinstance(request.data, dict):
            raise _error(400, "BadRequest", "the body must be a JSON object")
        return self._create(resource, request.namespace, copy.deepcopy(request.data))

    async def _serve_update(self, request: rendering.Request) -> Obj:
        return self._update(request, self._known(request))

    async def _serve_delete(self, request: rendering.Request) -> Obj:
        resource = self._known(request)
        key = (resource, request.namespace, str(request.name))
        if key not in self._store:
            raise k8s.KubernetesObjectNotFoundError()
        return self._delete(resource, key)


class EmulatorThread:
    """Runs an :class:`OrbitKubeEmulator` behind a real HTTP port in its own event loop."""

    def __init__(self) -> None:
        self.url = ""
        self.emulator: OrbitKubeEmulator | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="kube-emulator", daemon=True)
        self._error: BaseException | None = None

    def start(self) -> EmulatorThread:
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)  # a line per request
        self._thread.start()
        self._ready.wait(timeout=30)
        if self._error is not None:
            raise self._error
        return self

    def served(self) -> set[tuple[str, str]]:
        """(action, plural) of every request served so far, e.g. ("FETCH", "secrets")."""
        if self.emulator is None:
            return set()
        with self.emulator.served_lock:
            return set(self.emulator.served)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with OrbitKubeEmulator() as emulator, kmock.Server(emulator) as server:
            emulator.resources.load_bundled()
            self.emulator = emulator
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()
