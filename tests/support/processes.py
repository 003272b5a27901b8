"""Processes on this machine (Linux /proc). `wait_until` is waiting.py's, kept here for its many callers."""

from __future__ import annotations

from pathlib import Path

from tests.support.waiting import wait_until as wait_until


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


def gone(pids: set[int]) -> bool:
    return not any(Path(f"/proc/{pid}").exists() for pid in pids)
