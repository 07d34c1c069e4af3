"""`orbit …` (usually `orbit server`) with a wall-clock sampler of the scheduler's threads.

Every 5 ms the sampler reads the stack of each thread whose name starts with ``orbit-scheduler``
(the loop and its batch threads); every second it writes to the file ``ORBIT_BENCH_PROFILE_OUT``
names where those threads spent their busy time: each function's share of the samples with it on
the stack (cumulative) and at the top (self). Samples of a thread waiting
for work (its loop's interval, the pool's queue) are counted apart as idle. Wall clock, not CPU:
time waiting on MariaDB shows up in the driver's socket reads.
``bench/schedules/schedules.py --profile`` runs the server this way.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
from pathlib import Path
from types import FrameType

PERIOD = 0.005
PREFIX = "orbit-scheduler"
IDLE = {("threading.py", "wait"), ("queue.py", "get"), ("thread.py", "_worker")}
TOP = 30


class Sampler:
    def __init__(self) -> None:
        self.cumulative: collections.Counter[str] = collections.Counter()
        self.own: collections.Counter[str] = collections.Counter()
        self.busy = self.idle = 0
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        out, written = os.environ.get("ORBIT_BENCH_PROFILE_OUT"), time.monotonic()
        while True:
            time.sleep(PERIOD)
            if out and time.monotonic() - written > 1:  # the server may end by a signal
                Path(out).write_text(self.summary())
                written = time.monotonic()
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if names.get(ident, "").startswith(PREFIX):
                    self._sample(frame)

    def _sample(self, frame: FrameType) -> None:
        stack = []
        f: FrameType | None = frame
        while f is not None:
            code = f.f_code
            stack.append((os.path.basename(code.co_filename), code.co_name, code.co_firstlineno))
            f = f.f_back
        top = stack[0]
        if (top[0], top[1]) in IDLE or _waiting_for_work(stack):
            self.idle += 1
            return
        self.busy += 1
        self.own[_label(top)] += 1
        for label in {_label(entry) for entry in stack}:
            self.cumulative[label] += 1

    def summary(self) -> str:
        lines = [
            f"busy samples {self.busy}, idle {self.idle} (every {PERIOD * 1000:.0f} ms)",
            "cumulative  self  function",
        ]
        for label, count in self.cumulative.most_common(TOP):
            share, own = 100 * count / max(self.busy, 1), 100 * self.own[label] / max(self.busy, 1)
            lines.append(f"{share:9.1f}% {own:5.1f}%  {label}")
        return "\n".join(lines)


def _waiting_for_work(stack: list[tuple[str, str, int]]) -> bool:
    """A batch thread parked in the pool's queue, or the loop thread in its interval wait."""
    return any(name in ("_wait_for_tstate_lock",) for _, name, _ in stack[:2]) or (
        stack[0][1] == "wait" and any(name == "_run" for _, name, _ in stack[:4])
    )


def _label(entry: tuple[str, str, int]) -> str:
    return f"{entry[0]}:{entry[2]} {entry[1]}"


def main() -> None:
    sampler = Sampler()
    sampler.start()
    from orbit.cli.main import app

    sys.argv = ["orbit", *sys.argv[1:]]
    app()


if __name__ == "__main__":
    main()
