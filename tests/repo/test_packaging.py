"""pyproject's explicit package lists stay complete (the server's, and the SDK's own
distribution in sdk/), every runtime dependency is bounded below its next major version, and the
CLI answers --version and --help."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from typer.testing import CliRunner

from orbit import __version__
from orbit.cli.main import app

ROOT = Path(__file__).resolve().parents[2]


def _package_dirs() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping = config["package-dir"]
    found = set()
    for top in (
        "orbit",
        "orbit_store",
        "operator/orbit_operator",
        "migrations",
        "crds",
    ):
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT).as_posix()
            for package, folder in mapping.items():
                if rel == folder or rel.startswith(folder + "/"):
                    rel = package + rel[len(folder) :]
            found.add(rel.replace("/", "."))
    return found


def test_every_python_package_is_listed_in_pyproject() -> None:
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    assert _package_dirs() == listed


def test_the_sdk_is_its_own_distribution_and_the_server_depends_on_it() -> None:
    sdk = tomllib.loads((ROOT / "sdk" / "pyproject.toml").read_text())
    packages = {
        init.parent.relative_to(ROOT / "sdk").as_posix().replace("/", ".")
        for init in (ROOT / "sdk" / "orbit_sdk").rglob("__init__.py")
    }
    assert set(sdk["tool"]["setuptools"]["packages"]) == packages
    light = ("httpx", "pydantic")
    assert all(d.startswith(light) for d in sdk["project"]["dependencies"])
    server = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pinned = f"{sdk['project']['name']}=={sdk['project']['version']}"
    assert pinned in server


def _runtime_dependencies() -> list[str]:
    found = []
    for path in (ROOT / "pyproject.toml", ROOT / "sdk" / "pyproject.toml"):
        project = tomllib.loads(path.read_text())["project"]
        found += project["dependencies"]
        found += [
            d
            for name, deps in project["optional-dependencies"].items()
            if name != "dev"
            for d in deps
        ]
    return found


def test_every_runtime_dependency_has_an_upper_bound() -> None:
    """A library whose next major release changes its API must not arrive unannounced."""
    dependencies = _runtime_dependencies()
    assert any(d.startswith("fastapi") for d in dependencies)
    unbounded = [d for d in dependencies if not re.search(r"(<|==)\s*[0-9]", d)]
    assert unbounded == []


def test_version_and_help() -> None:
    runner = CliRunner()
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and __version__ in version.output
    for args in (
        ["--help"],
        ["admin", "--help"],
        ["admin", "migrate", "--help"],
        ["dev", "--help"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
        assert "Usage" in result.output


def test_the_wheel_ships_every_console_asset(tmp_path: Path) -> None:
    """The web console works from an installed wheel, not only from a clone: its page, styles,
    modules and vendored libraries (with their licences) are package data."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("orbit", "orbit_store", "operator", "migrations", "crds"):
        shutil.copytree(
            ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(source)],
        check=True,
        timeout=600,
    )
    (wheel,) = dist.glob("orbit-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    static = ROOT / "orbit" / "console" / "static"
    assets = {
        f"orbit/console/{p.relative_to(static.parent).as_posix()}"
        for p in static.rglob("*")
        if p.is_file()
    }
    assert "orbit/console/static/vendor/preact.LICENSE" in assets
    assert assets - shipped == set()
