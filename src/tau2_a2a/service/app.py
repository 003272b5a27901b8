"""`tau2-a2a serve`: the evaluation service's A2A app: card, bearer auth, every binding.

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

What this module adds: a card with one skill per tool (argument schema and
example), the bearer-token check on every binding (JSON-RPC, HTTP+JSON, gRPC;
the card stays public) and on each evaluation's HTML report (report.py), and moving a target's token out of the request before
the task store keeps it.

Heavy imports (ADK, a2a-sdk server) happen inside functions, so the CLI and
the evaluation processes it starts do not pay for them.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import json
import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tau2_a2a.protocol.cards import CARD_PATHS, HTTP_BINDINGS, agent_card, card_json
from tau2_a2a.service.evaluations import DEFAULT_LIMITS, SERVICE_TOKEN_ENV, Limits
from tau2_a2a.service.settings import ServiceSettings, names

log = logging.getLogger("tau2_a2a.service")

DEFAULT_PORT = 9200
ADK_BINDINGS = ("JSONRPC",)  # what ADK's A2A app (`adk web --a2a`, to_a2a) serves
UNAUTHORIZED = ("Unauthorized: send 'Authorization: Bearer <token>' (an HTTP header, or gRPC metadata) with "
                "this service's token. The agent card is public.")
SERVICE_NAME = "tau2 evaluation service"
_NATURAL_EXAMPLES = {
    "list_domains": "Which tau2 domains can you evaluate an agent on?",
    "run_tau2_evaluation": "Evaluate the A2A agent at http://127.0.0.1:9100 on 5 airline tasks.",
    "get_evaluation": "Show me the results of my last evaluation.",
    "list_evaluations": "List the evaluations you ran.",
    "cancel_evaluation": "Cancel evaluation ev-0123456789ab.",
}


def service_card(url: str, limits: Limits = DEFAULT_LIMITS, auth: bool = False, grpc_url: str | None = None,
                 http_bindings: tuple[str, ...] = HTTP_BINDINGS, user_llms: Any = None) -> Any:
    """The card: one skill per tool with its JSON Schema and examples; a bearer scheme when auth is on.

    It declares `http_bindings` at `url` and gRPC at `grpc_url` (host:port), each for A2A 1.0 and 0.3.
    `user_llms` (a UserLLMPolicy; default tau2's user LLM only) is the enum of `user_llm`.
    """
    from a2a.types import AgentSkill, HTTPAuthSecurityScheme, SecurityRequirement, SecurityScheme, StringList

    from tau2_a2a.service.credentials import UserLLMPolicy
    from tau2_a2a.service.tools import ALIASES, tool_specs

    aliases = {tool: alias for alias, tool in ALIASES.items()}
    skills = []
    for name, spec in tool_specs(limits, user_llms or UserLLMPolicy()).items():
        alias = f" Alias: {aliases[name]}." if name in aliases else ""
        skills.append(AgentSkill(
            id=name,
            name=name,
            description=(f"{spec.description}{alias} Structured request: a data part "
                         f'{{"tool": "{name}", "arguments": {{...}}}}. '
                         f"Arguments (JSON Schema): {json.dumps(spec.parameters, sort_keys=True)}"),
            tags=["tau2", "evaluation"],
            examples=[json.dumps(spec.example_request()), _NATURAL_EXAMPLES[name]],
            input_modes=["application/json", "text/plain"],
            output_modes=["application/json", "text/plain"],
        ))
    card = agent_card(
        name=SERVICE_NAME,
        description=("Evaluates A2A agents with tau2-bench. Send a data part {\"tool\": ..., \"arguments\": ...} "
                     "to call a tool directly (no model needed), or text when a model is configured. "
                     "run_tau2_evaluation answers with a task that reports progress and ends with an "
                     "artifact holding the metrics."),
        url=url,
        skills=skills,
        streaming=True,
        grpc_url=grpc_url,
        http_bindings=http_bindings,
    )
    if auth:
        scheme = HTTPAuthSecurityScheme(
            scheme="bearer", description=f"The service's token (tau2-a2a serve --auth-token or ${SERVICE_TOKEN_ENV}).")
        card.security_schemes["bearer"].CopyFrom(SecurityScheme(http_auth_security_scheme=scheme))
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    return card


def bearer_matches(value: bytes | None, token: bytes) -> bool:
    """Whether an Authorization value is `Bearer <token>` (compared in constant time)."""
    scheme, _, credential = (value or b"").partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(credential.strip(), token)


class BearerAuth:
    """ASGI middleware: every request but the card needs `Authorization: Bearer <token>`."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in CARD_PATHS or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        from starlette.responses import JSONResponse

        response = JSONResponse({"error": UNAUTHORIZED}, status_code=401,
                                headers={"WWW-Authenticate": 'Bearer realm="tau2-eval"'})
        await response(scope, receive, send)

    def _authorized(self, scope: dict[str, Any]) -> bool:
        value = next((v for name, v in scope.get("headers", []) if name == b"authorization"), None)
        return bearer_matches(value, self._token)


def grpc_bearer_auth(token: str) -> Any:
    """A grpc.aio interceptor: every call needs the metadata `authorization: Bearer <token>`."""
    import grpc

    async def refuse(request: Any, context: Any) -> None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHORIZED)

    class GrpcBearerAuth(grpc.aio.ServerInterceptor):
        async def intercept_service(self, continuation: Any, details: Any) -> Any:
            handler = await continuation(details)
            value = next((v for name, v in details.invocation_metadata or () if name == "authorization"), "")
            if handler is None or bearer_matches(value.encode(), token.encode()):
                return handler
            # The same kind of method (A2A has unary and server-streaming ones), answering UNAUTHENTICATED.
            if handler.unary_stream:
                return grpc.unary_stream_rpc_method_handler(
                    refuse, handler.request_deserializer, handler.response_serializer)
            return grpc.unary_unary_rpc_method_handler(refuse, handler.request_deserializer,
                                                       handler.response_serializer)

    return GrpcBearerAuth()


def _request_handler_class() -> type:
    from a2a.server.agent_execution import RequestContext
    from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES
    from a2a.server.context import ServerCallContext
    from a2a.server.request_handlers import DefaultRequestHandler, validate_request_params
    from a2a.types import Role, SendMessageRequest
    from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
    from a2a.utils.task import apply_history_length, validate_history_length

    from tau2_a2a.service.executor import RESUME_STATE
    from tau2_a2a.service.reads import read_only_reply
    from tau2_a2a.service.vault import scrub_a2a_message

    def scrubbed(message: Any) -> None:
        """The message's secrets moved out before anything stores it; one it cannot read is the caller's error."""
        try:
            scrub_a2a_message(message)
        except ValueError as error:  # a data part holding Infinity or NaN has no JSON form
            raise InvalidParamsError(message=f"A data part of the message cannot be read as JSON ({error}): "
                                             "send finite numbers only.") from None

    class ServiceRequestHandler(DefaultRequestHandler):
        """a2a-sdk's handler, plus: a target's token leaves the message before the task store keeps it,
        a read-only tool call is answered with a Message (reads.py), and a task whose execution stopped
        with its service can be continued by another."""

        def __init__(self, *args: Any, tools: Any, task_reader: Any = None, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.tools = tools
            self.task_reader = task_reader  # GetTask reads through it when given

        @validate_request_params
        async def on_get_task(self, params: Any, context: Any) -> Any:
            if self.task_reader is None:
                return await super().on_get_task(params, context)
            validate_history_length(params)
            stored = await self.task_reader.get(params.id, context)
            if stored is None:
                raise TaskNotFoundError
            return apply_history_length(stored.task, params)

        @validate_request_params
        async def on_message_send(self, params: Any, context: Any) -> Any:
            scrubbed(params.message)
            reply = await read_only_reply(self.tools, params.message)
            if reply is not None:
                return reply
            return await super().on_message_send(params, context)

        @validate_request_params
        async def on_message_send_stream(self, params: Any, context: Any) -> AsyncIterator[Any]:
            scrubbed(params.message)
            reply = await read_only_reply(self.tools, params.message)
            if reply is not None:
                yield reply
                return
            async for event in super().on_message_send_stream(params, context):
                yield event

        async def continue_task(self, task_id: str, evaluation_id: str) -> bool:
            """Run the agent again on the task's first message, following `evaluation_id`, the way a
            new message runs it: its events reach the task store and every subscriber, on any replica.
            Whether there was a task to continue."""
            call_context = ServerCallContext(state={RESUME_STATE: evaluation_id})
            if await self._active_task_registry.get(task_id) is not None:
                return False  # it runs here already
            stored = await self._versioned_store.get(task_id, call_context)
            if stored is None:
                return False
            task = stored.task
            first = next((m for m in task.history if m.role == Role.ROLE_USER), None)
            if first is None or task.status.state in TERMINAL_TASK_STATES:
                return False
            active = await self._active_task_registry.get_or_create(
                task_id, call_context=call_context, context_id=task.context_id, create_task_if_missing=False)
            await active.enqueue_request(RequestContext(
                call_context=call_context, request=SendMessageRequest(message=first),
                task_id=task.id, context_id=task.context_id, task=task))
            return True

    return ServiceRequestHandler


def build_runner(agent: Any) -> Any:
    """An ADK runner with in-memory sessions and the token-scrubbing plugin."""
    from google.adk.apps import App
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService

    from tau2_a2a.service.vault import adk_plugin

    return Runner(app=App(name=agent.name, root_agent=agent, plugins=[adk_plugin()]),
                  session_service=InMemorySessionService())


def replica_name_for(url: str) -> str:
    """This service's name among replicas: its host and port, stable across its restarts."""
    from urllib.parse import urlsplit

    from tau2_a2a.service.store import replica_name

    return replica_name(urlsplit(url).port)


def build_app(settings: ServiceSettings, url: str, poll_seconds: float = 0.5, grpc_url: str | None = None,
              task_store: Any = None) -> Any:
    """The Starlette app of `tau2-a2a serve`; `app.state.tools` holds the service's tools.

    The A2A tasks live in the service's database unless `task_store` is given
    (the benchmark compares a2a-sdk's in-memory store).

    With `grpc_url` (host:port) the card declares gRPC too; serve it with
    tau2_a2a.protocol.hosting (BackgroundServer or serve_forever with a gRPC port).
    """
    from a2a.server.cluster import DatabaseTaskEventStream, VersionedDatabaseTaskStore
    from google.adk.a2a.executor.a2a_agent_executor import A2aAgentExecutor
    from sqlalchemy.ext.asyncio import create_async_engine
    from starlette.applications import Starlette
    from starlette.middleware import Middleware

    from tau2_a2a.service import catalog
    from tau2_a2a.service.agent import build_agent
    from tau2_a2a.service.executor import executor_config
    from tau2_a2a.service.report import report_route
    from tau2_a2a.service.request_limit import RequestSizeLimit
    from tau2_a2a.service.store import sqlalchemy_url, tune_sqlite
    from tau2_a2a.protocol.hosting import a2a_routes, conformance_middleware

    tools = settings.tools(replica=settings.replica or replica_name_for(url))
    agent = build_agent(settings, tools, poll_seconds=poll_seconds)
    card = service_card(url, settings.limits, auth=bool(settings.auth_token), grpc_url=grpc_url,
                        user_llms=tools.user_llms)
    engine = event_stream = reader = None
    if task_store is None:  # the A2A tasks live in the evaluations' database, shared by replicas
        shared = tools.manager.store.shared
        url_async = sqlalchemy_url(tools.manager.store.database, asynchronous=True)
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
    handler = _request_handler_class()(
        agent_executor=A2aAgentExecutor(runner=build_runner(agent), config=executor_config()),
        task_store=task_store,
        agent_card=card,
        event_stream=event_stream,
        tools=tools,
        task_reader=VersionedDatabaseTaskStore(reader, create_table=False) if reader is not None else None,
    )

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        warm = asyncio.create_task(asyncio.to_thread(catalog.domains))  # first list_domains is then quick
        if event_stream is not None:
            await task_store.initialize()
            await event_stream.initialize()
        loop = asyncio.get_running_loop()

        def continue_task(row: Any) -> None:
            """Called from the manager's thread for a task whose follower stopped."""
            future = asyncio.run_coroutine_threadsafe(handler.continue_task(row.task_id, row.evaluation_id), loop)
            future.add_done_callback(lambda done: None if done.cancelled() or done.exception() is None else
                                     log.warning("A2A task %s of evaluation %s was not continued: %s",
                                                 row.task_id, row.evaluation_id, done.exception()))

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
    if settings.auth_token:
        middleware.append(Middleware(BearerAuth, token=settings.auth_token))
    middleware += conformance_middleware()  # innermost: it answers what a2a-sdk's routes would answer wrongly
    tools.public_url = url
    # The report's route first: the HTTP+JSON routes end with a catch-all.
    app = Starlette(routes=[report_route(tools.manager), *a2a_routes(handler, card)], middleware=middleware,
                    lifespan=lifespan)
    app.state.a2a_handler = handler
    app.state.grpc_interceptors = [grpc_bearer_auth(settings.auth_token)] if settings.auth_token else []
    app.state.grpc_options = [("grpc.max_receive_message_length", settings.max_request_bytes)]
    app.state.tools = tools
    app.state.card = card
    return app


# -- the CLI -------------------------------------------------------------------------------

def add_serve_command(commands: Any) -> None:
    """`tau2-a2a serve`: flags override the TAU2_EVAL_* environment variables."""
    serve = commands.add_parser(
        "serve", help="Serve tau2 evaluations as an A2A agent (Google ADK)",
        description="Serve tau2-bench evaluations as an A2A agent: card at /.well-known/agent-card.json, "
                    "JSON-RPC at / and HTTP+JSON on --port, gRPC on --grpc-port, each for A2A 1.0 and 0.3. "
                    "Flags override TAU2_EVAL_* environment variables.",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="JSON-RPC, HTTP+JSON and the card")
    serve.add_argument("--grpc-port", type=int, default=None, help="Serve gRPC too, on this port")
    serve.add_argument("--public-url", default=None, help="URL the card advertises (default http://HOST:PORT)")
    serve.add_argument("--public-grpc-url", default=None,
                       help="host:port the card advertises for gRPC (default HOST:GRPC_PORT)")
    serve.add_argument("--results-dir", default=None, help="Where evaluations are kept (TAU2_EVAL_RESULTS_DIR; "
                                                           "default ./tau2_eval_results)")
    serve.add_argument("--model", default=None, help="LiteLLM model for text requests (TAU2_EVAL_MODEL); "
                                                     "without one, only structured requests run")
    serve.add_argument("--model-api-base", default=None,
                       help="OpenAI-compatible endpoint for --model openai/NAME (TAU2_EVAL_MODEL_API_BASE)")
    serve.add_argument("--auth-token", default=None,
                       help=f"Bearer token callers must send (prefer ${SERVICE_TOKEN_ENV}: a flag shows in ps)")
    serve.add_argument("--allowed-user-llms", default=None, metavar="MODELS",
                       help="Comma-separated LiteLLM models callers may choose as user_llm "
                            "(TAU2_EVAL_ALLOWED_USER_LLMS; default: tau2's default user LLM only)")
    serve.add_argument("--user-llm-api-base", default=None, metavar="URL",
                       help="Endpoint the evaluations reach the user LLM at, with the service's keys "
                            "(TAU2_EVAL_USER_LLM_API_BASE; default: the provider's). Callers cannot choose one")
    serve.add_argument("--allowed-targets", default=None,
                       help="Comma-separated hosts, *.domains, IPs, CIDR networks and the keywords public, "
                            "private, loopback the service may evaluate; a list replaces the default, e.g. "
                            "public,loopback (TAU2_EVAL_ALLOWED_TARGETS; default: public, globally routable "
                            "addresses only; link-local and metadata addresses are always refused)")
    serve.add_argument("--max-running", type=int, default=None, help="Evaluations at once; more are queued")
    serve.add_argument("--max-queued", type=int, default=None, help="Evaluations waiting at most")
    serve.add_argument("--max-simulations", type=int, default=None, help="Tasks x trials per request at most")
    serve.add_argument("--max-concurrency", type=int, default=None,
                       help="max_concurrency per evaluation at most")
    serve.add_argument("--ray", default=None, metavar="ADDRESS",
                       help="Run each evaluation's simulations on this Ray cluster (TAU2_EVAL_RAY_ADDRESS): "
                            "auto, ray://HOST:PORT, HOST:PORT or local; see `tau2-a2a run --ray`")
    serve.add_argument("--database", default=None, metavar="URL",
                       help="Where evaluations, the queue and A2A tasks live (TAU2_EVAL_DATABASE): a SQLite file "
                            "(default RESULTS_DIR/service.sqlite) or postgresql://USER@HOST:PORT/DB, which "
                            "replicas share (they must share --results-dir too)")
    serve.add_argument("--replica-id", default=None,
                       help="This replica's name on a shared database (TAU2_EVAL_REPLICA; default HOSTNAME:PORT); "
                            "keep it across restarts to take back its evaluations at once")
    serve.add_argument("--lease-seconds", type=float, default=None,
                       help="How long a replica that stopped answering keeps its evaluations before another "
                            "takes them over (TAU2_EVAL_LEASE_SECONDS; default 30)")
    serve.add_argument("--max-request-bytes", type=int, default=None,
                       help="Refuse request bodies over this size (TAU2_EVAL_MAX_REQUEST_BYTES; default 10 MiB)")
    serve.add_argument("--evaluation-nice", type=int, default=None, metavar="STEPS",
                       help="Run each evaluation's process this many nice steps (0-19) below the service, so "
                            "the service answers promptly while evaluations run (TAU2_EVAL_EVALUATION_NICE; "
                            "default 10; 0 keeps the service's priority)")
    serve.add_argument("--write-card", metavar="PATH", default=None,
                       help="Write the card of the ADK app (JSON-RPC only) to PATH, for "
                            "adk_agents/<app>/agent.json with --public-url, and exit")
    serve.set_defaults(func=serve_command)


def settings_from_args(args: argparse.Namespace) -> ServiceSettings:
    base = ServiceSettings.from_env()
    def pick(flag: int | None, default: int) -> int:
        return default if flag is None else flag

    limits = Limits(
        max_running=pick(args.max_running, base.limits.max_running),
        max_queued=pick(args.max_queued, base.limits.max_queued),
        max_simulations=pick(args.max_simulations, base.limits.max_simulations),
        max_concurrency=pick(args.max_concurrency, base.limits.max_concurrency),
    )
    targets = tuple(t for t in args.allowed_targets.split(",") if t.strip()) if args.allowed_targets else None
    return ServiceSettings(
        results_dir=Path(args.results_dir) if args.results_dir else base.results_dir,
        limits=limits,
        allowed_targets=base.allowed_targets if targets is None else targets,
        model=args.model or base.model,
        model_api_base=args.model_api_base or base.model_api_base,
        auth_token=args.auth_token or base.auth_token,
        ray_address=args.ray or base.ray_address,
        database=args.database or base.database,
        replica=args.replica_id or base.replica,
        lease_seconds=base.lease_seconds if args.lease_seconds is None else args.lease_seconds,
        max_request_bytes=base.max_request_bytes if args.max_request_bytes is None else args.max_request_bytes,
        evaluation_nice=base.evaluation_nice if args.evaluation_nice is None else args.evaluation_nice,
        allowed_user_llms=names(args.allowed_user_llms) or base.allowed_user_llms,
        user_llm_api_base=args.user_llm_api_base or base.user_llm_api_base,
    )


def serve_command(args: argparse.Namespace) -> int:
    from tau2_a2a.client.config import ConfigError
    from tau2_a2a.service.evaluations import EvaluationError
    from tau2_a2a.service.store import redact_url
    from tau2_a2a.client.targets import TargetPolicy
    from tau2_a2a.protocol.hosting import serve_forever

    try:
        settings = settings_from_args(args)
        TargetPolicy.from_entries(settings.allowed_targets)  # a bad entry stops here, with its reason
        user_llms = settings.user_llm_policy()
    except EvaluationError as error:
        raise ConfigError(str(error)) from None
    if settings.lease_seconds <= 0 or settings.max_request_bytes < 1:
        raise ConfigError("--lease-seconds and --max-request-bytes must be positive.")
    url = (args.public_url or f"http://{args.host}:{args.port}").rstrip("/")
    if args.write_card:
        card = service_card(url, settings.limits, http_bindings=ADK_BINDINGS, user_llms=user_llms)
        Path(args.write_card).write_text(json.dumps(card_json(card), indent=2) + "\n")
        print(f"Wrote the card for {url} to {args.write_card}")
        return 0
    grpc_url = (args.public_grpc_url or f"{args.host}:{args.grpc_port}") if args.grpc_port else None
    os.umask(0o077)  # everything the service writes (database, results, logs) is its user's only
    app = build_app(settings, url, grpc_url=grpc_url)
    print(f"{SERVICE_NAME} at {url} (card: {url}{CARD_PATHS[0]})")
    print(f"  bindings (A2A 1.0 and 0.3): JSON-RPC and HTTP+JSON at {url}"
          + (f", gRPC at {grpc_url}" if grpc_url else ""))
    print(f"  results: {settings.results_dir.resolve()}   auth: {'bearer token' if settings.auth_token else 'off'}"
          f"   model: {settings.model or 'none (structured requests only)'}")
    targets = TargetPolicy.from_entries(settings.allowed_targets).describe()
    print(f"  limits: {settings.limits.max_running} running, {settings.limits.max_queued} queued, "
          f"{settings.limits.max_simulations} simulations per request, max_concurrency "
          f"{settings.limits.max_concurrency}   targets: {targets}")
    print(f"  user LLMs: {', '.join(user_llms.allowed)} (or scripted_user), at "
          f"{user_llms.api_base or 'the provider endpoint'}")
    where = f"on the Ray cluster at {settings.ray_address}" if settings.ray_address else "in each evaluation's process"
    print(f"  simulations: {where}, {settings.evaluation_nice} nice steps below the service")
    print(f"  database: {redact_url(app.state.tools.manager.store.database)}   replica: {app.state.tools.manager.replica}")
    sys.stdout.flush()
    serve_forever(app, args.host, args.port, grpc_port=args.grpc_port,
                  log_level=os.environ.get("TAU2_EVAL_LOG_LEVEL", "warning"))
    return 0
