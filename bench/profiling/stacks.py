"""Sums py-spy's collapsed stacks (``py-spy record --format raw``, as
``bench/tasks/e2e.py --profile`` writes them) by the module that did the work: a sample is
charged to its innermost frame of Orbit's code or of a library's, so where a process's CPU goes
reads in a few lines.

Usage: ``.venv/bin/python bench/profiling/stacks.py FILE... [--top 25] [--frames] [--only TEXT]
[--skip TEXT]`` (``--frames``: by innermost function instead of module; ``--only``/``--skip``:
the stacks that name, or do not name, a frame containing TEXT).
"""

from __future__ import annotations

import argparse
import collections
import re

SITE = re.compile(r"\((?:.*/site-packages/|.*/lib/python3\.\d+/|.*/wt/[^/]+/)?([^:)]*)")


def place(frame: str, functions: bool) -> str:
    """``module path`` (or ``function (module path)``) of one collapsed frame."""
    found = SITE.search(frame)
    where = found.group(1) if found else frame
    if functions:
        return f"{frame.split(' (')[0]} ({where})"
    parts = where.split("/")
    return "/".join(parts[:2]) if parts[0] in ("orbit", "orbit_store", "orbit_sdk") else parts[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--frames", action="store_true")
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--skip", action="append", default=[])
    args = parser.parse_args()
    for name in args.files:
        by_place: collections.Counter[str] = collections.Counter()
        by_thread: collections.Counter[str] = collections.Counter()
        total = 0
        with open(name) as lines:
            for line in lines:
                stack, _, count = line.rstrip().rpartition(" ")
                if args.only and not any(text in stack for text in args.only):
                    continue
                if any(text in stack for text in args.skip):
                    continue
                frames = stack.split(";")
                samples = int(count)
                total += samples
                by_thread[re.sub(r"\d+", "N", frames[0])] += samples
                by_place[place(frames[-1], args.frames)] += samples
        print(f"== {name}: {total} samples")
        for thread, samples in by_thread.most_common(6):
            print(f"  thread {100 * samples / total:5.1f}%  {thread[:90]}")
        for where, samples in by_place.most_common(args.top):
            print(f"  {100 * samples / total:5.1f}%  {where[:110]}")


if __name__ == "__main__":
    main()
