"""What a benchmark's processes cost: CPU time, resident and proportional memory, sampled from /proc (Linux).

The scale bench (scale_slow_agent.py) measures each run with these: this
process's CPU and RSS, and the CPU and PSS of every process it started (Ray's
too), the agent's process left out.
"""

from __future__ import annotations

import os
import resource
import threading
from pathlib import Path


def rss_mb() -> float:
    """This process's resident memory now (Linux /proc), in MiB."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


class MemorySampler:
    """Peak memory while a run goes on: this process's RSS, and the PSS of it with its helpers.

    PSS (proportional set size) counts a page shared by n processes as 1/n in
    each, so the sum over the run's processes (with --ray local, Ray's own
    processes and its actors) is what they take together. The agent's
    process (`exclude`) is not counted. The same samples keep each process's
    CPU time so far, so `tree_cpu` is the CPU of the run's processes (to the
    last sample, once a second), the machine's other work left out.
    """

    def __init__(self, exclude: int, interval: float = 0.1, tree_every: int = 10) -> None:
        self.interval = interval
        self.tree_every = tree_every  # the PSS of every process costs more: once a second
        self.exclude = exclude
        self.peak = rss_mb()
        self.cpu_at_start = tree_cpu_seconds(exclude)
        self.cpu_by_process = dict(self.cpu_at_start)
        self.peak_tree = tree_pss_mb(exclude)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        ticks = 0
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, rss_mb())
            ticks += 1
            if ticks % self.tree_every == 0:
                self.peak_tree = max(self.peak_tree, tree_pss_mb(self.exclude))
                self.cpu_by_process.update(tree_cpu_seconds(self.exclude))

    @property
    def tree_cpu(self) -> float:
        """CPU seconds the run's processes (this one and its helpers, not the agent) spent during the run."""
        return sum(seconds - self.cpu_at_start.get(pid, 0.0) for pid, seconds in self.cpu_by_process.items())

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb())
        self.cpu_by_process.update(tree_cpu_seconds(self.exclude))


def tree_pss_mb(exclude: int) -> float:
    """PSS of this process and every process it started (but `exclude`), in MiB (Linux smaps_rollup)."""
    import psutil  # a dependency of tau2

    me = psutil.Process()
    total_kb = 0
    for process in [me, *me.children(recursive=True)]:
        if process.pid == exclude:
            continue
        try:
            rollup = Path(f"/proc/{process.pid}/smaps_rollup").read_text()
        except OSError:
            continue  # gone meanwhile
        total_kb += next((int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")), 0)
    return round(total_kb / 1024, 1)


def tree_cpu_seconds(exclude: int) -> dict[int, float]:
    """CPU seconds so far of this process and every process it started (but `exclude`), by process id."""
    import psutil

    me = psutil.Process()
    seconds = {}
    for process in [me, *me.children(recursive=True)]:
        if process.pid == exclude:
            continue
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue  # gone meanwhile
        seconds[process.pid] = times.user + times.system
    return seconds


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def machine_cpu_seconds() -> float:
    """CPU time spent by every process on this machine so far (Linux /proc/stat): this one,
    Ray's processes when it started them, and the agent, which share the cores."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")
