"""The agent's next action, whichever way it comes: an MCP tool call, a message to the user, or its A2A reply.

In the MCP tools modes the agent acts on two channels at once: its A2A request
stays open while it calls tools over MCP. tau2's orchestrator asks for one
action at a time, from the simulation's thread. Each simulation has one
`ActionQueue`: the MCP server's handlers (on its event loop) and the thread
that waits for the A2A reply post actions into it; the simulation's thread
takes them one by one, in the order they came, and answers each one that
waits for an answer (a tool's result, the user's reply) through its future.

So calls that come concurrently within one turn are run one at a time, in the
order they arrived, each as one assistant message with one tool call: the
trajectory a native agent making the same calls one by one would leave.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from tau2_a2a.client.sending import Exchange

T = TypeVar("T")


@dataclass(frozen=True)
class ToolOutcome:
    """A tool's result as tau2's environment gave it: its text, and whether it is an error."""

    content: str
    error: bool = False


@dataclass
class ToolCallAction:
    """The agent called a tool over MCP; `outcome` is answered once tau2's environment has run it."""

    name: str
    arguments: dict[str, Any]
    outcome: Future[ToolOutcome] = field(default_factory=Future)
    received_at: float = field(default_factory=time.perf_counter)
    request_bytes: int = 0


@dataclass
class UserMessageAction:
    """The agent spoke to the user (the agent-driven mode's `send_message_to_user`); `reply` gets the user's words."""

    text: str
    reply: Future[str] = field(default_factory=Future)
    received_at: float = field(default_factory=time.perf_counter)
    request_bytes: int = 0


@dataclass
class ReplyAction:
    """The agent's A2A request ended with a reply (an `Exchange` of the session)."""

    exchange: Exchange


@dataclass
class FailureAction:
    """The agent's A2A request failed: an `A2AFailure`, or whatever else the send raised, raised again in the
    simulation."""

    failure: BaseException


Action = ToolCallAction | UserMessageAction | ReplyAction | FailureAction
_ANSWERED = (ToolCallAction, UserMessageAction)


class ActionQueue:
    """One simulation's actions, posted from any thread and taken by the simulation's thread, in order.

    Once closed it takes no more actions, and every action still waiting for an
    answer (taken or not) gets the closing answer, so no MCP call hangs past
    its simulation.
    """

    def __init__(self) -> None:
        self._queue: queue.Queue[Action] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._awaiting: list[ToolCallAction | UserMessageAction] = []

    @property
    def closed(self) -> bool:
        return self._closed

    def post(self, action: Action) -> bool:
        """Queue `action`; False once the queue is closed (the simulation is over)."""
        with self._lock:
            if self._closed:
                return False
            if isinstance(action, _ANSWERED):
                self._awaiting.append(action)
            self._queue.put(action)
            return True

    def take(self, timeout: float) -> Action | None:
        """The next action, waiting at most `timeout` seconds; None if none came."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def answered(self, action: ToolCallAction | UserMessageAction) -> None:
        with self._lock:
            if action in self._awaiting:
                self._awaiting.remove(action)

    def close(self, tool_text: str, user_text: str) -> None:
        """Take no more actions; answer every action still waiting (tool calls with `tool_text` as an error,
        messages to the user with `user_text`)."""
        with self._lock:
            self._closed = True
            awaiting, self._awaiting = self._awaiting, []
        for action in awaiting:
            if isinstance(action, ToolCallAction):
                _answer(action.outcome, ToolOutcome(tool_text, error=True))
            else:
                _answer(action.reply, user_text)


def _answer(future: Future[T], value: T) -> None:
    if not future.done():
        future.set_result(value)
