"""The README quick start typed into terminals (pexpect, real ptys), as a new user would: the
commands are read from README.md itself, so the test and the README cannot drift apart. Only the
port differs (a free one instead of 8080, which another process may hold)."""

from __future__ import annotations

import io
import os
import re
import sys
from pathlib import Path

import pexpect
import pytest

from .conftest import ROOT, free_port

pytestmark = pytest.mark.slow


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line and not line.startswith("#")]


def test_the_readme_quick_start_typed_in_two_terminals(tmp_path: Path) -> None:
    dev_line, *client_lines = quick_start_commands()
    assert dev_line.startswith(".venv/bin/orbit dev")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))  # the user's checkout has its .venv
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORBIT_")}
    env.update(PYTHONPATH=str(ROOT), TERM="dumb", COLUMNS="200")  # examples/ importable
    dev = pexpect.spawn(
        "bash",
        ["-c", f"{dev_line} --port {port}"],
        cwd=tmp_path,
        env=env,
        encoding="utf-8",
        timeout=60,
    )
    seen = io.StringIO()
    dev.logfile_read = seen  # everything terminal 1 showed
    shell = pexpect.spawn(
        "bash", ["--norc", "--noprofile"], cwd=tmp_path, env=env, encoding="utf-8", timeout=60
    )
    try:
        dev.expect("export ORBIT_SERVER=")
        dev.expect(r"worker \S+ serving dev/default")  # its worker is ready
        shell.sendline(f"export ORBIT_SERVER=http://127.0.0.1:{port}")
        outputs = []
        for line in client_lines:
            shell.sendline(f"{line}; echo EXIT=$?")
            shell.expect(r"EXIT=(\d+)")
            outputs.append((shell.before, int(shell.match.group(1))))
        (submitted, submit_code), (listed, list_code) = outputs[-2:]
        assert submit_code == 0 and re.search(r"state:\s+SUCCEEDED", submitted), submitted
        assert re.search(r'result:\s+\{"x":1\}', submitted)
        assert list_code == 0 and "shop.echo  SUCCEEDED" in listed
        dev.sendintr()  # Ctrl-C in terminal 1
        dev.expect("orbit dev: stopped")
        dev.expect(pexpect.EOF)
    finally:
        shell.close(force=True)
        dev.close(force=True)
    assert dev.exitstatus == 0
    # no noise: the worker starts once the API serves; no ANSI copies of log messages
    assert "cannot register session" not in seen.getvalue()
    assert "color_message" not in seen.getvalue()
