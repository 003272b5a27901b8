"""`tau2-a2a run ARGS`, held at the worst moment of a stop: after the run counted what finished, before it exits.

For tests/runner/test_stop_agreement.py, run as `python -m tests.runner.stopped_after_counting run ...`. Once a
signal stopped the run and its metrics were written, this process waits until a simulation finished since
then has either saved itself into the results file, or is waiting to (blocked on the results file's lock);
only then does the run go on to say what it kept and exit. A simulation still in flight when the signal
landed thus always reaches its save before the process ends, the moment a stop used to lose to.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tau2_a2a.runner import run
from tau2_a2a.tau2bench.run import results_file, stopping
from tau2_a2a.tau2bench.run.runs import simulations_saved

WAIT_SECONDS = 300.0  # for a simulation in flight to reach its save, on a busy machine
NOTHING_SAVED = 99  # the exit code when none did: the test that started this process cannot decide then


class WatchedLock:
    """The results file's lock, telling when a thread other than the main one waits for it."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.waited = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(blocking=False):
            return True
        if threading.current_thread() is not threading.main_thread():
            self.waited.set()
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def main() -> int:
    watched = WatchedLock()
    stopping.writes = results_file.writes = watched  # type: ignore[assignment]
    write_metrics = run.write_metrics

    def write_metrics_then_let_a_save_come(path: Path, *args: Any) -> dict[str, Any]:
        metrics = write_metrics(path, *args)
        if not stopping.stopping.is_set():
            return metrics
        counted = len(metrics["simulations"])
        deadline = time.monotonic() + WAIT_SECONDS
        while not watched.waited.is_set() and simulations_saved(path) == counted:
            if time.monotonic() > deadline:
                sys.stderr.write("no simulation reached its save after the stop\n")
                sys.stderr.flush()
                os._exit(NOTHING_SAVED)
            time.sleep(0.02)
        return metrics

    run.write_metrics = write_metrics_then_let_a_save_come  # type: ignore[assignment]
    from tau2_a2a.cli import main as cli_main

    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
