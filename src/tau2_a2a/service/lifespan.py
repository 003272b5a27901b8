"""What a serving service holds open, opened by its lifespan and closed at its end; building the app opens nothing.

At start: the evaluations' database opens and the scheduler starts (which may
resume the children a stopped service left), a2a-sdk's task tables are made,
and tasks whose follower stopped are handed to the request handler to
continue. A start that fails closes what it opened and tells uvicorn in one
line (no traceback): `tau2-a2a serve` then exits 2 with that line
(`app.state.start_error`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tau2_a2a.errors import ConfigError
from tau2_a2a.service import catalog
from tau2_a2a.service.jobs.database import StoreError
from tau2_a2a.service.jobs.errors import EvaluationError

if TYPE_CHECKING:
    from a2a.server.cluster import DatabaseTaskEventStream, VersionedDatabaseTaskStore
    from sqlalchemy.ext.asyncio import AsyncEngine
    from starlette.types import Receive, Scope, Send

    from tau2_a2a.service.handler import ServiceRequestHandler
    from tau2_a2a.service.jobs.queue import FollowedTask
    from tau2_a2a.service.tools import EvaluationTools

log = logging.getLogger("tau2_a2a.service")


class ServiceResources:
    """The service's database, scheduler and A2A task tables: `start` in the lifespan, `close` at its end."""

    def __init__(self, tools: EvaluationTools, handler: ServiceRequestHandler,
                 task_tables: tuple[VersionedDatabaseTaskStore, DatabaseTaskEventStream] | None = None,
                 engines: tuple[AsyncEngine, ...] = ()) -> None:
        self.tools = tools
        self.handler = handler
        self.task_tables = task_tables  # made at start when the A2A tasks live in the service's database
        self.engines = engines
        self._warm: asyncio.Task[Any] | None = None
        self.start_error: ConfigError | None = None

    async def start(self) -> None:
        """Open and start everything; on any failure close what was opened and raise (ConfigError for a
        database or setting that cannot be used)."""
        try:
            try:
                await asyncio.to_thread(self.tools.manager.start)
            except (StoreError, EvaluationError) as error:
                raise ConfigError(str(error)) from None
            if self.task_tables is not None:
                for table in self.task_tables:
                    await table.initialize()
            self.tools.manager.follow_tasks_with(self._continuer(asyncio.get_running_loop()))
            self._warm = asyncio.create_task(asyncio.to_thread(catalog.domains))  # the first list_domains is quick
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        if self._warm is not None:
            self._warm.cancel()
        await asyncio.to_thread(self._close_manager)
        await self.handler.aclose()
        for engine in self.engines:
            await engine.dispose()

    def _close_manager(self) -> None:
        try:
            self.tools.manager.close()
        except StoreError:  # its database never opened: nothing of it runs
            pass

    def _continuer(self, loop: asyncio.AbstractEventLoop) -> Callable[[FollowedTask], None]:
        handler = self.handler

        def continue_task(task: FollowedTask) -> None:
            """Called from the scheduler's thread for a task whose follower stopped."""
            future = asyncio.run_coroutine_threadsafe(handler.continue_task(task.task_id, task.evaluation_id), loop)
            future.add_done_callback(lambda done: None if done.cancelled() or done.exception() is None else
                                     log.warning("A2A task %s of evaluation %s was not continued: %s",
                                                 task.task_id, task.evaluation_id, done.exception()))

        return continue_task

    async def lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI lifespan protocol (Starlette's router calls it): a failed start is one line, not a
        traceback, and is kept in `start_error`."""
        await receive()  # lifespan.startup
        try:
            await self.start()
        except ConfigError as error:
            self.start_error = error
            await send({"type": "lifespan.startup.failed", "message": ""})
            return
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        await self.close()
        await send({"type": "lifespan.shutdown.complete"})
