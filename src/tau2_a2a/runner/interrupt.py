"""Ctrl-C (or SIGTERM) during a run: stop at once, keep what finished, say how to resume.

tau2 runs simulations in a thread pool and, on leaving it, waits for every
simulation in flight; a KeyboardInterrupt then surfaces as a traceback seconds
later. Here the first SIGINT marks the run as stopping and raises
KeyboardInterrupt in the main thread, once it froze the results file (a write
in progress ends, and no other starts: a simulation that finishes after the
signal is not saved); tau2.run's thread pool then cancels the simulations not
yet started and leaves those in flight to be abandoned. The run writes the
metrics for what the file holds, says how many simulations it kept from the
same count, and the process ends without waiting for the abandoned threads. A second SIGINT ends the process
at once. Inside tau2, the pool that stops is `tau2bench.run.stopping`.

SIGTERM (what `kill`, a container runtime or a job scheduler sends) is taken
exactly so; the process then exits 143 (128 + 15), the code that says
SIGTERM ended it, where Ctrl-C exits 130.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from tau2_a2a.tau2bench.run.stopping import freeze_writes, stopping

EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_TERMINATED = 143  # 128 + SIGTERM

__all__ = ["EXIT_INTERRUPTED", "EXIT_TERMINATED", "RunInterrupted", "exit_now", "stop_on_sigint", "stopped_by"]

_SIGNALS: dict[int, tuple[str, int]] = {signal.SIGINT: ("Ctrl-C", EXIT_INTERRUPTED),
                                        signal.SIGTERM: ("SIGTERM", EXIT_TERMINATED)}
_stopped_by: list[int] = []  # the signal that stopped this process's run, once one did


def stopped_by() -> tuple[str, int]:
    """What stopped the run, in words, and the exit code that says so: Ctrl-C (130) unless SIGTERM did (143)."""
    return _SIGNALS[_stopped_by[0] if _stopped_by else signal.SIGINT]


class RunInterrupted(Exception):
    """A run stopped by Ctrl-C or SIGTERM; its finished simulations are kept in `results_path`."""

    def __init__(self, kept: int, results_path: Path, metrics_path: Path | None) -> None:
        self.kept = kept
        self.results_path = results_path
        self.metrics_path = metrics_path
        self.by, self.exit_code = stopped_by()
        if kept:
            metrics = f" (protocol metrics: {metrics_path})" if metrics_path else ""
            said = f"{kept} finished simulation{'' if kept == 1 else 's'} kept in {results_path}{metrics}"
        else:
            said = f"no simulation had finished, so nothing is kept for {results_path}"
        super().__init__(f"Stopped by {self.by}: {said}")


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


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if stopping.is_set():
        by, code = _SIGNALS.get(signum, _SIGNALS[signal.SIGINT])
        exit_now(code, f"Stopped at once by a second {by}; the results file keeps every simulation saved before "
                       "it.")
    _stopped_by.append(signum)
    stopping.set()
    freeze_writes()  # what the results file holds now is what the run keeps, says it keeps, and measures
    raise KeyboardInterrupt


@contextmanager
def stop_on_sigint() -> Iterator[None]:
    """Handle Ctrl-C and SIGTERM as above while inside (from the main thread; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _on_signal) for signum in _SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
