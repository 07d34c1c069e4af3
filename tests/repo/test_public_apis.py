"""Orbit uses its web and HTTP libraries through their public APIs only (ORBIT.md §6, STYLE.md):
no import of a private (``_``-prefixed) module or name of FastAPI, Starlette, uvicorn, httpx or
httpcore, nothing from ``uvicorn.protocols`` (module-internal classes to subclass), no
``_``-prefixed attribute of anything imported from them, and no ``original_router`` (FastAPI's
internal router layout). Such code breaks silently on a minor upgrade of the library.

The check reads the source of every module in orbit/, orbit_store/, sdk/ and operator/ with
``ast``; the last tests show it catching each kind of use."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("orbit", "orbit_store", "sdk/orbit_sdk", "operator/orbit_operator")
LIBRARIES = frozenset({"fastapi", "starlette", "uvicorn", "httpx", "httpcore"})
INTERNAL_MODULES = ("uvicorn.protocols",)
INTERNAL_NAMES = frozenset({"original_router"})


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _library_module(module: str) -> bool:
    return module.split(".")[0] in LIBRARIES


def _module_findings(module: str) -> list[str]:
    found = []
    if any(_private(part) for part in module.split(".")):
        found.append(f"private module {module}")
    if any(module == m or module.startswith(m + ".") for m in INTERNAL_MODULES):
        found.append(f"internal module {module}")
    return found


def violations(source: str) -> list[str]:
    """What in ``source`` reaches past the libraries' public APIs, one line each."""
    tree = ast.parse(source)
    found: list[str] = []
    bound: set[str] = set()  # local names of library modules and of names imported from them
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _library_module(alias.name):
                    found += [f"line {node.lineno}: {f}" for f in _module_findings(alias.name)]
                    bound.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and _library_module(node.module):
            found += [f"line {node.lineno}: {f}" for f in _module_findings(node.module)]
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"line {node.lineno}: private name {node.module}.{alias.name}")
                bound.add(alias.asname or alias.name)
    for node in ast.walk(tree):  # names and attributes holding library objects
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if value is not None and _path(value)[:1] and _path(value)[0] in bound:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound.update(".".join(_path(t)) for t in targets if _path(t))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner = _path(node.value)
            if node.attr in INTERNAL_NAMES:
                found.append(f"line {node.lineno}: internal attribute {node.attr}")
            elif _private(node.attr) and owner and (owner[0] in bound or ".".join(owner) in bound):
                found.append(f"line {node.lineno}: private attribute {node.attr}")
        elif isinstance(node, ast.Constant) and node.value in INTERNAL_NAMES:
            found.append(f"line {node.lineno}: internal name {node.value!r}")
    return found


def _path(node: ast.expr) -> list[str]:
    """``a.b().c`` as ``["a", "b", "c"]`` (calls and subscripts see through); [] otherwise."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
        node = node.func if isinstance(node, ast.Call) else node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else []


def _sources() -> list[Path]:
    return sorted(p for folder in CHECKED for p in (ROOT / folder).rglob("*.py"))


def test_no_module_reaches_past_the_libraries_public_apis() -> None:
    sources = _sources()
    assert len(sources) > 100, "the checked folders moved: update CHECKED"
    found = {
        str(path.relative_to(ROOT)): bad
        for path in sources
        if (bad := violations(path.read_text(encoding="utf-8")))
    }
    assert found == {}


@pytest.mark.parametrize(
    "source",
    [
        "from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol",
        "import uvicorn.protocols.http.h11_impl",
        "from httpx._transports.default import HTTPTransport",
        "import httpcore._sync.connection_pool as pool",
        "from starlette.routing import _IncludedRouter",
        "from fastapi import routing\nroutes = routing.APIRouter()._private_thing",
        "import httpx\nclient = httpx.Client()\nclient._transport.handle_request(None)",
        "import httpx\nself.http = httpx.Client()\nself.http._transport",
        "routes = [r.original_router for r in app.routes]",
        "router = getattr(route, 'original_router', None)",
    ],
)
def test_the_check_finds_each_kind_of_private_use(source: str) -> None:
    assert violations(source)


@pytest.mark.parametrize(
    "source",
    [
        "from fastapi import APIRouter, FastAPI\napp = FastAPI()\napp.__dict__",
        "import httpx\nclient = httpx.Client(base_url='http://x')\nclient.send",
        "from starlette.types import ASGIApp, Receive, Scope, Send",
        "class Mine:\n    def _own(self) -> None:\n        self._state = 1",
    ],
)
def test_the_check_leaves_public_use_and_orbit_s_own_private_names(source: str) -> None:
    assert violations(source) == []
