"""Agents that misbehave on purpose, and the a2a-sdk apps that serve them.

Every agent here is the reference oracle (one plan of golden steps per A2A
context, built from the scripted user's task marker) except for the one
misbehaviour it exists to show, so a run scores 1.0 wherever that
misbehaviour does not strike. The middleware that disturb HTTP are in
middleware.py; `KillableProxy` (proxy.py) stands in for a host that crashes.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from a2a.helpers import new_data_part, new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import (
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    Part,
    Role,
    SecurityScheme,
    TaskState,
)
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tau2_a2a.protocol.hosting import a2a_app, agent_card
from tau2_a2a.protocol.messages import IncomingTurn, read_turn
from tau2_a2a.reference.oracle_agent import NO_MARKER, step_parts
from tau2_a2a.tau2bench.participants.oracle_script import (
    OracleStep,
    find_marker,
    oracle_steps,
)

CARD_PATH = "/.well-known/agent-card.json"


# -- agents ----------------------------------------------------------------------


@dataclass
class Seen:
    """One message as the agent received it, and what it answered."""

    context_id: str
    task: str | None  # the tau2 task this context plays, from the marker
    a2a_task_id: str
    continued: bool  # the message continued an existing A2A task
    turn: IncomingTurn
    parts: list[Part]
    reply_parts: list[Part] = field(default_factory=list)


class OracleLike(AgentExecutor):
    """The reference oracle, with a hook (`respond`) for the misbehaviour under test."""

    def __init__(self) -> None:
        self.plans: dict[str, deque[OracleStep]] = {}
        self.task_of: dict[str, str] = {}
        self.seen: list[Seen] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        turn = read_turn(context.message)
        context_id = context.context_id or ""
        marker = find_marker(turn.user_text)
        if marker is not None:
            self.plans[context_id] = deque(oracle_steps(*marker))
            self.task_of[context_id] = marker[1]
        seen = Seen(
            context_id=context_id,
            task=self.task_of.get(context_id),
            a2a_task_id=context.task_id or "",
            continued=context.current_task is not None,
            turn=turn,
            parts=list(context.message.parts),
        )
        self.seen.append(seen)
        await self.respond(context, event_queue, seen)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.plans.pop(context.context_id or "", None)

    def messages_of(self, task: str) -> list[Seen]:
        """Every message received in the contexts that played `task`."""
        return [s for s in self.seen if s.task == task]

    def is_message(self, seen: Seen, task: str, at: int) -> bool:
        """Whether `seen` is message number `at` (0-based) of tau2 task `task`."""
        return seen.task == task and len(self.messages_of(task)) == at + 1

    def next_parts(self, context_id: str) -> list[Part]:
        plan = self.plans.get(context_id)
        return step_parts(plan.popleft()) if plan else [new_text_part(NO_MARKER)]

    def plan_done(self, context_id: str) -> bool:
        return not self.plans.get(context_id)

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        await self.answer(event_queue, seen, self.next_parts(seen.context_id))

    async def answer(self, event_queue: EventQueue, seen: Seen, parts: list[Part]) -> None:
        """Reply with a plain Message carrying `parts`."""
        seen.reply_parts = parts
        message = Message(role=Role.ROLE_AGENT, message_id=str(uuid.uuid4()),
                          context_id=seen.context_id, parts=parts)
        await event_queue.enqueue_event(message)


class WaitsForPeers(OracleLike):
    """Holds the first reply of each context until `peers` contexts are open at once.

    A client that runs simulations one after another never gets there, and the
    agent then answers after `patience` seconds with `max_open` still below `peers`.
    """

    def __init__(self, peers: int, patience: float = 20.0) -> None:
        super().__init__()
        self.peers = peers
        self.patience = patience
        self.open_first_messages = 0
        self.max_open = 0
        self._all_here: asyncio.Event | None = None

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        if self._all_here is None:
            self._all_here = asyncio.Event()
        if seen.turn.system is not None and not self._all_here.is_set():
            self.open_first_messages += 1
            self.max_open = max(self.max_open, self.open_first_messages)
            if self.open_first_messages >= self.peers:
                self._all_here.set()
            try:
                await asyncio.wait_for(self._all_here.wait(), self.patience)
            except TimeoutError:
                pass
            self.open_first_messages -= 1
        await super().respond(context, event_queue, seen)


class SlowOnTask(OracleLike):
    """Answers every message of one task only after `release()` (or `hang` seconds)."""

    def __init__(self, task: str, hang: float = 30.0) -> None:
        super().__init__()
        self.task = task
        self.hang = hang
        self._released = threading.Event()

    def release(self) -> None:
        self._released.set()

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        if seen.task == self.task:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.hang
            while not self._released.is_set() and loop.time() < deadline:
                await asyncio.sleep(0.05)
        await super().respond(context, event_queue, seen)


class ReplyOnTask(OracleLike):
    """Answers message number `at` (0-based) of one task with `parts` instead of a golden step."""

    def __init__(self, task: str, parts: list[Part], at: int = 0) -> None:
        super().__init__()
        self.task = task
        self.parts = parts
        self.at = at

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        if self.is_message(seen, self.task, self.at):
            await self.answer(event_queue, seen, self.parts)
            return
        await super().respond(context, event_queue, seen)


class FailsTask(OracleLike):
    """Ends the A2A task of one tau2 task's first message as FAILED, saying `why`."""

    def __init__(self, task: str, why: str) -> None:
        super().__init__()
        self.task = task
        self.why = why

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        if seen.task != self.task:
            await super().respond(context, event_queue, seen)
            return
        await event_queue.enqueue_event(new_task(seen.a2a_task_id, seen.context_id, TaskState.TASK_STATE_SUBMITTED))
        updater = TaskUpdater(event_queue, seen.a2a_task_id, seen.context_id)
        seen.reply_parts = [new_text_part(self.why)]
        await updater.failed(updater.new_agent_message(seen.reply_parts))


class CallsUnknownToolFirst(OracleLike):
    """Opens every conversation with a call to a tool the domain does not have, then follows the plan."""

    def __init__(self, tool: str, arguments: dict[str, Any]) -> None:
        super().__init__()
        self.tool = tool
        self.arguments = arguments

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        if seen.turn.system is not None:
            call = {"tool_calls": [{"name": self.tool, "arguments": self.arguments}]}
            await self.answer(event_queue, seen, [new_data_part(call)])
            return
        await super().respond(context, event_queue, seen)


class AsksForInput(OracleLike):
    """Answers with a Task left in INPUT_REQUIRED, continued by the next message; the last step completes it."""

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        if not seen.continued:
            await event_queue.enqueue_event(
                new_task(seen.a2a_task_id, seen.context_id, TaskState.TASK_STATE_SUBMITTED)
            )
        updater = TaskUpdater(event_queue, seen.a2a_task_id, seen.context_id)
        seen.reply_parts = self.next_parts(seen.context_id)
        message = updater.new_agent_message(seen.reply_parts)
        if self.plan_done(seen.context_id):
            await updater.complete(message)
        else:
            await updater.requires_input(message)


class FinishesLater(OracleLike):
    """Answers with a Task left WORKING and completes it `delay` seconds later."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self._later: set[asyncio.Task[None]] = set()

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        await event_queue.enqueue_event(new_task(seen.a2a_task_id, seen.context_id, TaskState.TASK_STATE_WORKING))
        seen.reply_parts = self.next_parts(seen.context_id)
        updater = TaskUpdater(event_queue, seen.a2a_task_id, seen.context_id)

        async def complete() -> None:
            await asyncio.sleep(self.delay)
            await updater.complete(updater.new_agent_message(seen.reply_parts))

        later = asyncio.get_running_loop().create_task(complete())
        self._later.add(later)
        later.add_done_callback(self._later.discard)


class DiesOnTask(OracleLike):
    """Calls `die` (crashing its host) when message number `at` of one task arrives."""

    def __init__(self, task: str, at: int, die: Callable[[], None]) -> None:
        super().__init__()
        self.task = task
        self.at = at
        self.die = die

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        if self.is_message(seen, self.task, self.at):
            await asyncio.to_thread(self.die)
        await super().respond(context, event_queue, seen)


class GetsTasksWrong(OracleLike):
    """Skips the work of some conversations and closes with `WRONG_ANSWER`, so tau2 scores them 0.

    Every conversation of a task in `always` fails; of a task in `every_other`, the
    first, third, ... conversation fails (in a run of 2 trials at concurrency 1: trial 0).
    The rest follow the oracle's plan and score 1. Wrong, not broken: no A2A error.
    """

    WRONG_ANSWER = "Sorry, I cannot help with that."

    def __init__(self, always: tuple[str, ...] = (), every_other: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.always = set(always)
        self.every_other = set(every_other)
        self.conversations: dict[str, int] = {}
        self.failing: set[str] = set()  # context ids that get the task wrong

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        if seen.turn.system is not None and seen.task is not None:
            count = self.conversations.get(seen.task, 0)
            self.conversations[seen.task] = count + 1
            if seen.task in self.always or (seen.task in self.every_other and count % 2 == 0):
                self.failing.add(seen.context_id)
        if seen.context_id in self.failing:
            await self.answer(event_queue, seen, [new_text_part(self.WRONG_ANSWER)])
            return
        await super().respond(context, event_queue, seen)


class StreamsChunks(OracleLike):
    """The oracle as a streaming agent: working updates, then its answer as a chunked artifact.

    A text answer goes out in three `append` chunks. A message it has answered
    before (a retry: same message id) gets the same answer again, as agents
    that deduplicate by message id do.
    """

    def __init__(self) -> None:
        super().__init__()
        self.answers: dict[str, list[Part]] = {}

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        message_id = context.message.message_id
        if message_id not in self.answers:
            self.answers[message_id] = self.next_parts(seen.context_id)
        parts = seen.reply_parts = self.answers[message_id]
        await event_queue.enqueue_event(new_task(context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED))
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work(updater.new_agent_message([new_text_part("Looking into it...")]))
        artifact_id = str(uuid.uuid4())
        if len(parts) == 1 and parts[0].HasField("text") and len(parts[0].text) >= 3:
            text = parts[0].text
            third = len(text) // 3
            chunks = [text[:third], text[third:2 * third], text[2 * third:]]
            for index, chunk in enumerate(chunks):
                await updater.add_artifact([new_text_part(chunk)], artifact_id=artifact_id, append=index > 0,
                                           last_chunk=index == len(chunks) - 1)
        else:
            await updater.add_artifact(parts, artifact_id=artifact_id, last_chunk=True)
        await updater.complete()


def agent_app(executor: AgentExecutor, url: str, middleware: list[Middleware] | None = None,
              card_url: str | None = None, bearer: bool = False, grpc_url: str | None = None,
              grpc_interceptors: list[Any] | None = None) -> Starlette:
    """An a2a-sdk app for `executor` behind `middleware` (gRPC: behind `grpc_interceptors`).

    Its card names `card_url` (default `url`), `grpc_url` for gRPC if given, and, with
    `bearer`, declares bearer auth. Serve gRPC with BackgroundServer(..., grpc_port=...).
    """
    card = agent_card(
        name="misbehaving test agent",
        description="Behaves like the tau2 oracle except for one misbehaviour under test.",
        url=card_url or url,
        skills=[AgentSkill(id="test", name="test", description="test agent", tags=["test"])],
        grpc_url=grpc_url,
    )
    if bearer:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer"))
        )
    app = a2a_app(executor, card, middleware=middleware or [])
    app.state.grpc_interceptors = list(grpc_interceptors or [])
    return app


def card_app(responses: dict[str, Response]) -> Starlette:
    """A server that answers GET on the given paths with the given responses, 404 elsewhere."""

    def route(path: str, response: Response) -> Route:
        async def endpoint(request: Request) -> Response:
            return response

        return Route(path, endpoint, methods=["GET", "POST"])

    return Starlette(routes=[route(path, response) for path, response in responses.items()])


def card_json(url: str, **changes: Any) -> dict[str, Any]:
    """A valid A2A 1.0 card as JSON, with `changes` applied (None removes a field)."""
    card: dict[str, Any] = {
        "name": "card test agent",
        "description": "serves only a card",
        "version": "0.1.0",
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [],
    }
    for key, value in changes.items():
        if value is None:
            card.pop(key, None)
        else:
            card[key] = value
    return card
