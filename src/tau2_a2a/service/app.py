"""`tau2-a2a serve`'s A2A app: the service's executor, every binding, tasks in the service's database.

The request handler (handler.py) reads each message once into a typed call
(call.py); the service's own a2a-sdk executor (executor.py) runs tool calls
and assessments straight on the tools and the job core, through TaskUpdater.
Text goes to ADK's A2aAgentExecutor running the service's LlmAgent when a
model is configured (evaluator_agent.py); with none, the executor answers it.

What the app adds around them: the card (public_card.py), the bearer-token
check on every binding and on each evaluation's HTML report (auth.py,
report.py), and a limit on request sizes (request_limit.py). Building the app
opens nothing and starts nothing: its lifespan does (lifespan.py).

Only the serving path imports this module: the CLI (cli/serve.py) imports it
when it serves, so `tau2-a2a run` and the evaluation processes do not pay for
ADK and a2a-sdk's server.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from a2a.server.cluster import DatabaseTaskEventStream, VersionedDatabaseTaskStore
from sqlalchemy.ext.asyncio import create_async_engine
from starlette.applications import Starlette
from starlette.middleware import Middleware

from tau2_a2a.client import tracing
from tau2_a2a.protocol.hosting import a2a_routes, conformance_middleware
from tau2_a2a.service.a2a_sdk_internals import require
from tau2_a2a.service.auth import BearerAuth, grpc_bearer_auth
from tau2_a2a.service.executor import ServiceExecutor
from tau2_a2a.service.handler import ServiceRequestHandler
from tau2_a2a.service.jobs.database import sqlalchemy_url, tune_sqlite
from tau2_a2a.service.jobs.queue import replica_name
from tau2_a2a.service.lifespan import ServiceResources
from tau2_a2a.service.public_card import service_card
from tau2_a2a.service.report import report_route
from tau2_a2a.service.request_limit import RequestSizeLimit
from tau2_a2a.service.settings import ServiceSettings
from tau2_a2a.service.tools import EvaluationTools

if TYPE_CHECKING:
    from a2a.server.agent_execution import AgentExecutor
    from a2a.server.cluster import VersionedTaskStore
    from a2a.server.tasks import TaskStore
    from google.adk.agents import BaseAgent
    from google.adk.runners import Runner

log = logging.getLogger("tau2_a2a.service")


def build_runner(agent: BaseAgent) -> Runner:
    """An ADK runner with in-memory sessions and the token-scrubbing plugin."""
    from google.adk.apps import App
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService

    from tau2_a2a.service.vault import adk_plugin

    return Runner(app=App(name=agent.name, root_agent=agent, plugins=[adk_plugin()]),
                  session_service=InMemorySessionService())


def text_executor(settings: ServiceSettings, tools: EvaluationTools, poll_seconds: float,
                  remembered: Mapping[str, str]) -> AgentExecutor | None:
    """ADK's A2A executor running the service's LlmAgent, for text, when a model is configured; `remembered`:
    the last evaluation the service's executor answered about, by context."""
    if not settings.model:
        return None
    from google.adk.a2a.executor.a2a_agent_executor import A2aAgentExecutor

    from tau2_a2a.service.evaluator_agent import build_agent

    return A2aAgentExecutor(runner=build_runner(build_agent(settings, tools, poll_seconds, remembered)))


def replica_name_for(url: str) -> str:
    """This service's name among replicas: its host and port, stable across its restarts."""
    return replica_name(urlsplit(url).port)


def build_app(settings: ServiceSettings, url: str, poll_seconds: float = 0.5, grpc_url: str | None = None,
              task_store: TaskStore | VersionedTaskStore | None = None) -> Starlette:
    """The Starlette app of `tau2-a2a serve`; `app.state.tools` holds the service's tools. It opens and starts
    nothing: its lifespan does (`app.state.resources`).

    The A2A tasks live in the service's database unless `task_store` is given
    (the benchmark compares a2a-sdk's in-memory store).

    With `grpc_url` (host:port) the card declares gRPC too; serve it with
    tau2_a2a.protocol.hosting (BackgroundServer or serve_forever with a gRPC port).
    """
    tools = settings.tools(replica=settings.replica or replica_name_for(url))
    card = service_card(url, settings.limits, auth=bool(settings.auth_token), grpc_url=grpc_url,
                        user_llms=tools.user_llms)
    engine = event_stream = reader = task_tables = None
    if task_store is None:  # the A2A tasks live in the evaluations' database, shared by replicas
        shared = tools.manager.database.shared
        url_async = sqlalchemy_url(tools.manager.database.location, asynchronous=True)
        # SQLite has one writer at a time: one connection queues this process's writes instead of
        # letting their transactions collide and retry.
        engine = create_async_engine(url_async, pool_pre_ping=True,
                                     **({} if shared else {"pool_size": 1, "max_overflow": 0}))
        tables = VersionedDatabaseTaskStore(engine)  # a2a-sdk's own tables, made by the lifespan
        event_stream = DatabaseTaskEventStream(engine)  # subscribe and cancel through any replica
        task_store, task_tables = tables, (tables, event_stream)
        if not shared:
            tune_sqlite(engine)
            # GetTask reads through connections of its own: in WAL mode a reader never waits for the
            # writer, but behind the one writing connection it would wait for every queued write.
            reader = create_async_engine(url_async, pool_size=4, max_overflow=4)
            tune_sqlite(reader)
    executor = ServiceExecutor(tools, poll_seconds=poll_seconds, max_message_bytes=settings.max_message_bytes)
    executor.text_executor = text_executor(settings, tools, poll_seconds, executor.last_evaluation)
    handler = ServiceRequestHandler(
        agent_executor=executor,
        task_store=task_store,
        agent_card=card,
        event_stream=event_stream,
        tools=tools,
        task_reader=VersionedDatabaseTaskStore(reader, create_table=False) if reader is not None else None,
        max_message_bytes=settings.max_message_bytes,
    )
    require(handler)  # an a2a-sdk that changed stops the service here, in one line

    resources = ServiceResources(tools, handler, task_tables, tuple(used for used in (engine, reader) if used))

    middleware = [Middleware(RequestSizeLimit, max_bytes=settings.max_request_bytes)]
    traced = tracing.setup()
    if settings.auth_token:
        middleware.append(Middleware(BearerAuth, token=settings.auth_token))
    middleware += conformance_middleware()  # innermost: it answers what a2a-sdk's routes would answer wrongly
    tools.public_url = url
    # The report's route first: the HTTP+JSON routes end with a catch-all.
    app = Starlette(routes=[report_route(tools.manager), *a2a_routes(handler, card)], middleware=middleware)
    app.router.lifespan = resources.lifespan  # type: ignore[method-assign]
    app.state.a2a_handler = handler
    app.state.grpc_interceptors = [grpc_bearer_auth(settings.auth_token)] if settings.auth_token else []
    if traced:  # outermost, on every binding: a caller's trace continues here, and into each evaluation's run
        tracing.continue_traces(app)
    app.state.grpc_options = [("grpc.max_receive_message_length", settings.max_request_bytes)]
    app.state.tools = tools
    app.state.card = card
    app.state.resources = resources
    return app
