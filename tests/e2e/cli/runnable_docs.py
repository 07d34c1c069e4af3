"""The docs' runnable blocks, typed into terminals as a reader would (pexpect, real ptys).

A fenced block is runnable when its info string says so:

- ```` ```sh runnable ````: each command runs in one shell, in order, and must exit 0, or the
  code its line's comment names (``# exit 3: …``). ``orbit dev`` and ``orbit worker`` keep
  running: each gets a terminal of its own, and the next command waits until it serves. A new
  ``orbit dev`` replaces the one before (and the workers started for it).
- ```` ```python runnable ````: the code runs as a script in that shell (its environment too).
- ```` ```python runnable file=NAME.py ````: the code is saved as ``NAME.py``, a module the next
  commands import.

Every runnable block of one file is one session in a fresh directory holding the checkout's
``.venv`` and ``examples/``, as a reader's clone would, with a CLI config of its own. Only the
port differs from what is printed: a free one instead of 8080.
"""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pexpect

from ..conftest import ROOT, free_port

FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```$", re.M | re.S)
EXPECTED_EXIT = re.compile(r"\s#\s*exit (\d+)\b")
LONG_RUNNING = re.compile(r"(?:^|[\s/])orbit\s+(dev|worker)\b")
DOCUMENTS = ["README.md", "docs/**/*.md", "examples/**/*.md"]


@dataclass(frozen=True)
class Block:
    language: str
    text: str
    file: str | None = None  # python: save as this module instead of running it

    def commands(self) -> Iterator[tuple[str, int]]:
        """Each command (continuation lines joined) and the exit code it should end with."""
        pending = ""
        for raw in self.text.splitlines():
            line = raw.rstrip()
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            command, pending = pending + line, ""
            expected = EXPECTED_EXIT.search(command)
            yield command, int(expected.group(1)) if expected else 0


def runnable_blocks(path: Path) -> list[Block]:
    blocks = []
    for match in FENCE.finditer(path.read_text()):
        language, info, text = match.groups()
        words = info.split()
        if "runnable" not in words:
            continue
        named = [w.split("=", 1)[1] for w in words if w.startswith("file=")]
        blocks.append(Block(language, text, named[0] if named else None))
    return blocks


def documents_with_runnable_blocks() -> list[Path]:
    paths = sorted({p for pattern in DOCUMENTS for p in ROOT.glob(pattern)})
    return [p for p in paths if runnable_blocks(p)]


@dataclass
class Ran:
    command: str
    output: str
    exit_code: int


@dataclass
class Session:
    """One shell and the long-running commands' terminals, in a directory of its own."""

    directory: Path
    port: int = field(default_factory=free_port)
    ran: list[Ran] = field(default_factory=list)
    background: list[tuple[str, pexpect.spawn, io.StringIO]] = field(default_factory=list)

    def __post_init__(self) -> None:
        (self.directory / ".venv").symlink_to(Path(sys.prefix))
        (self.directory / "examples").symlink_to(ROOT / "examples")
        env = {k: v for k, v in os.environ.items() if not k.startswith("ORBIT_")}
        env.pop("PYTHONPATH", None)  # a reader's shell: the checkout is importable as cwd
        env.update(
            TERM="dumb",
            COLUMNS="200",
            XDG_CONFIG_HOME=str(self.directory / ".config"),
            PATH=f"{Path(sys.prefix) / 'bin'}:{env.get('PATH', '')}",  # bare `orbit` too
        )
        self.env = env
        self.shell = self._spawn("bash", ["--norc", "--noprofile"])
        self.shell.sendline("PS1=; PS2=; bind 'set enable-bracketed-paste off' 2>/dev/null")

    def _spawn(self, program: str, args: list[str]) -> pexpect.spawn:
        return pexpect.spawn(
            program, args, cwd=self.directory, env=self.env, encoding="utf-8", timeout=90
        )

    def play(self, block: Block) -> None:
        if block.language == "python":
            name = block.file or f"block_{len(self.ran)}.py"
            (self.directory / name).write_text(self._local(block.text))
            if block.file is None:
                self.run(f".venv/bin/python {name}", 0)
            return
        assert block.language == "sh", f"runnable blocks are sh or python, not {block.language}"
        for command, expected in block.commands():
            if LONG_RUNNING.search(command.split(" #", 1)[0]):
                self.start(command)
            else:
                self.run(command, expected)

    def _local(self, text: str) -> str:
        return text.replace("127.0.0.1:8080", f"127.0.0.1:{self.port}")

    def run(self, command: str, expected: int) -> Ran:
        self.shell.sendline(f"{self._local(command)}\necho EXIT=$?")
        self.shell.expect(r"EXIT=(\d+)\r?\n", timeout=120)
        ran = Ran(command, self.shell.before, int(self.shell.match.group(1)))
        self.ran.append(ran)
        assert ran.exit_code == expected, f"{command!r} exited {ran.exit_code}:\n{ran.output}"
        assert "Traceback" not in ran.output, f"{command!r} printed a traceback:\n{ran.output}"
        return ran

    def start(self, command: str) -> None:
        """A long-running command in a terminal of its own, once it serves."""
        line = self._local(command.split(" #", 1)[0].strip())
        if LONG_RUNNING.search(line).group(1) == "dev":  # type: ignore[union-attr]
            self.stop_background()
            line += f" --port {self.port}"
        terminal = self._spawn("bash", ["-c", line])
        seen = io.StringIO()
        terminal.logfile_read = seen
        self.background.append((command, terminal, seen))
        if " dev" in line:
            terminal.expect("export ORBIT_SERVER=")
        if "worker" in line:
            terminal.expect(r"worker \S+ serving")

    def stop_background(self) -> None:
        """Ctrl-C in each terminal, newest first; each must stop cleanly (exit 0)."""
        while self.background:
            command, terminal, seen = self.background.pop()
            terminal.sendintr()
            terminal.expect(pexpect.EOF, timeout=60)
            terminal.close()
            assert terminal.exitstatus == 0, f"{command!r} exited {terminal.exitstatus}"
            assert "Traceback" not in seen.getvalue(), seen.getvalue()

    def close(self) -> None:
        try:
            self.stop_background()
        finally:
            self.shell.close(force=True)
            for _, terminal, _ in self.background:
                terminal.close(force=True)

    def output_of(self, command_start: str) -> str:
        """What the last command beginning with ``command_start`` printed."""
        matching = [r for r in self.ran if r.command.startswith(command_start)]
        assert matching, f"no command began with {command_start!r}"
        return matching[-1].output
