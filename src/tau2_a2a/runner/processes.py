"""Helper processes of a run: started in milliseconds, gone when the run is gone.

A fresh interpreter takes seconds of CPU to import tau2. The run's helper
processes (scoring workers, `--a2a-workers` shards) fork instead from
Python's fork server, which imports this package, and so tau2, once per run.
Each helper watches the process that started it and exits when that one
ends, even by SIGKILL, so a killed run leaves nothing behind.
"""

from __future__ import annotations

import multiprocessing
import os
import select
import sys
import threading
import time
from multiprocessing.context import BaseContext

from tau2.data_model.simulation import RunConfig

PRELOAD = ["tau2_a2a.runner.shards"]  # imports the scoring and the run modules, and tau2


def forkserver_available() -> bool:
    """Whether this platform can fork helpers from a server (not on Windows)."""
    return "forkserver" in multiprocessing.get_all_start_methods()


MIN_SIMULATIONS = 20


def helpers_worth_starting(config: RunConfig) -> bool:
    """Whether a run is big enough to pay for its fork server: 20 simulations or more.

    The server imports tau2 first, about 5 s of CPU, what scoring five
    airline simulations takes. Several small evaluations side by side (as the
    service runs them) would pay that each, and ran slower for it.
    """
    simulations = planned_simulations(config)
    return forkserver_available() and (simulations is None or simulations >= MIN_SIMULATIONS)


def planned_simulations(config: RunConfig) -> int | None:
    """Tasks x trials as the run's flags give them; None for a whole domain or split (many)."""
    tasks = len(config.task_ids) if config.task_ids else config.num_tasks
    return tasks * config.num_trials if tasks is not None else None


def usable_cores() -> int:
    """CPUs this process may run on (its affinity, not the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def helper_context() -> BaseContext:
    """The fork server with tau2 preloaded; where there is none, fresh interpreters."""
    if not forkserver_available():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def worker_context() -> BaseContext:
    """Plain fork when this process runs no other Python thread (Linux); otherwise `helper_context`.

    A process with tau2 imported and one thread, like `tau2-a2a run` once it
    has closed its card check's session, forks its workers at once, without
    waiting for a fork server to import tau2. Other threads may hold locks a
    forked child would inherit locked, so a process running any uses the
    fork server.
    """
    if sys.platform.startswith("linux") and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return helper_context()


def processes_phrase(count: int) -> str:
    """'1 process', '2 processes': how the run reports its helpers."""
    return f"{count} process" if count == 1 else f"{count} processes"


def exit_with(parent_pid: int) -> None:
    """End this helper when process `parent_pid` ends, even by SIGKILL.

    Pool workers hold both ends of their task queue and shards have no pipe
    to their parent, so neither would notice on its own.
    """

    def watch() -> None:
        try:
            select.select([os.pidfd_open(parent_pid)], [], [])  # readable once the process has exited
        except (AttributeError, OSError):  # no pidfd here: poll
            while _alive(parent_pid):
                time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def helper_started(parent_pid: int) -> None:
    """A helper's first step: Ctrl-C is its run's to handle, and it ends with the process `parent_pid`."""
    from tau2_a2a.runner.interrupt import ignore_sigint

    ignore_sigint()
    exit_with(parent_pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True
