"""A failed A2A exchange ends its simulation with an error termination; the run goes on.

tau2's orchestrator lets an agent's exception escape `run_task`, which aborts
the whole run (or, with --skip-failed-samples, drops the trajectory). This
subclass catches only our own failures: it records them in the trajectory and
ends the simulation as AGENT_ERROR. Any other agent behaves exactly as before.

One failure stops the run instead: the agent refusing our credentials. Every
other simulation would meet the same refusal, so the simulation that met it
is not saved (a resume redoes it), simulations not yet begun are not started,
and the run ends with the refusal, keeping what finished before it.
"""

from __future__ import annotations

import logging

from typing import Any

import tau2.run
from tau2.data_model.message import AssistantMessage
from tau2.data_model.simulation import SimulationRun, TerminationReason
from tau2.orchestrator.orchestrator import Orchestrator

from tau2_a2a.client.errors import A2AFailure, AgentAuthError
from tau2_a2a.client.agent import AGENT_NAME
from tau2_a2a.client.metrics import RAW_DATA_KEY
from tau2_a2a.client.pool import sessions
from tau2_a2a.config import A2AConfig

log = logging.getLogger("tau2_a2a.client")


class A2AOrchestrator(Orchestrator):
    """tau2's Orchestrator, with A2A failures turned into an AGENT_ERROR termination.

    It also tells a user that asks (the scripted user) which task it plays.
    """

    def initialize(self) -> None:
        bind = getattr(self.user, "bind", None)
        if callable(bind):
            bind(self.domain, self.task)
        super().initialize()

    def step(self) -> None:
        try:
            super().step()
        except AgentAuthError:
            raise
        except A2AFailure as failure:
            log.error("Simulation of task %s ends with an agent error: %s", self.task.id, failure)
            self.trajectory.append(
                AssistantMessage(
                    role="assistant",
                    content=f"[A2A {failure.category.value} error] {failure}",
                    cost=0.0,
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


_tau2_run_task = tau2.run.run_task


def run_task_unless_refused(**arguments: Any) -> SimulationRun:
    """tau2's run_task, not begun once the A2A agent of this run has refused our credentials."""
    if arguments.get("agent") == AGENT_NAME:
        sessions.get(A2AConfig.from_llm_args(arguments.get("llm_args_agent"))).raise_if_refused()
    return _tau2_run_task(**arguments)


def install() -> None:
    """Make tau2's run_task build our orchestrator (a subclass) and stop after a refusal; nothing else changes."""
    tau2.run.Orchestrator = A2AOrchestrator
    tau2.run.run_task = run_task_unless_refused
