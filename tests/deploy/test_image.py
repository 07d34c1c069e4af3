"""The Dockerfile, checked without a Docker engine (none here; scripts/e2e-kind.sh builds it for
real): multi-stage, slim base, non-root user matching the chart, `orbit` as entrypoint, and every
file it copies exists and is not excluded from the build context."""

from __future__ import annotations

import json
import re

import yaml

from .conftest import CHART, REPO

DOCKERFILE = REPO / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def test_it_builds_in_one_stage_and_runs_in_another_from_a_slim_python_base() -> None:
    bases = [rest for word, rest in instructions() if word == "FROM"]
    assert len(bases) >= 2, "multi-stage"
    assert all(re.match(r"python:3\.1[1-9]-slim\b", base) for base in bases), bases
    final = instructions()[[w for w, _ in instructions()].index("FROM", 1) :]
    assert ("COPY", "--from=build /wheels /wheels") in final
    installs = " ".join(rest for word, rest in final if word == "RUN" and "apt-get install" in rest)
    # Run-time libraries only: no compiler, no headers in the image that runs.
    assert not re.search(r"\bgcc\b|build-essential|-dev\b|pkg-config", installs), installs


def test_the_image_has_the_c_mysql_driver_and_the_library_it_links_to() -> None:
    """A mysql:// URL picks mysqlclient where it is installed (orbit_store.db.with_driver): the
    image builds its wheel with the headers and runs it with the client library only."""
    steps = instructions()
    second = [w for w, _ in steps].index("FROM", 1)
    build, final = steps[:second], steps[second:]
    built = " ".join(rest for word, rest in build if word == "RUN")
    assert "libmariadb-dev" in built and "'.[mysqlclient]'" in built
    run = " ".join(rest for word, rest in final if word == "RUN")
    assert "libmariadb3" in run and "'orbit[mysqlclient]'" in run


def test_it_runs_as_the_non_root_user_the_chart_expects_with_orbit_as_entrypoint() -> None:
    (user,) = [rest for word, rest in instructions() if word == "USER"]
    uid = int(user.split(":")[0])
    assert uid != 0
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["podSecurityContext"]["runAsUser"] == uid
    (entrypoint,) = [rest for word, rest in instructions() if word == "ENTRYPOINT"]
    assert json.loads(entrypoint) == ["orbit"]


def test_every_copied_path_exists_and_is_in_the_build_context() -> None:
    ignored = {
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    copied = [rest for word, rest in instructions() if word == "COPY" and "--from" not in rest]
    sources = [src for rest in copied for src in rest.split()[:-1]]
    assert sources
    for source in sources:
        assert (REPO / source).exists(), source
        assert source.rstrip("/") not in ignored, f"{source} is excluded by .dockerignore"


def test_it_copies_every_package_the_distribution_installs() -> None:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    dirs = project["tool"]["setuptools"]["package-dir"]
    tops = {p.split(".")[0] for p in project["tool"]["setuptools"]["packages"]}
    needed = {dirs.get(top, top).split("/")[0] for top in tops} | {"sdk"}  # orbit-platform-sdk
    copied = {rest.split()[0] for word, rest in instructions() if word == "COPY"}
    assert needed <= copied, needed - copied
