"""`tau2-a2a serve`'s A2A app: the agent behind ADK's executor, every binding, tasks in the service's database.

Why ADK's own `A2aAgentExecutor` runs the agent here (and not an executor of
ours): it is what `adk web --a2a` / `adk api_server --a2a` use, so both ways of
serving behave the same, and it gives what long evaluations need. It emits
`working`, forwards every agent event as a `working` status update with its
message (our progress updates), turns the final event into the task's
artifact, maps the A2A `context_id` to the ADK session, and on CancelTask the
a2a-sdk request handler cancels the agent's coroutine, which our agent turns
into canceling the evaluation. What it cannot express: a `cancel_evaluation`
call ends the evaluation's own task as completed, with `status: canceled` in
its artifact.

What the app adds around it: the card (public_card.py), the bearer-token check
on every binding and on each evaluation's HTML report (auth.py, report.py),
moving a target's token out of the request before the task store keeps it
(handler.py), and a limit on request sizes (request_limit.py).

Only the serving path imports this module: the CLI (cli/serve.py) imports it
when it serves, so `tau2-a2a run` and the evaluation processes do not pay for
ADK and a2a-sdk's server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from a2a.server.cluster import DatabaseTaskEventStream, VersionedDatabaseTaskStore
from google.adk.a2a.executor.a2a_agent_executor import A2aAgentExecutor
from google.adk.apps import App
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from sqlalchemy.ext.asyncio import create_async_engine
from starlette.applications import Starlette
from starlette.middleware import Middleware

from tau2_a2a.client import tracing
from tau2_a2a.protocol.hosting import a2a_routes, conformance_middleware
from tau2_a2a.service import catalog
from tau2_a2a.service.a2a_sdk_internals import require
from tau2_a2a.service.auth import BearerAuth, grpc_bearer_auth
from tau2_a2a.service.evaluator_agent import build_agent
from tau2_a2a.service.executor import executor_config
from tau2_a2a.service.handler import ServiceRequestHandler
from tau2_a2a.service.jobs.database import sqlalchemy_url, tune_sqlite
from tau2_a2a.service.jobs.queue import FollowedTask, replica_name
from tau2_a2a.service.public_card import service_card
from tau2_a2a.service.report import report_route
from tau2_a2a.service.request_limit import RequestSizeLimit
from tau2_a2a.service.settings import ServiceSettings
from tau2_a2a.service.vault import adk_plugin

if TYPE_CHECKING:
    from a2a.server.cluster import VersionedTaskStore
    from a2a.server.tasks import TaskStore
    from google.adk.agents import BaseAgent

log = logging.getLogger("tau2_a2a.service")


def build_runner(agent: BaseAgent) -> Runner:
    """An ADK runner with in-memory sessions and the token-scrubbing plugin."""
    return Runner(app=App(name=agent.name, root_agent=agent, plugins=[adk_plugin()]),
                  session_service=InMemorySessionService())


def replica_name_for(url: str) -> str:
    """This service's name among replicas: its host and port, stable across its restarts."""
    return replica_name(urlsplit(url).port)


def build_app(settings: ServiceSettings, url: str, poll_seconds: float = 0.5, grpc_url: str | None = None,
              task_store: TaskStore | VersionedTaskStore | None = None) -> Starlette:
    """The Starlette app of `tau2-a2a serve`; `app.state.tools` holds the service's tools.

    The A2A tasks live in the service's database unless `task_store` is given
    (the benchmark compares a2a-sdk's in-memory store).

    With `grpc_url` (host:port) the card declares gRPC too; serve it with
    tau2_a2a.protocol.hosting (BackgroundServer or serve_forever with a gRPC port).
    """
    tools = settings.tools(replica=settings.replica or replica_name_for(url))
    agent = build_agent(settings, tools, poll_seconds=poll_seconds)
    card = service_card(url, settings.limits, auth=bool(settings.auth_token), grpc_url=grpc_url,
                        user_llms=tools.user_llms)
    engine = event_stream = reader = None
    if task_store is None:  # the A2A tasks live in the evaluations' database, shared by replicas
        shared = tools.manager.database.shared
        url_async = sqlalchemy_url(tools.manager.database.location, asynchronous=True)
        # SQLite has one writer at a time: one connection queues this process's writes instead of
        # letting their transactions collide and retry.
        engine = create_async_engine(url_async, pool_pre_ping=True,
                                     **({} if shared else {"pool_size": 1, "max_overflow": 0}))
        task_store = VersionedDatabaseTaskStore(engine)  # a2a-sdk's own tables
        event_stream = DatabaseTaskEventStream(engine)  # subscribe and cancel through any replica
        if not shared:
            tune_sqlite(engine)
            # GetTask reads through connections of its own: in WAL mode a reader never waits for the
            # writer, but behind the one writing connection it would wait for every queued write.
            reader = create_async_engine(url_async, pool_size=4, max_overflow=4)
            tune_sqlite(reader)
    handler = ServiceRequestHandler(
        agent_executor=A2aAgentExecutor(runner=build_runner(agent), config=executor_config()),
        task_store=task_store,
        agent_card=card,
        event_stream=event_stream,
        tools=tools,
        task_reader=VersionedDatabaseTaskStore(reader, create_table=False) if reader is not None else None,
        max_message_bytes=settings.max_message_bytes,
    )
    require(handler)  # an a2a-sdk that changed stops the service here, in one line

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        warm = asyncio.create_task(asyncio.to_thread(catalog.domains))  # first list_domains is then quick
        if event_stream is not None and isinstance(task_store, VersionedDatabaseTaskStore):  # made above
            await task_store.initialize()
            await event_stream.initialize()
        loop = asyncio.get_running_loop()

        def continue_task(task: FollowedTask) -> None:
            """Called from the scheduler's thread for a task whose follower stopped."""
            future = asyncio.run_coroutine_threadsafe(handler.continue_task(task.task_id, task.evaluation_id), loop)
            future.add_done_callback(lambda done: None if done.cancelled() or done.exception() is None else
                                     log.warning("A2A task %s of evaluation %s was not continued: %s",
                                                 task.task_id, task.evaluation_id, done.exception()))

        tools.manager.follow_tasks_with(continue_task)
        try:
            yield
        finally:
            warm.cancel()
            await asyncio.to_thread(tools.manager.close)
            await handler.aclose()
            for used in (engine, reader):
                if used is not None:
                    await used.dispose()

    middleware = [Middleware(RequestSizeLimit, max_bytes=settings.max_request_bytes)]
    traced = tracing.setup()
    if settings.auth_token:
        middleware.append(Middleware(BearerAuth, token=settings.auth_token))
    middleware += conformance_middleware()  # innermost: it answers what a2a-sdk's routes would answer wrongly
    tools.public_url = url
    # The report's route first: the HTTP+JSON routes end with a catch-all.
    app = Starlette(routes=[report_route(tools.manager), *a2a_routes(handler, card)], middleware=middleware,
                    lifespan=lifespan)
    app.state.a2a_handler = handler
    app.state.grpc_interceptors = [grpc_bearer_auth(settings.auth_token)] if settings.auth_token else []
    if traced:  # outermost, on every binding: a caller's trace continues here, and into each evaluation's run
        tracing.continue_traces(app)
    app.state.grpc_options = [("grpc.max_receive_message_length", settings.max_request_bytes)]
    app.state.tools = tools
    app.state.card = card
    return app
