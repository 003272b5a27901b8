"""`scripted_user`: a tau2 user with no LLM, for offline runs.

It opens with the task's reason for calling and a marker naming the domain
and task id. When the agent asks, in the oracle's words, for the user's next
run of golden actions (telecom: actions on the user's phone), it does them with
its own tools, one tool call per message, as tau2's user simulator does, and
then says what it did. Any other text from the agent ends the conversation.
"""

from __future__ import annotations

from pydantic import Field

from tau2_a2a.tau2bench.participants.oracle_script import handover_text, task_marker, user_done_text, user_runs
from tau2_a2a.tau2bench.seam.distribution import (
    OUT_OF_SCOPE,
    STOP,
    TRANSFER,
    Action,
    Message,
    Task,
    Tool,
    ToolCall,
    ToolMessage,
    UserBase,
    UserMessage,
    UserState,
    ValidUserInputMessage,
)

USER_NAME = "scripted_user"
_ENDING_TOKENS = (STOP, TRANSFER, OUT_OF_SCOPE)  # any of them in a user's text ends the conversation (tau2)


class ScriptedUserState(UserState):
    """The conversation, plus the user's runs of actions not yet asked for and the run under way."""

    runs_left: list[list[Action]] = Field(default_factory=list)
    to_do: list[Action] = Field(default_factory=list)
    done: list[Action] = Field(default_factory=list)
    calls_made: int = 0


class ScriptedUser(UserBase):
    """Opens with the reason for calling plus a task marker; does the golden user actions when asked."""

    def __init__(self, tools: list[Tool] | None = None, instructions: str | None = None,
                 llm: str | None = None, llm_args: dict | None = None) -> None:
        super().__init__(tools=tools, instructions=instructions, llm=llm, llm_args=llm_args)
        self.domain: str | None = None
        self.task: Task | None = None

    def bind(self, domain: str, task: Task) -> None:
        """Told by the orchestrator which task this conversation is about."""
        self.domain = domain
        self.task = task

    def get_init_state(self, message_history: list[Message] | None = None) -> ScriptedUserState:
        return ScriptedUserState(system_messages=[], messages=list(message_history or []),
                                 runs_left=user_runs(self._bound()[1]))

    def set_seed(self, seed: int) -> None:
        """Scripted: nothing to seed."""

    @classmethod
    def is_stop(cls, message: UserMessage) -> bool:
        return message.content is not None and STOP in message.content

    def generate_next_message(self, message: ValidUserInputMessage,
                              state: ScriptedUserState) -> tuple[UserMessage, ScriptedUserState]:
        state.messages.append(message)  # the agent's text, or the result of the user's one tool call
        if not isinstance(message, ToolMessage):
            if not any(isinstance(m, UserMessage) for m in state.messages):
                return self._say(self._opening(), state)
            if not state.runs_left or handover_text(state.runs_left[0]) not in (message.content or ""):
                return self._say(STOP, state)
            state.to_do, state.done = state.runs_left.pop(0), []
        if not state.to_do:
            return self._say(user_done_text(state.done), state)
        action = state.to_do.pop(0)
        state.done.append(action)
        call = ToolCall(id=f"user_call_{state.calls_made}", name=action.name,
                        arguments=dict(action.arguments), requestor="user")
        state.calls_made += 1
        reply = UserMessage(role="user", tool_calls=[call], cost=0.0)
        state.messages.append(reply)
        return reply, state

    def _say(self, text: str, state: ScriptedUserState) -> tuple[UserMessage, ScriptedUserState]:
        reply = UserMessage(role="user", content=text, cost=0.0)
        state.messages.append(reply)
        return reply, state

    def _bound(self) -> tuple[str, Task]:
        if self.task is None or self.domain is None:
            raise RuntimeError("scripted_user runs under tau2-a2a's orchestrator, which binds the task")
        return self.domain, self.task

    def _opening(self) -> str:
        """The reason for calling (structured instructions), else the instructions themselves, which in
        banking_knowledge name the tokens that end a conversation (###STOP###, ###OUT-OF-SCOPE###): left out,
        or tau2 would end the conversation at this first message."""
        domain, task = self._bound()
        scenario = task.user_scenario.instructions
        reason = getattr(scenario, "reason_for_call", None) or str(scenario)
        if any(token in reason for token in _ENDING_TOKENS):
            for token in _ENDING_TOKENS:
                reason = reason.replace(token, "")
            reason = reason.rstrip()
        return f"{reason}\n{task_marker(domain, task.id)}"
