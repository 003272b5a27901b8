"""`tau2-a2a serve`: the evaluation service's flags, and serving it until stopped.

Flags override the TAU2_EVAL_* environment variables (service/settings.py).
The service itself (ADK, a2a-sdk's server) is imported only when it serves, so
the other commands do not pay for it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tau2_a2a.cli.common import OneLineParser
from tau2_a2a.cli.urls import add_card_url_flag, advertised_urls
from tau2_a2a.client.config import (
    DEFAULT_MAX_AGENT_BYTES,
    DEFAULT_MAX_MCP_REQUESTS,
    DEFAULT_MAX_REPLY_BYTES,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_TOOL_CALLS,
    DEFAULT_MAX_TOOL_CALLS_PER_REPLY,
    DEFAULT_MCP_MAX_CONNECTIONS,
    DEFAULT_MCP_READ_TIMEOUT_SECONDS,
    DEFAULT_TIMEOUT_SECONDS,
    AgentLimits,
)
from tau2_a2a.service.jobs.limits import Limits
from tau2_a2a.service.request_limit import KEPT_TEXT_BYTES

if TYPE_CHECKING:
    from tau2_a2a.service.settings import ServiceSettings

DEFAULT_PORT = 9200


def add_serve_command(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    """`tau2-a2a serve`: flags override the TAU2_EVAL_* environment variables."""
    serve = commands.add_parser(
        "serve",
        description="Serve tau2-bench evaluations as an A2A agent: card at /.well-known/agent-card.json, "
                    "JSON-RPC at / and HTTP+JSON on --port, gRPC on --grpc-port, each for A2A 1.0 and 0.3. "
                    "Flags override TAU2_EVAL_* environment variables.",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="JSON-RPC, HTTP+JSON and the card")
    serve.add_argument("--grpc-port", type=int, default=None, help="Serve gRPC too, on this port")
    add_card_url_flag(serve, "--public-url")
    serve.add_argument("--public-grpc-url", default=None,
                       help="host:port the card advertises for gRPC (default: --card-url's host, else HOST, "
                            "on GRPC_PORT)")
    serve.add_argument("--results-dir", default=None, help="Where evaluations are kept (TAU2_EVAL_RESULTS_DIR; "
                                                           "default ./tau2_eval_results)")
    serve.add_argument("--model", default=None, help="LiteLLM model for text requests (TAU2_EVAL_MODEL); "
                                                     "without one, only structured requests run")
    serve.add_argument("--model-api-base", default=None,
                       help="OpenAI-compatible endpoint for --model openai/NAME (TAU2_EVAL_MODEL_API_BASE)")
    serve.add_argument("--auth-token", default=None,
                       help="Bearer token callers must send (prefer $TAU2_EVAL_AUTH_TOKEN: a flag shows in ps)")
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
    serve.add_argument("--max-message-bytes", type=int, default=None, metavar="BYTES",
                       help="Refuse (task rejected) an A2A message over this size, keeping only the first "
                            f"{KEPT_TEXT_BYTES} bytes of its text (TAU2_EVAL_MAX_MESSAGE_BYTES; default 1 MiB)")
    limits = serve.add_argument_group(
        "what each evaluated agent may take of its evaluation (reaching a limit ends that simulation)")
    limits.add_argument("--agent-timeout", type=float, default=None, metavar="SECONDS",
                        help="Seconds one reply of the agent may take, all of it, its card's too "
                             f"(TAU2_EVAL_AGENT_TIMEOUT; default {DEFAULT_TIMEOUT_SECONDS:g})")
    limits.add_argument("--agent-max-reply-bytes", type=int, default=None, metavar="BYTES",
                        help=f"Largest reply read (TAU2_EVAL_AGENT_MAX_REPLY_BYTES; default {DEFAULT_MAX_REPLY_BYTES})")
    limits.add_argument("--agent-max-tool-calls-per-reply", type=int, default=None, metavar="N",
                        help="Most tool calls in one reply (TAU2_EVAL_AGENT_MAX_TOOL_CALLS_PER_REPLY; default "
                             f"{DEFAULT_MAX_TOOL_CALLS_PER_REPLY})")
    limits.add_argument("--agent-max-tool-calls", type=int, default=None, metavar="N",
                        help="Most tool calls in one simulation (TAU2_EVAL_AGENT_MAX_TOOL_CALLS; default "
                             f"{DEFAULT_MAX_TOOL_CALLS})")
    limits.add_argument("--agent-max-request-bytes", type=int, default=None, metavar="BYTES",
                        help="Largest request sent to the agent (TAU2_EVAL_AGENT_MAX_REQUEST_BYTES; default "
                             f"{DEFAULT_MAX_REQUEST_BYTES})")
    limits.add_argument("--agent-max-mcp-requests", type=int, default=None, metavar="N",
                        help="Most MCP requests of every kind in one simulation (TAU2_EVAL_AGENT_MAX_MCP_REQUESTS; "
                             f"default {DEFAULT_MAX_MCP_REQUESTS})")
    limits.add_argument("--agent-max-agent-bytes", type=int, default=None, metavar="BYTES",
                        help="Most bytes the agent sends in one simulation: replies and MCP requests "
                             f"(TAU2_EVAL_AGENT_MAX_AGENT_BYTES; default {DEFAULT_MAX_AGENT_BYTES})")
    serve.add_argument("--evaluation-nice", type=int, default=None, metavar="STEPS",
                       help="Run each evaluation's process this many nice steps (0-19) below the service, so "
                            "the service answers promptly while evaluations run (TAU2_EVAL_EVALUATION_NICE; "
                            "default 10; 0 keeps the service's priority)")
    serve.add_argument("--evaluation-start", choices=("warm", "cold"), default=None,
                       help="warm: fork each evaluation's process from a process that has tau2 imported; cold: "
                            "start a new one, which imports tau2 first (TAU2_EVAL_EVALUATION_START; default warm)")
    serve.add_argument("--mcp-host", default=None, metavar="HOST",
                       help="Where an evaluation with agent_tools mcp or agent_driven serves the domain's tools "
                            "over MCP, on a free port (TAU2_EVAL_MCP_HOST; default 127.0.0.1: agents on this "
                            "machine; 0.0.0.0 for agents elsewhere)")
    serve.add_argument("--mcp-public-host", default=None, metavar="HOST",
                       help="The host name the evaluated agents reach those MCP servers by, e.g. this service's "
                            "name on a Docker network (TAU2_EVAL_MCP_PUBLIC_HOST; default: --mcp-host, or its "
                            "address)")
    serve.add_argument("--mcp-max-connections", type=int, default=None, metavar="N",
                       help="Connections each evaluation's MCP tools server holds open at most "
                            f"(TAU2_EVAL_MCP_MAX_CONNECTIONS; default {DEFAULT_MCP_MAX_CONNECTIONS})")
    serve.add_argument("--mcp-read-timeout", type=float, default=None, metavar="SECONDS",
                       help="Seconds a connection to those servers has to send each request whole "
                            f"(TAU2_EVAL_MCP_READ_TIMEOUT; default {DEFAULT_MCP_READ_TIMEOUT_SECONDS:g})")
    serve.add_argument("--write-card", metavar="PATH", default=None,
                       help="Write the card of the ADK app (JSON-RPC only) to PATH, for "
                            "adk_agents/<app>/agent.json with --card-url, and exit")
    serve.set_defaults(func=serve_command)


def settings_from_args(args: argparse.Namespace) -> ServiceSettings:
    from tau2_a2a.service.settings import AGENT_LIMITS, ServiceSettings, names  # the service imports tau2

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
        evaluation_start=args.evaluation_start or base.evaluation_start,
        allowed_user_llms=names(args.allowed_user_llms) or base.allowed_user_llms,
        user_llm_api_base=args.user_llm_api_base or base.user_llm_api_base,
        agent_limits=AgentLimits(**{name: getattr(base.agent_limits, name) if getattr(args, f"agent_{name}") is None
                                    else getattr(args, f"agent_{name}") for name in AGENT_LIMITS}),
        max_message_bytes=base.max_message_bytes if args.max_message_bytes is None else args.max_message_bytes,
        mcp_host=args.mcp_host or base.mcp_host,
        mcp_public_host=args.mcp_public_host or base.mcp_public_host,
        mcp_max_connections=base.mcp_max_connections if args.mcp_max_connections is None else args.mcp_max_connections,
        mcp_read_timeout=base.mcp_read_timeout if args.mcp_read_timeout is None else args.mcp_read_timeout,
    )


def serve_command(args: argparse.Namespace) -> int:
    from tau2_a2a.client.config import ConfigError
    from tau2_a2a.client.targets import TargetPolicy
    from tau2_a2a.protocol.cards import CARD_PATHS, card_json
    from tau2_a2a.protocol.hosting import serve_forever
    from tau2_a2a.service.jobs.database import redact_url
    from tau2_a2a.service.jobs.errors import EvaluationError
    from tau2_a2a.service.public_card import ADK_BINDINGS, SERVICE_NAME, service_card

    try:
        settings = settings_from_args(args)
        TargetPolicy.from_entries(settings.allowed_targets)  # a bad entry stops here, with its reason
        user_llms = settings.user_llm_policy()
    except EvaluationError as error:
        raise ConfigError(str(error)) from None
    if settings.lease_seconds <= 0 or settings.max_request_bytes < 1:
        raise ConfigError("--lease-seconds and --max-request-bytes must be positive.")
    url, grpc_url = advertised_urls(args.host, args.port, args.grpc_port, args.card_url, args.public_grpc_url)
    if args.write_card:
        card = service_card(url, settings.limits, http_bindings=ADK_BINDINGS, user_llms=user_llms)
        Path(args.write_card).write_text(json.dumps(card_json(card), indent=2) + "\n")
        print(f"Wrote the card for {url} to {args.write_card}")
        return 0
    os.umask(0o077)  # everything the service writes (database, results, logs) is its user's only
    from tau2_a2a.service.app import build_app  # ADK and a2a-sdk's server: only when serving

    app = build_app(settings, url, grpc_url=grpc_url)
    print(f"{SERVICE_NAME} at {url} (card: {url}{CARD_PATHS[0]})")
    print(f"  bindings (A2A 1.0 and 0.3): JSON-RPC and HTTP+JSON at {url}"
          + (f", gRPC at {grpc_url}" if grpc_url else ""))
    model = settings.model or "none (structured requests only)"
    if settings.model and settings.model_api_base:
        model += f" at {redact_url(settings.model_api_base)}"
    print(f"  results: {settings.results_dir.resolve()}   auth: {'bearer token' if settings.auth_token else 'off'}"
          f"   model: {model}")
    targets = TargetPolicy.from_entries(settings.allowed_targets).describe()
    print(f"  limits: {settings.limits.max_running} running, {settings.limits.max_queued} queued, "
          f"{settings.limits.max_simulations} simulations per request, max_concurrency "
          f"{settings.limits.max_concurrency}, request bodies up to {settings.max_request_bytes} bytes   "
          f"targets: {targets}")
    agent = settings.agent_limits
    print(f"  each agent: {agent.timeout:g} s per reply, {agent.max_reply_bytes} bytes per reply, "
          f"{agent.max_request_bytes} bytes per request, {agent.max_tool_calls_per_reply} tool calls per reply, "
          f"{agent.max_tool_calls} per simulation, {agent.max_mcp_requests} MCP requests and {agent.max_agent_bytes} "
          f"bytes sent per simulation; messages to this service: {settings.max_message_bytes} bytes")
    print(f"  user LLMs: {', '.join(user_llms.allowed)} (or scripted_user), at "
          f"{user_llms.api_base or 'the provider endpoint'}")
    where = f"on the Ray cluster at {settings.ray_address}" if settings.ray_address else "in each evaluation's process"
    print(f"  simulations: {where}, {settings.evaluation_nice} nice steps below the service; MCP tools at "
          f"{settings.mcp_host}" + (f", reached as {settings.mcp_public_host}" if settings.mcp_public_host else "")
          + f", {settings.mcp_max_connections} connections at most, {settings.mcp_read_timeout:g} s to send each "
            "request")
    manager = app.state.tools.manager
    print(f"  database: {redact_url(manager.database.location)}   replica: {manager.replica}"
          f"   lease: {settings.lease_seconds:g} s")
    sys.stdout.flush()
    try:
        serve_forever(app, args.host, args.port, grpc_port=args.grpc_port,
                      log_level=os.environ.get("TAU2_EVAL_LOG_LEVEL", "warning"))
    except SystemExit:  # uvicorn's exit when the lifespan did not start
        if app.state.resources.start_error is None:
            raise
    if app.state.resources.start_error is not None:  # the lifespan could not start it (lifespan.py): why, in one line
        raise app.state.resources.start_error
    return 0
