"""tau2's scoring of finished simulations, in worker processes.

After each simulation, tau2's `run_task` scores it with `evaluate_simulation`:
it builds the domain database twice more, replays the trajectory and the
golden actions, and hashes both databases. That is most of tau2's CPU per
simulation, all of it Python holding the interpreter lock for up to a few
hundred milliseconds per call. With many simulations in threads of one
process, it saturates one core and keeps the A2A client threads from reading
replies, which inflates both the wall time and the latencies we measure.

Here, while an A2A run is going on, `tau2.run.evaluate_simulation` sends the
same call, with the same arguments, to a pool of processes and waits for its
result. The scoring code is tau2's own; only the process it runs in changes.
The pool forks from a server that has imported tau2 once, so a worker starts
at once. A domain that a fresh interpreter does not know (one registered at
runtime in this process) and a pool that broke (a worker killed, or a script
without a `__main__` guard, see `refuse_script_rerun`) fall back to scoring in
this process, so no simulation is lost.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from multiprocessing.context import BaseContext
from typing import Any

import tau2.run
from tau2.data_model.simulation import RunConfig
from tau2.evaluator.evaluator import evaluate_simulation
from tau2.registry import registry

from tau2_a2a.runner.interrupt import stopping
from tau2_a2a.tau2bench.environments import install as install_environments
from tau2_a2a.runner.processes import (
    forkserver_available,
    helper_started,
    helper_context,
    helpers_worth_starting,
    usable_cores,
)

log = logging.getLogger("tau2_a2a.client")


def refuse_script_rerun() -> None:
    """Stop a script that calls `evaluate()` from running again inside each scoring process.

    A scoring process runs the main script once more as it starts (Python's
    multiprocessing does, for `__main__`'s functions). Unguarded, the script
    would start a whole evaluation there; this ends that process instead, with
    what to do, and the run it belongs to scores in its own process.
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise RuntimeError(
            "tau2-a2a: the script that calls evaluate() ran again in a scoring process, as Python's "
            "multiprocessing does with the main script; put the call under `if __name__ == \"__main__\":` "
            "(or pass scoring_processes=0). The run goes on, scoring in its main process."
        )


def default_scoring_processes(config: RunConfig) -> int:
    """One scoring process per usable core, no more than simulations at once; 0 (in process) when not worth it.

    Small runs, and runs of one simulation at a time, score in the main
    process (see `helpers_worth_starting`).
    """
    if not helpers_worth_starting(config):
        return 0
    processes = min(usable_cores(), config.max_concurrency)
    return processes if processes > 1 else 0


def has_domain(domain: str) -> bool:
    """Whether a fresh interpreter with tau2 imported can build `domain`'s environment."""
    try:
        registry.get_env_constructor(domain)
    except Exception:
        return False
    return True


def _start_worker(parent_pid: int) -> None:
    """A scoring process: builds environments from once-read databases, leaves Ctrl-C to its run, ends with it."""
    install_environments()
    helper_started(parent_pid)


class ScoringPool:
    """Worker processes that run `evaluate_simulation`; in-process scoring when they cannot."""

    def __init__(self, processes: int, context: BaseContext) -> None:
        self._executor = ProcessPoolExecutor(max_workers=processes, mp_context=context,
                                             initializer=_start_worker, initargs=(os.getpid(),))
        self._known_domains: dict[str, bool] = {}
        self._lock = threading.Lock()
        self.broken = False
        self.scored_in_workers = 0
        self.scored_here = 0
        if context.get_start_method() == "fork":
            self._start_workers(processes)  # forks them all now, before this process starts any thread
        else:
            threading.Thread(target=self._start_workers, args=(processes,), name="scoring-start",
                             daemon=True).start()

    def _start_workers(self, processes: int) -> None:
        """Start the workers (a new fork server first imports tau2: seconds) while the first simulations run."""
        try:
            for _ in range(processes):
                self._executor.submit(usable_cores)
        except (RuntimeError, BrokenProcessPool):
            pass  # closed or broken before it started: scoring falls back on its own

    def score(self, **arguments: Any) -> Any:
        try:
            if self._knows(arguments["domain"]):
                reward_info = self._executor.submit(evaluate_simulation, **arguments).result()
                with self._lock:
                    self.scored_in_workers += 1
                return reward_info
        except BrokenProcessPool as error:
            with self._lock:
                if not self.broken:
                    log.warning("Scoring processes stopped (%s); scoring the remaining simulations in this "
                                "process", error)
                self.broken = True
        reward_info = evaluate_simulation(**arguments)
        with self._lock:
            self.scored_here += 1
        return reward_info

    def _knows(self, domain: str) -> bool:
        """Whether the workers can score `domain`; raises BrokenProcessPool once they cannot score at all."""
        if self.broken:
            raise BrokenProcessPool("the scoring processes stopped earlier")
        with self._lock:  # one check per domain, however many threads ask at once
            if domain not in self._known_domains:
                self._known_domains[domain] = self._executor.submit(has_domain, domain).result()
                if not self._known_domains[domain]:
                    log.info("Domain %r is not known to a fresh tau2; scoring it in this process", domain)
            return self._known_domains[domain]

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


_pool: ScoringPool | None = None
_users = 0
_pool_lock = threading.Lock()


def _score(**arguments: Any) -> Any:
    """tau2.run's `evaluate_simulation` while a scoring pool is open."""
    pool = _pool
    return pool.score(**arguments) if pool is not None else evaluate_simulation(**arguments)


@contextmanager
def scoring_in_processes(processes: int, context: BaseContext | None = None) -> Iterator[ScoringPool | None]:
    """Score simulations in `processes` worker processes while inside; 0 (or Windows) keeps them here.

    The workers come from the run's fork server (see `processes`), or from
    `context`: a shard, itself forked with tau2 imported and with one thread,
    forks its workers directly. Runs inside each other (or in parallel
    threads) share one pool: the first opens it, the last closes it.
    """
    global _pool, _users
    if processes < 1 or not forkserver_available():
        yield None
        return
    with _pool_lock:
        if _pool is None:
            _pool = ScoringPool(processes, context or helper_context())
            tau2.run.evaluate_simulation = _score  # type: ignore[attr-defined]
        _users += 1
        pool = _pool
    try:
        yield pool
    finally:
        with _pool_lock:
            _users -= 1
            if _users == 0 and _pool is not None and not stopping.is_set():  # a stopped run leaves it to exit_with
                tau2.run.evaluate_simulation = evaluate_simulation  # type: ignore[attr-defined]
                _pool.close()
                _pool = None
