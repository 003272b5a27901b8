"""Ctrl-C during a run: stop at once, keep what finished, say how to resume.

tau2 runs simulations in a thread pool and, on leaving it, waits for every
simulation in flight; a KeyboardInterrupt then surfaces as a traceback seconds
later. Here the first SIGINT marks the run as stopping and raises
KeyboardInterrupt in the main thread; tau2.run's thread pool then cancels the
simulations not yet started and leaves those in flight to be abandoned. The
run freezes its results file (no write starts after that, and every write is
atomic), writes the metrics for what the file holds, and the process ends
without waiting for the abandoned threads. A second SIGINT ends the process
at once. Inside tau2, the pool that stops is `tau2bench.stopping`.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from tau2_a2a.tau2bench.stopping import freeze_writes, stopping

EXIT_INTERRUPTED = 130

__all__ = ["EXIT_INTERRUPTED", "RunInterrupted", "exit_now", "freeze_writes", "stop_on_sigint"]


class RunInterrupted(Exception):
    """A run stopped by Ctrl-C; its finished simulations are kept in `results_path`."""

    def __init__(self, kept: int, results_path: Path, metrics_path: Path | None) -> None:
        self.kept = kept
        self.results_path = results_path
        self.metrics_path = metrics_path
        if kept:
            metrics = f" (protocol metrics: {metrics_path})" if metrics_path else ""
            said = f"{kept} finished simulation{'' if kept == 1 else 's'} kept in {results_path}{metrics}"
        else:
            said = f"no simulation had finished, so nothing is kept for {results_path}"
        super().__init__(f"Stopped by Ctrl-C: {said}")


def exit_now(code: int, line: str) -> None:
    """Print `line` on stderr and end the process without waiting for any thread."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError, RuntimeError):
        pass
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, RuntimeError):
        pass
    os._exit(code)


def _on_sigint(signum: int, frame: Any) -> None:
    if stopping.is_set():
        exit_now(EXIT_INTERRUPTED, "Stopped at once by a second Ctrl-C; the results file keeps every "
                                   "simulation saved before it.")
    stopping.set()
    raise KeyboardInterrupt


@contextmanager
def stop_on_sigint() -> Iterator[None]:
    """Handle Ctrl-C as above while inside (from the main thread; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
