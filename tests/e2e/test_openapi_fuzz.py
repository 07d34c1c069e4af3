"""Schemathesis over the served OpenAPI, with a valid token: no 5xx, and responses (status codes,
content types, bodies) match the schema."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import Server, Tenant

pytestmark = pytest.mark.slow

ST = str(Path(sys.executable).with_name("st"))


def test_the_api_survives_schema_driven_fuzzing(
    server: Server, tenant: Tenant, tmp_path: Path
) -> None:
    # Aim the generated requests at the token's own namespace (others are a correct 403).
    (tmp_path / "schemathesis.toml").write_text(
        f'[parameters]\n"path.namespace" = "{tenant.namespace}"\n'
    )
    result = subprocess.run(
        [
            ST,
            "run",
            f"{server.url}/openapi.json",
            "--header",
            f"Authorization: Bearer {tenant.token}",
            "--checks",
            "not_a_server_error,status_code_conformance,"
            "content_type_conformance,response_schema_conformance",
            "--max-examples",
            "25",
            "--phases",
            "examples,coverage,fuzzing",
            "--generation-deterministic",
            # One worker: with two, schemathesis' coverage phase builds hypothesis filters in two
            # threads at once and CPython 3.11's ast.parse (used to describe their lambdas) fails
            # with "SystemError: AST constructor recursion depth mismatch" (a runtime error of the
            # tool, seen once the schedule operations were added; every generated case passed).
            "--workers",
            "1",
            "--suppress-health-check",
            "all",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
