"""A failed A2A exchange ends its simulation with an error termination; the run goes on.

tau2's orchestrator lets an agent's exception escape `run_task`, which aborts
the whole run (or, with --skip-failed-samples, drops the trajectory). This
subclass catches only our own failures: it records them in the trajectory and
ends the simulation as AGENT_ERROR. Any other agent behaves exactly as before.
"""

from __future__ import annotations

import logging

import tau2.run
from tau2.data_model.message import AssistantMessage
from tau2.data_model.simulation import TerminationReason
from tau2.orchestrator.orchestrator import Orchestrator

from tau2_a2a.client.errors import A2AFailure
from tau2_a2a.client.metrics import RAW_DATA_KEY

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


def install() -> None:
    """Make tau2's run_task build our orchestrator (a subclass; nothing else changes)."""
    tau2.run.Orchestrator = A2AOrchestrator
