"""What the service's request handler needs of a2a-sdk's DefaultRequestHandler beyond its published methods.

a2a-sdk keeps the tasks whose agent runs in this process in the handler's
private `_active_task_registry`. The service asks it whether a task runs here
(CancelTask of a task another replica runs) and has it run a task's agent again
(a task whose replica stopped). Every such access is here, and
tests/service/test_a2a_sdk_internals.py fails, naming what is gone, when the
installed a2a-sdk no longer has it. The service checks it at its start
(`require`), so an a2a-sdk that changed stops `tau2-a2a serve` in one line
rather than a request later; each use fails the same way.
"""

from __future__ import annotations

import inspect
from importlib.metadata import version
from typing import TYPE_CHECKING

from a2a.server.agent_execution import RequestContext
from a2a.server.agent_execution.active_task import ActiveTask
from a2a.server.cluster import StoredTask
from a2a.server.context import ServerCallContext
from a2a.types import Message, SendMessageRequest, Task

from tau2_a2a.errors import ConfigError

if TYPE_CHECKING:
    from a2a.server.agent_execution.active_task_registry import ActiveTaskRegistry
    from a2a.server.request_handlers import DefaultRequestHandler

REGISTRY = "_active_task_registry"  # a2a-sdk's ActiveTaskRegistry: the tasks whose agent runs in this process
# What the service calls on it, each with the parameters it passes.
REGISTRY_METHODS: dict[str, tuple[str, ...]] = {
    "get": ("task_id",),
    "get_or_create": ("task_id", "call_context", "context_id", "create_task_if_missing"),
}
ACTIVE_TASK_METHODS: dict[str, tuple[str, ...]] = {"enqueue_request": ("request_context",)}


class A2aSdkChanged(ConfigError):
    """The installed a2a-sdk no longer has what this module reaches into: the service cannot work with it."""


def require(handler: DefaultRequestHandler) -> None:
    """Raise A2aSdkChanged, naming each part, when `handler` or a2a-sdk lacks what the service reaches into."""
    lacking = missing(handler)
    if lacking:
        raise A2aSdkChanged(f"a2a-sdk {version('a2a-sdk')} lacks what tau2-a2a's service reaches into "
                            f"({', '.join(lacking)}): install the a2a-sdk version tau2-a2a's pyproject.toml "
                            "allows, or a tau2-a2a that follows this a2a-sdk")


def missing(handler: DefaultRequestHandler) -> list[str]:
    """What the service reaches into that `handler` (a2a-sdk's DefaultRequestHandler) or a2a-sdk lacks; empty
    when all is there."""
    registry = getattr(handler, REGISTRY, None)
    if registry is None:
        return [f"DefaultRequestHandler.{REGISTRY}"]
    return (_missing_methods(type(registry), REGISTRY_METHODS)
            + _missing_methods(ActiveTask, ACTIVE_TASK_METHODS))


def _missing_methods(owner: type, methods: dict[str, tuple[str, ...]]) -> list[str]:
    lacking = []
    for name, parameters in methods.items():
        method = getattr(owner, name, None)
        if not inspect.iscoroutinefunction(method):
            lacking.append(f"async {owner.__name__}.{name}")
        elif not set(parameters) <= set(inspect.signature(method).parameters):
            lacking.append(f"{owner.__name__}.{name}({', '.join(parameters)})")
    return lacking


def _registry(handler: DefaultRequestHandler) -> ActiveTaskRegistry:
    registry = getattr(handler, REGISTRY, None)
    if registry is None:
        raise A2aSdkChanged(f"a2a-sdk {version('a2a-sdk')}'s DefaultRequestHandler has no {REGISTRY} any more: "
                            "tau2_a2a/service/a2a_sdk_internals.py must follow it")
    return registry


async def runs_here(handler: DefaultRequestHandler, task_id: str) -> bool:
    """Whether the agent of task `task_id` runs in this process (a task another replica runs does not)."""
    return await _registry(handler).get(task_id) is not None


async def stored_task(handler: DefaultRequestHandler, task_id: str, context: ServerCallContext) -> Task | None:
    """The task as the handler's task store keeps it (a2a-sdk's published `task_store`, versioned or not)."""
    stored = await handler.task_store.get(task_id, context)
    return stored.task if isinstance(stored, StoredTask) else stored


async def run_again(handler: DefaultRequestHandler, task: Task, message: Message, context: ServerCallContext) -> None:
    """Run the agent of `task`, a stored task, again on `message`, in this process, the way a new message to
    the task runs it: its events reach the task store and every subscriber."""
    active = await _registry(handler).get_or_create(
        task.id, call_context=context, context_id=task.context_id, create_task_if_missing=False)
    await active.enqueue_request(RequestContext(
        call_context=context, request=SendMessageRequest(message=message),
        task_id=task.id, context_id=task.context_id, task=task))
