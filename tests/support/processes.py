"""Processes on this machine (Linux /proc), and waiting for something to happen."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path


def descendants(pid: int) -> set[int]:
    """The processes started by `pid`, and by those, and so on (Linux /proc)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        parents[int(stat.parent.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def running() -> set[int]:
    """Every process id on the machine (Linux /proc)."""
    return {int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()}


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.2)


def gone(pids: set[int]) -> bool:
    return not any(Path(f"/proc/{pid}").exists() for pid in pids)
