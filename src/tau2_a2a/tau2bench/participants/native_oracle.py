"""`oracle_agent`: the same oracle as a native tau2 agent, the baseline for A2A fidelity."""

from __future__ import annotations

from dataclasses import dataclass, field

from tau2_a2a.tau2bench.participants.oracle_script import NO_MARKER, OracleStep, find_marker, oracle_steps
from tau2_a2a.tau2bench.seam.distribution import (
    AssistantMessage,
    LLMAgent,
    Message,
    ToolCall,
    UserMessage,
    ValidAgentInputMessage,
)

NATIVE_ORACLE_NAME = "oracle_agent"


@dataclass
class OracleState:
    messages: list[Message]
    plan: list[OracleStep] = field(default_factory=list)
    turn: int = 0


class NativeOracleAgent(LLMAgent):
    """Replays golden actions in-process; call ids follow the A2A client's scheme."""

    def get_init_state(self, message_history: list[Message] | None = None) -> OracleState:
        return OracleState(messages=list(message_history or []))

    def set_seed(self, seed: int) -> None:
        """Deterministic: nothing to seed."""

    def generate_next_message(self, message: ValidAgentInputMessage,
                              state: OracleState) -> tuple[AssistantMessage, OracleState]:
        marker = find_marker(message.content) if isinstance(message, UserMessage) else None
        if marker is not None:
            state.plan = oracle_steps(*marker)
        if state.plan:
            step = state.plan.pop(0)
            if step.tool_name is None:
                reply = AssistantMessage(role="assistant", content=step.text, cost=0.0)
            else:
                call = ToolCall(id=f"call_{state.turn}_0", name=step.tool_name,
                                arguments=dict(step.arguments or {}), requestor="assistant")
                reply = AssistantMessage(role="assistant", tool_calls=[call], cost=0.0)
        else:
            reply = AssistantMessage(role="assistant", content=NO_MARKER, cost=0.0)
        state.turn += 1
        state.messages.append(reply)
        return reply, state
