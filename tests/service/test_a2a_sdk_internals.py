"""What the service reaches into in a2a-sdk's request handler is there in the installed a2a-sdk, and works."""

from __future__ import annotations

import asyncio
import os
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.cluster import LegacyTaskStoreAdapter
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, Message, Part, Role, Task, TaskState, TaskStatus

from tau2_a2a.protocol.hosting import free_port
from tau2_a2a.service import a2a_sdk_internals
from tau2_a2a.service.a2a_sdk_internals import A2aSdkChanged, missing, run_again, runs_here, stored_task
from tests.support.cli import run_cli


class Recording(AgentExecutor):
    """Completes each task it is given, keeping what it was given."""

    def __init__(self) -> None:
        self.given: list[RequestContext] = []
        self.ran = asyncio.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.given.append(context)
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").complete()
        self.ran.set()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        pass


def handler_over(task_store: Any, executor: AgentExecutor | None = None) -> DefaultRequestHandler:
    card = AgentCard(name="internals", description="d", version="1",
                     capabilities=AgentCapabilities(streaming=True))
    return DefaultRequestHandler(agent_executor=executor or Recording(), task_store=task_store, agent_card=card)


def test_the_installed_a2a_sdk_has_what_the_service_reaches_into() -> None:
    gone = missing(handler_over(InMemoryTaskStore()))
    assert gone == [], (f"a2a-sdk {version('a2a-sdk')} no longer has {', '.join(gone)}, which "
                        "tau2_a2a/service/a2a_sdk_internals.py reaches into: make it follow a2a-sdk")


async def test_a_handler_without_the_registry_fails_naming_it() -> None:
    handler = handler_over(InMemoryTaskStore())
    delattr(handler, a2a_sdk_internals.REGISTRY)
    assert missing(handler) == ["DefaultRequestHandler._active_task_registry"]
    with pytest.raises(A2aSdkChanged, match="_active_task_registry"):
        await runs_here(handler, "t")


def test_a_registry_whose_methods_changed_is_reported_by_name() -> None:
    class Changed:
        async def get(self, task_id: str) -> None: ...

        async def get_or_create(self, task_id: str, context: Any) -> None: ...

    handler = handler_over(InMemoryTaskStore())
    setattr(handler, a2a_sdk_internals.REGISTRY, Changed())
    assert missing(handler) == ["Changed.get_or_create(task_id, call_context, context_id, create_task_if_missing)"]


@pytest.mark.filterwarnings("ignore:A VersionedTaskStore was configured without an event_stream")
@pytest.mark.parametrize("versioned", [False, True], ids=["task-store", "versioned-store"])
async def test_a_stored_task_runs_again_here_on_its_message(versioned: bool) -> None:
    store = InMemoryTaskStore()
    executor = Recording()
    handler = handler_over(LegacyTaskStoreAdapter(store) if versioned else store, executor)
    context = ServerCallContext(state={"marker": "resumed"})
    first = Message(role=Role.ROLE_USER, message_id="m1", context_id="c1", task_id="t1", parts=[Part(text="hi")])
    task = Task(id="t1", context_id="c1", status=TaskStatus(state=TaskState.TASK_STATE_WORKING), history=[first])
    await store.save(task, context)
    try:
        assert not await runs_here(handler, "t1")
        assert await stored_task(handler, "t1", context) == task
        assert await stored_task(handler, "nothing", context) is None
        await run_again(handler, task, first, context)
        await asyncio.wait_for(executor.ran.wait(), 10)
        [given] = executor.given
        assert (given.task_id, given.context_id, given.message) == ("t1", "c1", first)
        assert given.call_context is not None and given.call_context.state["marker"] == "resumed"
    finally:
        await handler.aclose()


def test_serve_stops_in_one_line_when_a2a_sdk_lacks_what_it_reaches_into(tmp_path: Path) -> None:
    """An a2a-sdk whose ActiveTask lost `enqueue_request` (made so in the served process only, before anything
    runs): `tau2-a2a serve` exits 2 at its start, naming what is gone, with no traceback and nothing served."""
    changed = tmp_path / "changed_a2a_sdk"
    changed.mkdir()
    (changed / "sitecustomize.py").write_text(
        "from a2a.server.agent_execution.active_task import ActiveTask\n"
        "del ActiveTask.enqueue_request\n")
    path = os.pathsep.join(filter(None, [str(changed), os.environ.get("PYTHONPATH")]))
    served = run_cli(["serve", "--port", str(free_port()), "--results-dir", str(tmp_path / "results")],
                     env={"PYTHONPATH": path})
    try:
        out, err = served.communicate(timeout=120)
    finally:
        served.kill()  # a service that started after all is not left serving
    assert served.returncode == 2, (out, err)
    assert err.strip().splitlines() == [
        f"error: a2a-sdk {version('a2a-sdk')} lacks what tau2-a2a's service reaches into "
        "(async ActiveTask.enqueue_request): install the a2a-sdk version tau2-a2a's pyproject.toml allows, "
        "or a tau2-a2a that follows this a2a-sdk"], err
    assert " at http://" not in out, out
