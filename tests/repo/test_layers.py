"""The layers of ORBIT.md §2 hold: store at the bottom, SDK speaking HTTP only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_linter_contracts_hold() -> None:
    linter = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(linter)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_importing_orbit_sdk_pulls_in_no_database_or_kubernetes_code() -> None:
    code = (
        "import sys, orbit_sdk; "
        "bad = [m for m in ('sqlalchemy', 'pymysql', 'alembic', 'kopf', 'kubernetes',"
        " 'orbit_store') if m in sys.modules]; print(','.join(bad))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_importing_orbit_store_pulls_in_no_http_or_kubernetes_code() -> None:
    code = (
        "import sys, orbit_store.schema, orbit_store.db; "
        "bad = [m for m in ('fastapi', 'starlette', 'httpx', 'kopf', 'kubernetes', 'orbit_sdk')"
        " if m in sys.modules]; print(','.join(bad))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""
