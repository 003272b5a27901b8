"""Ctrl-C during a run: stop at once, keep what finished, say how to resume.

tau2 runs simulations in a thread pool and, on leaving it, waits for every
simulation in flight; a KeyboardInterrupt then surfaces as a traceback seconds
later. Here the first SIGINT marks the run as stopping and raises
KeyboardInterrupt in the main thread; tau2.run's thread pool then cancels the
simulations not yet started and leaves those in flight to be abandoned. The
run freezes its results file (no write starts after that, and every write is
atomic), writes the metrics for what the file holds, and the process ends
without waiting for the abandoned threads. A second SIGINT ends the process
at once. A process forked from the run (a shard worker, say) ends at once on
SIGINT: its results file is complete after every write.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import tau2.run

EXIT_INTERRUPTED = 130

stopping = threading.Event()  # set by the first Ctrl-C of this process's run
writes = threading.RLock()  # held by every results file write (see results_file.atomic_open)
_children: set[int] = set()  # worker processes to pass a Ctrl-C on to
_owner: int | None = None  # the process whose run installed the handler


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


def freeze_writes() -> None:
    """Once Ctrl-C stopped the run (the process is about to end): wait for a results file write in progress,
    then let no other start. Elsewhere (a KeyboardInterrupt in a caller's own process) nothing is left
    running to write."""
    if stopping.is_set():
        writes.acquire()


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


def pass_on_to(pids: list[int]) -> None:
    """Worker processes that get this run's Ctrl-C too (when it was sent to this process alone)."""
    _children.update(pids)


def _on_sigint(signum: int, frame: Any) -> None:
    if os.getpid() != _owner:  # a forked worker: its files are whole after every write
        os._exit(EXIT_INTERRUPTED)
    if stopping.is_set():
        exit_now(EXIT_INTERRUPTED, "Stopped at once by a second Ctrl-C; the results file keeps every "
                                   "simulation saved before it.")
    stopping.set()
    for pid in list(_children):
        try:
            os.kill(pid, signal.SIGINT)
        except OSError:
            pass
    raise KeyboardInterrupt


@contextmanager
def stop_on_sigint() -> Iterator[None]:
    """Handle Ctrl-C as above while inside (from the main thread; elsewhere nothing changes)."""
    global _owner
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _owner = os.getpid()
    previous = signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def end_at_once_on_sigint() -> None:
    """For a worker process: Ctrl-C ends it at once (its parent keeps and reports what it finished)."""
    signal.signal(signal.SIGINT, lambda signum, frame: os._exit(EXIT_INTERRUPTED))


def ignore_sigint() -> None:
    """For a helper process (scoring): Ctrl-C is its run's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class _StoppableExecutor(ThreadPoolExecutor):
    """tau2.run's thread pool: left by a stopped run, it cancels what has not started and waits for nothing.

    A KeyboardInterrupt without the handler above (in a caller's own process, which goes on) still waits
    for the simulations in flight, as tau2 does, so none writes after the caller got control back.
    """

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> bool:
        if stopping.is_set():
            self.shutdown(wait=False, cancel_futures=True)
            return False
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            self.shutdown(wait=True, cancel_futures=True)
            return False
        return super().__exit__(exc_type, exc_value, traceback)


def install() -> None:
    """Shadow `ThreadPoolExecutor` in tau2.run's module globals only."""
    tau2.run.ThreadPoolExecutor = _StoppableExecutor  # type: ignore[attr-defined]
