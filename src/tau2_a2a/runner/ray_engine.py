"""An evaluation's simulations on a Ray cluster; the driver keeps the one results file.

The driver runs tau2's own run, as a run in one process does: it
plans the simulations (tasks x trials, tau2's seeds), resumes from the results
file, prints tau2's progress and saves each simulation as it arrives (whole
files only, see `tau2bench.run.results_file`). Only tau2's call for one
simulation goes to a Ray actor, which runs the conversation and scores it
there and sends the finished SimulationRun back. So the results file is the
one tau2 writes in one process, and the latencies are measured in the actor.

Actors run several simulations each in threads, as tau2 does, and are spread
over the cluster's nodes: as few as the run's concurrency needs (one per
SIMULATIONS_PER_ACTOR simulations at once), but at least one per node with
CPUs and at most one per CPU, since a fresh interpreter takes seconds of CPU
to import tau2 and a simulation, scored with cached environments, little (see
docs/ray.md). The driver hands out the run's --max-concurrency slots among
them: a thread of tau2's whose simulation ended takes the next free slot, so
no actor waits while another has a queue. Failures are declared, not handled
by hand: an actor that dies (killed, out of memory, its node gone) is
restarted, on another node if its own is gone, and its unfinished simulations
run again, at most RETRIES times; an exception inside a simulation (the
agent's doing) is not retried. Only what an actor
returns is saved, so no simulation is counted twice.

The A2A config, bearer token included, reaches each actor as an argument of
its constructor, in memory: never Ray's runtime environment, job metadata or
a log line. Each actor makes its own A2A session from it. With tracing on, the
driver's OTEL_ variables go the same way, so every actor exports its spans,
and each simulation's span context goes with its arguments, so an actor's
spans join the driver's trace.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlparse

from tau2_a2a.client import tracing
from tau2_a2a.client.config import AUTH_TOKEN_ENV, A2AConfig
from tau2_a2a.client.errors import AgentAuthError
from tau2_a2a.client.records import current_node, set_node
from tau2_a2a.client.session import A2ASession
from tau2_a2a.errors import ConfigError, first_line
from tau2_a2a.runner.outcome import RESUME, SimulationLost
from tau2_a2a.tau2bench.run.orchestration import on_session, run_task, simulations_by
from tau2_a2a.tau2bench.seam.distribution import SimulationRun, mend_import_effects
from tau2_a2a.tau2bench.seam.hooks import tau2_hooks
from tau2_a2a.tau2bench.speed.environments import install as install_environments

log = logging.getLogger(__name__)

RETRIES = 2  # runs of a simulation again after the actor running it died
# Each actor reserves half a CPU: when a node leaves, its actors restart on the nodes left (while half the
# cluster's CPUs or more are left) instead of waiting for a CPU that never frees.
ACTOR_CPUS = 0.5
# Simulations one actor runs at once before the run starts another: one interpreter kept up with 32 at once
# against a 0.5 s agent (bench/scale_slow_agent.py), and each actor more costs seconds of CPU to start.
SIMULATIONS_PER_ACTOR = 32
CONNECT_SECONDS = 5.0
# Ray Client's head starts a server process per driver, and that start fails now and then, more often on a busy
# head: the process dies as Ray's proxier forks it (ray-project/ray#63202, open in Ray 2.60). The driver hears
# "Initialization failure from server", with the proxier's traceback: "Starting Ray client server failed", or
# psutil.ZombieProcess when the process died while the proxier looked at it. A new connection gets a new server,
# so the driver tries again, 1, 2, 4 and 8 s apart.
CLIENT_SERVER_ATTEMPTS = 5
CLIENT_SERVER_BACKOFF_SECONDS = 1.0
INITIALIZATION_FAILED = "Initialization failure from server"
# How long `--ray local` waits for its head's GCS to start (Ray's own default, 30 s, is short on a busy machine).
GCS_WAIT_ENV = "RAY_gcs_server_port_wait_time_s"
GCS_WAIT_SECONDS = "120"
LOCAL_OBJECT_STORE_BYTES = 256 * 2**20  # simulations are small: a few hundred kB each
# `--ray local` starts no idle worker per CPU for its driver (Ray's default): the run's actors, often fewer than
# the CPUs, start their own, and each idle one costs half a second of CPU and ~100 MB for nothing.
LOCAL_SYSTEM_CONFIG = {"prestart_worker_first_driver": False}


def usable_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextmanager
def simulations_on_ray(address: str, a2a: A2AConfig, concurrency: int, simulations: int,
                       results_path: Path) -> Iterator[None]:
    """While inside, tau2's run in this process (the driver) sends each simulation to an actor on the
    Ray cluster at `address`."""
    with connected(address):
        pool = ActorPool.start(a2a, concurrency, simulations, results_path)
        print(pool.describe(address), flush=True)
        with pool.running_tau2_simulations():
            yield


def check_address(address: str) -> None:
    """`local`, `auto`, `ray://HOST:PORT` (Ray Client) or `HOST:PORT` (a head node's GCS), reachable."""
    if address in ("local", "auto"):
        return
    parsed = urlparse(address if "://" in address else f"gcs://{address}")
    if parsed.scheme not in ("ray", "gcs") or not parsed.hostname or not parsed.port:
        raise ConfigError(f"--ray {address!r} is not a Ray address: pass local, auto, ray://HOST:PORT "
                          "(Ray Client) or HOST:PORT (the head node's GCS).")
    try:
        socket.create_connection((parsed.hostname, parsed.port), timeout=CONNECT_SECONDS).close()
    except OSError as error:
        raise ConfigError(
            f"Cannot reach the Ray cluster at {address} ({error.strerror or error}). Start it with "
            "`ray start --head` on that machine (Ray Client listens on port 10001, the GCS on 6379), or pass "
            "--ray local to run on this machine."
        ) from None


@contextmanager
def connected(address: str) -> Iterator[None]:
    """This process as the driver of a job on the cluster at `address` (`local`: a new one, stopped after)."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--ray needs Ray: pip install 'tau2-a2a[ray]'.") from None
    check_address(address)
    try:
        if address == "local":
            os.environ.setdefault(GCS_WAIT_ENV, GCS_WAIT_SECONDS)  # a busy machine can take over Ray's 30 s
            with _environment_without(AUTH_TOKEN_ENV):  # the cluster's processes inherit this environment
                ray.init(address="local", num_cpus=usable_cores(), include_dashboard=False,
                         object_store_memory=LOCAL_OBJECT_STORE_BYTES, logging_level=logging.WARNING,
                         _system_config=LOCAL_SYSTEM_CONFIG)
        else:
            _init_retrying_client_server(ray, address)
    except ConnectionError as error:
        if address == "auto":
            hint = "this machine has joined no cluster: start one with `ray start --head`, or pass --ray local"
        elif _server_start_failed(error):
            hint = (f"its head node failed to start this driver's Ray Client server {CLIENT_SERVER_ATTEMPTS} times "
                    "(its ray_client_server_*.err logs say why); try again, or run the command on a node of the "
                    "cluster with --ray auto")
        else:
            hint = "check that the cluster is up and runs Ray 2.60"
        raise ConfigError(f"Cannot connect to the Ray cluster at {address} ({_reason(error)}); {hint}.") from None
    try:
        yield
    finally:
        ray.shutdown()


def _init_retrying_client_server(ray: ModuleType, address: str) -> None:
    """ray.init at `address`; again, with backoff, while Ray Client's head fails to start this driver's server
    (said once in the log)."""
    for attempt in range(1, CLIENT_SERVER_ATTEMPTS + 1):
        try:
            ray.init(address=address, logging_level=logging.WARNING)
            return
        except ConnectionError as error:
            if not _server_start_failed(error) or attempt == CLIENT_SERVER_ATTEMPTS:
                raise
            if attempt == 1:
                log.warning("The Ray cluster at %s failed to start this driver's Ray Client server (%s); trying "
                            "again, up to %d more times.", address, _reason(error), CLIENT_SERVER_ATTEMPTS - 1)
            ray.shutdown()
            time.sleep(CLIENT_SERVER_BACKOFF_SECONDS * 2 ** (attempt - 1))


def _server_start_failed(error: BaseException) -> bool:
    """Whether Ray Client's head refused this driver at its start (a new connection may well succeed)."""
    return INITIALIZATION_FAILED in str(error)


def _reason(error: BaseException) -> str:
    """One line for a ConnectionError of ray.init: the last line of the traceback an initialization failure
    carries (its cause), else the first line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    return (lines[-1] if _server_start_failed(error) else lines[0])[:300]


@contextmanager
def _environment_without(name: str) -> Iterator[None]:
    value = os.environ.pop(name, None)
    try:
        yield
    finally:
        if value is not None:
            os.environ[name] = value


class SimulationActor:
    """One Ray worker process: whole simulations (conversation and scoring) with tau2's `run_task`."""

    def __init__(self, a2a: A2AConfig, otel: dict[str, str] | None = None) -> None:
        import ray

        os.environ.update(otel or {})  # the driver's OTEL_ variables: this actor exports its spans alike
        tracing.setup()
        mend_import_effects()
        self._for_good = ExitStack()  # this process is ours: tau2-a2a's parts stay in place in it
        self._for_good.enter_context(tau2_hooks())
        install_environments()  # environments from databases read once in this actor
        self.session = A2ASession(a2a)
        set_node(ray.get_runtime_context().get_node_id())

    def where(self) -> tuple[str, int]:
        """The Ray node and the process this actor runs in."""
        return current_node(), os.getpid()

    def run(self, arguments: dict[str, Any], trace: dict[str, str] | None = None) -> SimulationRun:
        """One simulation, inside the driver's span of it (`trace`, a W3C carrier) when tracing is on."""
        with on_session(self.session), tracing.continued(trace):
            return run_task(**arguments)

    def flush(self) -> None:
        """Send this actor's spans now: the run's end stops it before its exporter's next batch."""
        tracing.flush()


@dataclass
class ActorPool:
    """The run's actors and its --max-concurrency slots among them; stands in for tau2's `run_task`."""

    actors: list[Any]  # Ray's actor handles of SimulationActor (ray.remote's typing does not say so)
    places: list[tuple[str, int]]
    per_actor: int
    results_path: Path

    def __post_init__(self) -> None:
        self._free: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._refusal: AgentAuthError | None = None

    @classmethod
    def start(cls, a2a: A2AConfig, concurrency: int, simulations: int, results_path: Path) -> ActorPool:
        """The run's actors (see `actor_count`); waits until they run."""
        import ray

        cpus = int(ray.cluster_resources().get("CPU", 0))
        if cpus < 1:
            raise ConfigError("The Ray cluster has no CPU for the simulation actors; add a node with "
                              "`ray start --address=HEAD:6379 --num-cpus N`.")
        nodes = sum(1 for node in ray.nodes() if node.get("Alive") and node.get("Resources", {}).get("CPU"))
        count = actor_count(cpus, nodes, concurrency, simulations)
        per_actor = math.ceil(concurrency / count)
        actor_class = ray.remote(SimulationActor).options(
            num_cpus=ACTOR_CPUS, max_concurrency=per_actor, max_restarts=-1, max_task_retries=RETRIES,
            scheduling_strategy="SPREAD",
        )
        actors = [actor_class.remote(a2a, tracing.environment() if tracing.enabled() else None)
                  for _ in range(count)]
        try:
            places = ray.get([actor.where.remote() for actor in actors])  # type: ignore[attr-defined]
        except ray.exceptions.RayError as error:
            raise ConfigError(
                f"The simulation actors could not start on the Ray cluster ({first_line(error)}); every node "
                "needs tau2-a2a installed, the same version as here."
            ) from None
        pool = cls(actors, places, per_actor, results_path)
        for slot in range(concurrency):  # interleaved: a small run still spreads over the actors
            pool._free.put(actors[slot % count])
        return pool

    def describe(self, address: str) -> str:
        nodes = len({node for node, _ in self.places})
        actors = len(self.actors)
        return (f"Ray ({address}): {actors} actor{'s' if actors > 1 else ''} on "
                f"{nodes} node{'s' if nodes > 1 else ''}, each running up to {self.per_actor} simulations at once "
                "and scoring them")

    @contextmanager
    def running_tau2_simulations(self) -> Iterator[None]:
        """tau2's run_tasks, in this process, sends each simulation to an actor while inside."""
        try:
            with simulations_by(self.run_task):
                yield
        finally:
            if tracing.enabled():
                import ray

                try:
                    ray.get([actor.flush.remote() for actor in self.actors], timeout=60)
                except ray.exceptions.RayError as error:  # an actor gone: its last spans with it
                    log.warning("Some Ray actors' last spans were not sent: %s", first_line(error))

    def run_task(self, **arguments: Any) -> SimulationRun:
        """tau2's run_task on the next free slot; raises what the simulation raised there."""
        import ray

        if self._refusal is not None:  # every other simulation would meet the same refusal
            raise AgentAuthError(str(self._refusal), status=self._refusal.status)
        actor = self._free.get()
        try:
            return ray.get(actor.run.remote(arguments, tracing.carrier() or None))
        except ray.exceptions.RayTaskError as error:
            cause = error.cause if isinstance(error.cause, BaseException) else error
            if isinstance(cause, AgentAuthError):
                self._refusal = self._refusal or cause
            raise cause from None
        except ray.exceptions.RayActorError as error:
            raise SimulationLost(
                f"the simulation of task {arguments['task'].id} (seed {arguments.get('seed')}) was lost: its Ray "
                f"worker died {RETRIES + 1} times ({first_line(error)}). The finished simulations are kept in "
                f"{self.results_path}; {RESUME}."
            ) from None
        finally:
            self._free.put(actor)


def actor_count(cpus: int, nodes: int, concurrency: int, simulations: int) -> int:
    """One actor per SIMULATIONS_PER_ACTOR simulations at once, at least one per node with CPUs (a cluster's
    run uses every node), at most one per CPU and one per simulation at once."""
    wanted = max(nodes, math.ceil(concurrency / SIMULATIONS_PER_ACTOR))
    return max(1, min(cpus, concurrency, simulations, wanted))
