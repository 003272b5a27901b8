"""`tau2-a2a agent oracle|llm|adk`: serve a reference A2A agent (reference/)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import TYPE_CHECKING

from tau2_a2a.cli.common import OneLineParser
from tau2_a2a.cli.urls import add_card_url_flag, advertised_urls
from tau2_a2a.errors import ConfigError

if TYPE_CHECKING:
    from starlette.applications import Starlette


def add_agent_command(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    agent = commands.add_parser("agent")
    agent_kinds = agent.add_subparsers(dest="kind")
    oracle = agent_kinds.add_parser("oracle", help="Replays each task's golden actions (use with scripted_user)")
    oracle.add_argument("--host", default="127.0.0.1")
    oracle.add_argument("--port", type=int, default=9100, help="JSON-RPC, HTTP+JSON and the card")
    oracle.add_argument("--grpc-port", type=int, default=None, help="Serve gRPC too, on this port")
    add_card_url_flag(oracle)
    oracle.add_argument("--delay", type=float, default=0.0, help="Seconds to wait before each reply")
    add_tools_flag(oracle)
    oracle.set_defaults(func=oracle_command)
    llm = agent_kinds.add_parser("llm", help="The baseline LLM agent (tau2's llm_agent over A2A), any LiteLLM model")
    add_model_args(llm)
    llm.add_argument("--max-retries", type=int, default=3,
                     help="Retries of a failed or empty LLM call (default: %(default)s, as tau2 run)")
    llm.add_argument("--idle-timeout", type=float, default=3600.0,
                     help="Forget a conversation idle for this many seconds (default: %(default)s)")
    llm.add_argument("--host", default="127.0.0.1")
    llm.add_argument("--port", type=int, default=9101, help="JSON-RPC, HTTP+JSON and the card")
    llm.add_argument("--grpc-port", type=int, default=None, help="Serve gRPC too, on this port")
    add_card_url_flag(llm)
    add_tools_flag(llm)
    llm.set_defaults(func=llm_agent_command)
    adk = agent_kinds.add_parser("adk", help="A Google ADK agent run by ADK's A2A executor, any LiteLLM model")
    add_model_args(adk)
    adk.add_argument("--host", default="127.0.0.1")
    adk.add_argument("--port", type=int, default=9102, help="JSON-RPC, HTTP+JSON and the card")
    adk.add_argument("--grpc-port", type=int, default=None, help="Serve gRPC too, on this port")
    add_card_url_flag(adk)
    adk.add_argument("--mcp-url", default=None, metavar="URL",
                     help="Take the tools over MCP with ADK's McpToolset, from the run's MCP server at URL "
                          "(tau2-a2a run --a2a-mcp-port PORT serves it at http://127.0.0.1:PORT/mcp); the card then "
                          "declares the MCP tools extension. Without it the agent asks for tool calls in text")
    adk.add_argument("--mcp-fixed", action="store_true",
                     help="The MCP server is a fixed one (tau2-a2a run --a2a-mcp-fixed): send no per-conversation "
                          "token")
    adk.set_defaults(func=adk_agent_command)


def add_tools_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tools", choices=("message", "mcp"), default="message",
                        help="message: follow whatever the first message gives (tools in the messages, or an MCP "
                             "server); mcp: declare in the card that the agent takes its tools over MCP (so "
                             "--a2a-tools auto picks it), and refuse conversations that do not give them so "
                             "(default: %(default)s)")


def add_model_args(parser: argparse.ArgumentParser) -> None:
    """The flags of an agent backed by a LiteLLM model."""
    parser.add_argument("--model", required=True, help="LiteLLM model name, e.g. gpt-4.1 or openai/my-model")
    parser.add_argument("--api-base", default=None, help="Base URL of an OpenAI-compatible endpoint")
    parser.add_argument("--api-key-env", default=None,
                        help="Name of the environment variable holding the API key (default: LiteLLM's own)")
    parser.add_argument("--llm-args", type=json.loads, default={"temperature": 0.0},
                        help="JSON of extra LiteLLM arguments (default: %(default)s, as tau2's llm_agent)")


def oracle_command(args: argparse.Namespace) -> int:
    from tau2_a2a.protocol.hosting import a2a_app, serve_forever
    from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card

    url, grpc_url = _agent_urls(args)
    print(f"tau2 oracle agent at {url} (card: {url}/.well-known/agent-card.json)")
    _print_bindings(url, grpc_url)
    mcp = args.tools == "mcp"
    app = a2a_app(OracleExecutor(delay=args.delay, mcp_only=mcp), oracle_card(url, grpc_url, mcp_tools=mcp))
    serve_forever(traced(app), args.host, args.port, grpc_port=args.grpc_port)
    return 0


def traced(app: Starlette) -> Starlette:
    """`app`, continuing the trace a request carries when an OTEL_ variable turns tracing on (docs/tracing.md)."""
    from tau2_a2a.client import tracing

    return tracing.continue_traces(app) if tracing.setup() else app


def _agent_urls(args: argparse.Namespace) -> tuple[str, str | None]:
    """The HTTP URL and the gRPC host:port (None without --grpc-port) an agent's card declares."""
    return advertised_urls(args.host, args.port, args.grpc_port, args.card_url)


def _print_bindings(url: str, grpc_url: str | None) -> None:
    grpc = f", gRPC at {grpc_url}" if grpc_url else ""
    print(f"  bindings (A2A 1.0 and 0.3): JSON-RPC and HTTP+JSON at {url}{grpc}", flush=True)


def llm_agent_command(args: argparse.Namespace) -> int:
    from tau2_a2a.protocol.hosting import a2a_app, serve_forever
    from tau2_a2a.reference.llm_agent import LLMExecutor, llm_agent_card

    llm_args = {**args.llm_args, "num_retries": args.max_retries}
    if args.api_base:
        llm_args["api_base"] = args.api_base
    if args.api_key_env:
        if not os.environ.get(args.api_key_env):
            raise ConfigError(f"--api-key-env {args.api_key_env}: that environment variable is not set.")
        llm_args["api_key"] = os.environ[args.api_key_env]
    url, grpc_url = _agent_urls(args)
    print(f"tau2 baseline LLM agent ({args.model}) at {url} (card: {url}/.well-known/agent-card.json)")
    _print_bindings(url, grpc_url)
    executor = LLMExecutor(args.model, llm_args, idle_timeout=args.idle_timeout, mcp_only=args.tools == "mcp")
    serve_forever(traced(a2a_app(executor, llm_agent_card(url, args.model, grpc_url, mcp_tools=args.tools == "mcp"))),
                  args.host, args.port, grpc_port=args.grpc_port)
    return 0


def adk_agent_command(args: argparse.Namespace) -> int:
    import warnings

    from tau2_a2a.protocol.hosting import serve_forever
    from tau2_a2a.reference.adk_agent import adk_app

    llm_args = dict(args.llm_args)
    if args.api_key_env:
        if not os.environ.get(args.api_key_env):
            raise ConfigError(f"--api-key-env {args.api_key_env}: that environment variable is not set.")
        llm_args["api_key"] = os.environ[args.api_key_env]
    warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]")  # ADK marks its A2A parts experimental, at each use

    def without_traceback(record: logging.LogRecord) -> bool:
        record.exc_info, record.exc_text = None, None
        return True

    # ADK logs a failed LLM call with its traceback; the console gets one line, the client the error.
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    console.addFilter(without_traceback)
    adk_logger = logging.getLogger("google_adk")
    adk_logger.handlers[:], adk_logger.propagate = [console], False
    url, grpc_url = _agent_urls(args)
    print(f"tau2 ADK agent ({args.model}) at {url} (card: {url}/.well-known/agent-card.json)")
    _print_bindings(url, grpc_url)
    app = adk_app(args.model, url, args.api_base, llm_args, mcp_url=args.mcp_url, mcp_fixed=args.mcp_fixed,
                  grpc_url=grpc_url)
    serve_forever(traced(app), args.host, args.port, grpc_port=args.grpc_port)
    return 0
