"""Wake-ups passed between the processes of one pod (`orbit server --workers N`, issue 9): what
the waiters of one process do not take wakes the waiters of its siblings at once, over Unix
datagram sockets in the pod's directory. A hint only — wake-ups are an acceleration structure,
never authority (seed §1); the woken requests claim through MySQL. Real sockets; the sibling
is a real second process where the behaviour crosses processes. (End to end, through
`orbit server --workers 2` with its probe off: tests/e2e/test_scaling_e2e.py.)"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from orbit.api.sibling_wakeups import SiblingWakeups
from orbit.api.wakeups import Wakeups

#: A sibling process: one request waiting for (ns, q, h); prints "waiting", then what happened.
SIBLING = textwrap.dedent(
    """
    import asyncio, sys
    from orbit.api.sibling_wakeups import SiblingWakeups
    from orbit.api.wakeups import Wakeups

    async def main():
        wakeups = Wakeups(SiblingWakeups(sys.argv[1]))
        wakeups.bind(asyncio.get_running_loop())
        woken = wakeups.waiter("ns", ["q"], None)
        print("waiting", flush=True)
        try:
            await asyncio.wait_for(woken, 20)
            print("woken", flush=True)
        except TimeoutError:
            print("not woken", flush=True)
        wakeups.siblings.close()

    asyncio.run(main())
    """
)


@pytest.fixture
def pod_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Short: a Unix socket's path is limited to ~107 bytes.
    return Path(tmp_path_factory.mktemp("w"))


@pytest.fixture
def sibling(pod_dir: Path) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [sys.executable, "-c", SIBLING, str(pod_dir)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "waiting"
    yield process
    process.kill()
    process.wait(10)


def outcome(process: subprocess.Popen[str]) -> str:
    out, _ = process.communicate(timeout=30)
    return out.strip()


def test_the_supervisor_passes_every_notification_to_the_http_processes(
    pod_dir: Path, sibling: subprocess.Popen[str]
) -> None:
    """The supervising process serves no request (its Wakeups is never bound to a loop): what
    its engine loops make READY goes to the siblings in full."""
    supervisor = Wakeups(SiblingWakeups(pod_dir))
    supervisor.notify("ns", "q", "h")
    assert outcome(sibling) == "woken"


def test_what_the_waiters_here_leave_wakes_a_waiter_in_a_sibling_process(
    pod_dir: Path, sibling: subprocess.Popen[str]
) -> None:
    async def here() -> bool:
        wakeups = Wakeups(SiblingWakeups(pod_dir))
        wakeups.bind(asyncio.get_running_loop())
        mine = wakeups.waiter("ns", ["q"], None)
        wakeups.notify("ns", "q", "h", count=2)  # one for the waiter here, one left over
        await asyncio.wait_for(mine, 5)
        assert wakeups.siblings is not None
        wakeups.siblings.close()
        return mine.done()

    assert asyncio.run(here())
    assert outcome(sibling) == "woken"


def test_a_notification_the_waiters_here_take_is_not_passed_on(pod_dir: Path) -> None:
    peer = _bound(pod_dir / "peer.sock")

    async def here() -> int:
        siblings = SiblingWakeups(pod_dir, name="here")
        wakeups = Wakeups(siblings)
        wakeups.bind(asyncio.get_running_loop())
        mine = wakeups.waiter("ns", ["q"], None)
        wakeups.notify("ns", "q", "h")
        await asyncio.wait_for(mine, 5)
        siblings.close()
        return siblings.sent

    assert asyncio.run(here()) == 0
    with pytest.raises(BlockingIOError):
        peer.recv(1024)


def test_a_notification_from_a_sibling_is_never_passed_back(pod_dir: Path) -> None:
    """Else two processes with no waiter would bounce it between them for ever."""

    async def here() -> tuple[int, int]:
        receiving = SiblingWakeups(pod_dir, name="receiving")
        Wakeups(receiving).bind(asyncio.get_running_loop())  # no waiter there
        sending = SiblingWakeups(pod_dir, name="sending")
        sending.pass_on("ns", "q", "h", 1)
        for _ in range(100):
            await asyncio.sleep(0.01)
            if receiving.received:
                break
        receiving.close()
        sending.close()
        return receiving.received, receiving.sent

    assert asyncio.run(here()) == (1, 0)


def test_a_sibling_that_is_gone_is_forgotten_and_its_socket_file_removed(pod_dir: Path) -> None:
    gone = pod_dir / "4242.sock"
    _bound(gone).close()  # a process killed without cleaning up: its file stays, unbound
    assert gone.exists()
    siblings = SiblingWakeups(pod_dir, name="here")
    siblings.pass_on("ns", "q", "h", 1)  # no error
    assert not gone.exists()
    assert siblings.sent == 0
    siblings.close()


def test_a_malformed_datagram_wakes_nobody_and_stops_nothing(pod_dir: Path) -> None:
    async def here() -> bool:
        wakeups = Wakeups(SiblingWakeups(pod_dir, name="here"))
        wakeups.bind(asyncio.get_running_loop())
        mine = wakeups.waiter("ns", ["q"], None)
        sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sender.sendto(b"not a notification", str(pod_dir / "here.sock"))
        await asyncio.sleep(0.1)
        survived = not mine.done()
        sender.sendto(b"ns\0q\0h\x001", str(pod_dir / "here.sock"))  # the next one still works
        await asyncio.wait_for(mine, 5)
        assert wakeups.siblings is not None
        wakeups.siblings.close()
        return survived

    assert asyncio.run(here())


def _bound(path: Path) -> socket.socket:
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.setblocking(False)
    receiver.bind(str(path))
    return receiver


def test_a_process_that_cannot_bind_its_socket_serves_on_and_still_wakes_its_own(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A missing directory (or a path too long for a Unix socket) costs the shortcut, not the
    process: its own submissions still wake its own waiters, and its probe finds the rest."""

    async def here() -> bool:
        wakeups = Wakeups(SiblingWakeups(tmp_path / "gone"))
        wakeups.bind(asyncio.get_running_loop())
        mine = wakeups.waiter("ns", ["q"], None)
        wakeups.notify("ns", "q", "h")
        await asyncio.wait_for(mine, 5)
        assert wakeups.siblings is not None
        wakeups.siblings.close()
        return mine.done()

    assert asyncio.run(here())
    assert "not receiving wake-ups from sibling processes" in caplog.text
