"""`scripted_user`: a tau2 user with no LLM, for offline runs.

It opens with the task's reason for calling and a marker naming the domain
and task id, then ends the conversation after the agent's first text reply.
"""

from __future__ import annotations

from typing import Optional

from tau2.data_model.message import Message, UserMessage
from tau2.data_model.tasks import Task
from tau2.user.base import STOP, BaseUser, UserState, ValidUserInputMessage

from tau2_a2a.reference.oracle_script import task_marker

USER_NAME = "scripted_user"


class ScriptedUser(BaseUser):
    """Opens with the reason for calling plus a task marker; stops after one text reply."""

    def __init__(self, tools=None, instructions: Optional[str] = None,
                 llm: Optional[str] = None, llm_args: Optional[dict] = None) -> None:
        super().__init__(instructions=instructions, llm=llm, llm_args=llm_args)
        self.domain: str | None = None
        self.task: Task | None = None

    def bind(self, domain: str, task: Task) -> None:
        """Told by the orchestrator which task this conversation is about."""
        self.domain = domain
        self.task = task

    def get_init_state(self, message_history: Optional[list[Message]] = None) -> UserState:
        return UserState(system_messages=[], messages=list(message_history or []))

    def set_seed(self, seed: int) -> None:
        """Scripted: nothing to seed."""

    @classmethod
    def is_stop(cls, message: UserMessage) -> bool:
        return message.content is not None and STOP in message.content

    def generate_next_message(self, message: ValidUserInputMessage,
                              state: UserState) -> tuple[UserMessage, UserState]:
        state.messages.append(message)
        if any(isinstance(m, UserMessage) for m in state.messages):
            reply = UserMessage(role="user", content=STOP, cost=0.0)
        else:
            reply = UserMessage(role="user", content=self._opening(), cost=0.0)
        state.messages.append(reply)
        return reply, state

    def _opening(self) -> str:
        if self.task is None or self.domain is None:
            raise RuntimeError("scripted_user runs under tau2-a2a's orchestrator, which binds the task")
        scenario = self.task.user_scenario.instructions
        reason = getattr(scenario, "reason_for_call", None) or str(scenario)
        return f"{reason}\n{task_marker(self.domain, self.task.id)}"
