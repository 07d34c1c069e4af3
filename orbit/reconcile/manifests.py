"""Reading manifests for `orbit apply`: YAML files or folders → admitted resources, with errors
that name the file, the object and the field."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .admission import admit
from .resource import API_VERSION, Resource
from .workflow_definition import spec_problems

KIND_ORDER = ("Queue", "Quota", "Schedule", "Credential", "WorkerPool", "WorkflowDefinition")
SUFFIXES = (".yaml", ".yml")


class ManifestError(Exception):
    """Something in the manifests can't be applied; nothing was written."""


@dataclass(frozen=True)
class Manifest:
    path: Path
    index: int  # document number within the file, from 1
    doc: dict[str, Any]

    @property
    def where(self) -> str:
        meta = self.doc.get("metadata") or {}
        name = f"{meta.get('namespace', '?')}/{meta.get('name', '?')}"
        return f"{self.path} (document {self.index}): {self.doc.get('kind', '?')} {name}"


@dataclass(frozen=True)
class ManifestSet:
    resources: list[Resource]  # the admitted ones
    secrets: dict[tuple[str, str], dict[str, str]]
    skipped: list[str]
    problems: list[str]  # why the others were refused; nothing may be applied while any exist


def _files(paths: list[Path], problems: list[str]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file())
        elif path.is_file():
            found.append(path)
        else:
            problems.append(f"{path}: no such file or directory")
    return found


def load(paths: list[Path]) -> tuple[list[Manifest], list[str]]:
    """Every document under ``paths``, and the problems of files that could not be read."""
    manifests: list[Manifest] = []
    problems: list[str] = []
    for path in _files(paths, problems):
        try:
            docs = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError as exc:
            problems.append(f"{path}: not valid YAML: {exc}")
            continue
        for index, doc in enumerate(docs, start=1):
            if doc is None:
                continue
            if not isinstance(doc, dict):
                problems.append(f"{path} (document {index}): not a Kubernetes object")
                continue
            manifests.append(Manifest(path, index, doc))
    return manifests, problems


def _secret_data(m: Manifest) -> dict[str, str]:
    data: dict[str, str] = {}
    try:
        for key, value in (m.doc.get("data") or {}).items():
            data[key] = base64.b64decode(str(value), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ManifestError(f"{m.where}: data is not valid base64 text: {exc}") from exc
    data.update({k: str(v) for k, v in (m.doc.get("stringData") or {}).items()})
    return data


def read(paths: list[Path], default_namespace: str) -> ManifestSet:
    """Load and admit every manifest, collecting every problem (the caller decides)."""
    resources, secrets, skipped = [], {}, []
    manifests, problems = load(paths)
    seen: set[str] = set()
    for m in manifests:
        meta = m.doc.setdefault("metadata", {})
        meta.setdefault("namespace", default_namespace)
        if m.doc.get("apiVersion") == "v1" and m.doc.get("kind") == "Secret":
            try:
                secrets[(meta["namespace"], meta.get("name", ""))] = _secret_data(m)
            except ManifestError as exc:
                problems.append(str(exc))
            continue
        if m.doc.get("apiVersion") != API_VERSION or m.doc.get("kind") not in KIND_ORDER:
            skipped.append(f"{m.where}: not an Orbit resource ({m.doc.get('apiVersion')})")
            continue
        if not meta.get("name"):
            problems.append(f"{m.where}: metadata.name is required")
            continue
        admitted, refusals = admit(m.doc)
        if refusals:
            problems += [f"{m.where}: {r.path or '<root>'}: {r.message}" for r in refusals]
            continue
        if m.doc["kind"] == "WorkflowDefinition":
            problems += [f"{m.where}: {p}" for p in spec_problems(admitted.get("spec") or {})]
        resource = Resource(
            kind=m.doc["kind"],
            namespace=meta["namespace"],
            name=meta["name"],
            spec=admitted.get("spec") or {},
            generation=1,
            source="manifest",
        )
        if resource.ref in seen:
            problems.append(f"{m.where}: declared twice")
        seen.add(resource.ref)
        resources.append(resource)
    resources.sort(key=lambda r: (KIND_ORDER.index(r.kind), r.namespace, r.name))
    return ManifestSet(resources, secrets, skipped, problems)
