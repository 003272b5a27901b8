"""`tau2-a2a run`: tau2's `run` flags, plus the A2A agent's, into one RunSettings, run by the runner.

Every flag of `tau2 run` works the same or is refused in one line (see
`tau2_flags`); `--agent a2a_agent` with `--a2a-endpoint URL` evaluates an A2A
agent. The flags are checked and turned into settings here, once; the run
itself is `runner.run.evaluate`.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from typing import TypeVar

from tau2_a2a.cli import imports_for_life, tau2_flags_cache
from tau2_a2a.cli.common import OneLineParser, add_transport_args, auth_token
from tau2_a2a.cli.tau2_flags import add_tau2_run_args, refuse_unsupported, settings_given
from tau2_a2a.client.config import (
    AUTH_TOKEN_ENV,
    DEFAULT_MAX_AGENT_BYTES,
    DEFAULT_MAX_MCP_REQUESTS,
    DEFAULT_MAX_REPLY_BYTES,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_TOOL_CALLS,
    DEFAULT_MAX_TOOL_CALLS_PER_REPLY,
    DEFAULT_TIMEOUT_SECONDS,
    TOOLS_MODES,
    A2AConfig,
    McpServing,
)
from tau2_a2a.client.targets import TargetPolicy
from tau2_a2a.errors import ConfigError
from tau2_a2a.runner.interrupt import RunInterrupted, stop_on_sigint
from tau2_a2a.runner.outcome import print_outcome
from tau2_a2a.runner.parent import exit_with_parent
from tau2_a2a.runner.settings import A2A_AGENT, RunSettings
from tau2_a2a.tau2bench.seam.defaults import DEFAULT_AGENT_IMPLEMENTATION

T = TypeVar("T")

# Largest values the counting flags take: beyond them no run is meant, and some overflow tau2's arithmetic.
MAX_COUNT = 1_000_000
SEED_RANGE = (-(2**63), 2**63 - 1)
RUN_EPILOG = ("Exit codes: 0 no simulation ended with an A2A error; 3 some did (they score 0); 2 the run could not "
              "start or the agent refused the token (finished simulations are kept; re-run to resume); 1 the run "
              "is incomplete: tau2 could not score some simulations (re-run to retry them), or a simulation's Ray "
              "worker died three times (with --ray); 130 stopped by Ctrl-C, 143 by SIGTERM (finished "
              "simulations and their metrics are kept; the last line gives the command that resumes). A resume "
              "continues only a run with the same settings.")


def add_run_command(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    run = commands.add_parser("run", epilog=RUN_EPILOG)
    run.add_argument("domain_positional", nargs="?", metavar="DOMAIN", help="The domain (same as --domain)")
    add_tau2_run_args(run)
    add_a2a_args(run)
    # Without --agent-llm an A2A agent is named after its card, and tau2's agents get tau2's default LLM.
    # Without --agent: the A2A agent when an --a2a-* flag is given, else tau2's default (see resolve_agent).
    run.set_defaults(func=run_command, agent_llm=None, agent=None)


def run_command(args: argparse.Namespace) -> int:
    exit_with_parent()
    settings = settings_from_args(args)
    with imports_for_life():  # tau2 and LiteLLM: imported when a run starts, not for --help or a bad flag
        from tau2_a2a.runner.run import evaluate
    with stop_on_sigint():
        return print_outcome(evaluate(settings))


def settings_from_args(args: argparse.Namespace) -> RunSettings:
    """The run the flags describe: each of tau2's flags is the RunSettings field of its name, as `tau2 run`
    maps it, or refused (see `tau2_flags`); the A2A agent's come from the --a2a-* flags. A value no run can
    use is refused in one line (ConfigError)."""
    check_run_args(args)
    refuse_unsupported(args)
    a2a = a2a_config_from_args(args) if args.agent == A2A_AGENT else None
    return RunSettings(**settings_given(args), a2a=a2a)


def a2a_config_from_args(args: argparse.Namespace) -> A2AConfig:
    if not args.a2a_endpoint:
        raise ConfigError("--agent a2a_agent needs --a2a-endpoint URL (the agent's base URL).")
    if args.ray and args.a2a_auth_token:
        raise ConfigError(f"With --ray, pass the agent's token in ${AUTH_TOKEN_ENV}, not --a2a-auth-token: Ray "
                          "keeps the driver's command line in its job table.")
    return A2AConfig(
        endpoint=args.a2a_endpoint,
        auth_token=auth_token(args.a2a_auth_token),
        timeout=_or(args.a2a_timeout, DEFAULT_TIMEOUT_SECONDS),
        debug=args.a2a_debug,
        transport=_or(args.a2a_transport, "auto"),
        streaming=args.a2a_streaming,
        max_reply_bytes=_or(args.a2a_max_reply_bytes, DEFAULT_MAX_REPLY_BYTES),
        max_tool_calls_per_reply=_or(args.a2a_max_tool_calls_per_reply, DEFAULT_MAX_TOOL_CALLS_PER_REPLY),
        max_tool_calls=_or(args.a2a_max_tool_calls, DEFAULT_MAX_TOOL_CALLS),
        max_request_bytes=_or(args.a2a_max_request_bytes, DEFAULT_MAX_REQUEST_BYTES),
        max_mcp_requests=_or(args.a2a_max_mcp_requests, DEFAULT_MAX_MCP_REQUESTS),
        max_agent_bytes=_or(args.a2a_max_agent_bytes, DEFAULT_MAX_AGENT_BYTES),
        targets=None if args.a2a_allowed_targets is None else TargetPolicy.parse(args.a2a_allowed_targets),
        tools=args.a2a_tools or ("mcp" if args.a2a_driven else "message"),
        driven=args.a2a_driven,
        mcp=McpServing(host=_or(args.a2a_mcp_host, McpServing.host), port=_or(args.a2a_mcp_port, McpServing.port),
                       public_url=args.a2a_mcp_public_url, fixed=args.a2a_mcp_fixed,
                       max_connections=_or(args.a2a_mcp_max_connections, McpServing.max_connections),
                       read_timeout=_or(args.a2a_mcp_read_timeout, McpServing.read_timeout),
                       token_env=args.a2a_mcp_token_env),
        price_model=args.a2a_price_model,
    )


def _or(value: T | None, default: T) -> T:
    """A flag's value, or its default when it was not given (the A2A flags default to None: see resolve_agent)."""
    return default if value is None else value


def add_a2a_args(parser: argparse.ArgumentParser) -> None:
    """The A2A agent's flags. Each defaults to None (or False), so that giving any of them says the run is of the
    A2A agent (see resolve_agent); a2a_config_from_args fills in the defaults the help shows."""
    group = parser.add_argument_group("A2A agent under test (--agent a2a_agent, implied by any --a2a-* flag)")
    group.add_argument("--a2a-endpoint", default=None, help="Base URL of the A2A agent; its card is fetched from "
                                                            "URL/.well-known/agent-card.json")
    group.add_argument("--a2a-auth-token", default=None,
                       help=f"Bearer token for the agent (default: ${AUTH_TOKEN_ENV})")
    group.add_argument("--a2a-timeout", type=float, default=None,
                       help=f"Seconds one reply may take, all of it: a reply still coming then is cut off "
                            f"(default: {DEFAULT_TIMEOUT_SECONDS:g})")
    group.add_argument("--a2a-debug", action="store_true", help="Log every A2A request and reply in full")
    add_tools_args(group)
    group.add_argument("--a2a-allowed-targets", default=None, metavar="LIST",
                       help="Comma-separated hosts, *.domains, IPs, CIDR networks and the keywords public, private, "
                            "loopback the run may connect to: the endpoint, the card's interfaces, and what DNS "
                            "answers when connecting (default: any but link-local and cloud metadata addresses, "
                            "which are always refused)")
    group.add_argument("--a2a-max-reply-bytes", type=int, default=None, metavar="BYTES",
                       help="Largest reply read from the agent (a whole event stream counts as one reply); a "
                            "larger one ends its simulation as a malformed reply. A tau2 turn is kilobytes, and "
                            "each reply is held several times over in memory, so one hostile agent's reply must "
                            f"not be unbounded (default: {DEFAULT_MAX_REPLY_BYTES}, 8 MiB)")
    group.add_argument("--a2a-max-tool-calls-per-reply", type=int, default=None, metavar="N",
                       help="Most tool calls the agent may ask for in one reply; more end its simulation (default: "
                            f"{DEFAULT_MAX_TOOL_CALLS_PER_REPLY})")
    group.add_argument("--a2a-max-tool-calls", type=int, default=None, metavar="N",
                       help="Most tool calls the agent may ask for in one simulation; more end it (default: "
                            f"{DEFAULT_MAX_TOOL_CALLS})")
    group.add_argument("--a2a-max-request-bytes", type=int, default=None, metavar="BYTES",
                       help="Largest request sent to the agent (the policy and tools open a simulation; tool "
                            "results make up the rest); a larger one is not sent and ends its simulation (default: "
                            f"{DEFAULT_MAX_REQUEST_BYTES}, 16 MiB)")
    group.add_argument("--a2a-max-mcp-requests", type=int, default=None, metavar="N",
                       help="Most MCP requests of every kind (initialize, tools/list, tools/call...) the agent may "
                            f"send in one simulation; more end it (default: {DEFAULT_MAX_MCP_REQUESTS})")
    group.add_argument("--a2a-max-agent-bytes", type=int, default=None, metavar="BYTES",
                       help="Most bytes the agent may send in one simulation: its A2A replies and its MCP requests, "
                            "tool arguments and messages included (the trajectory keeps them); more end it "
                            f"(default: {DEFAULT_MAX_AGENT_BYTES}, 4 MiB)")
    add_transport_args(group, default=None)
    group.add_argument("--a2a-price-model", default=None, metavar="MODEL",
                       help="The LiteLLM model whose price applies when the agent reports tokens but no cost and "
                            "no model LiteLLM prices (e.g. gpt-4.1-2025-04-14); without it such turns cost "
                            "'not reported'. Priced from LiteLLM's local cost map")
    group.add_argument("--ray", default=None, metavar="ADDRESS",
                       help="Run the simulations on Ray actors, scored there, spread over the cluster's nodes "
                            "(without it, the run is threads in this process): local (a Ray instance for this run, "
                            "to use every core of this machine), auto (the cluster this machine joined with "
                            "`ray start`), ray://HOST:PORT (Ray Client) or HOST:PORT (the head's GCS). This process "
                            "keeps the results file. Needs the ray extra: pip install 'tau2-a2a[ray]'")


def add_tools_args(group: argparse._ActionsContainer) -> None:
    """How the agent under test gets the domain's tools: in the messages, or over MCP (docs/protocol.md)."""
    group.add_argument("--a2a-tools", choices=TOOLS_MODES, default=None,
                       help="How the agent gets the domain's tools: message (in the A2A messages, answered with tool "
                            "calls; the default), mcp (an MCP server per simulation, which the agent calls with its "
                            "own MCP client while tau2's message waits; its reply is its message to the user), auto "
                            "(mcp when the card declares the MCP tools extension). In the MCP modes --a2a-timeout "
                            "bounds the wait for each action of the agent (a tool call, a message, its reply), not "
                            "the request")
    group.add_argument("--a2a-driven", action="store_true",
                       help="The agent drives: the whole simulation is one A2A task, the tools and the user "
                            "(send_message_to_user) are MCP tools; implies --a2a-tools mcp")
    group.add_argument("--a2a-mcp-host", default=None, metavar="HOST",
                       help=f"Address the MCP tools server listens on (default: {McpServing.host}; 0.0.0.0 for "
                            "agents on other machines or containers)")
    group.add_argument("--a2a-mcp-port", type=int, default=None, metavar="PORT",
                       help="Port of the MCP tools server (default: a free one)")
    group.add_argument("--a2a-mcp-public-url", default=None, metavar="URL",
                       help="The MCP server's URL as the agent reaches it, told to it in the first message "
                            "(default: http://HOST:PORT/mcp)")
    group.add_argument("--a2a-mcp-fixed", action="store_true",
                       help="Serve the tools at one fixed URL with no per-simulation token, for agents whose MCP "
                            "servers are configured beforehand; runs one simulation at a time (--max-concurrency 1) "
                            "and needs --a2a-mcp-port")
    group.add_argument("--a2a-mcp-token-env", default=None, metavar="NAME",
                       help="With --a2a-mcp-fixed: the environment variable holding a bearer token the agent's MCP "
                            "client is configured to send; the server then requires it. Needed off loopback")
    group.add_argument("--a2a-mcp-max-connections", type=int, default=None, metavar="N",
                       help="Connections the MCP tools server holds open at most (and at most an eighth of the "
                            "process's file descriptors); past it the oldest idle one is closed, or the new one "
                            f"(default: {McpServing.max_connections})")
    group.add_argument("--a2a-mcp-read-timeout", type=float, default=None, metavar="SECONDS",
                       help="Seconds a connection to the MCP tools server has to send each request whole, headers "
                            f"and body, from its opening or its last response (default: {McpServing.read_timeout:g})")


def resolve_domain(args: argparse.Namespace) -> None:
    """The domain may come positionally or as --domain, not as two different ones, and tau2 must know it."""
    if args.domain_positional and args.domain and args.domain_positional != args.domain:
        raise ConfigError(f"Two domains given: {args.domain_positional!r} and --domain {args.domain!r}.")
    args.domain = args.domain or args.domain_positional
    if not args.domain:
        raise ConfigError(f"Name a domain: tau2-a2a {args.command} airline (or --domain airline).")
    known = tau2_flags_cache.domains()
    if known is None:
        from tau2_a2a.tau2bench.run.runs import domains

        known = domains()
    if args.domain not in known:
        raise ConfigError(f"Unknown domain {args.domain!r}: tau2 knows {', '.join(known)}.")


def a2a_flags_given(args: argparse.Namespace) -> list[str]:
    """The --a2a-* flags given on the command line (each defaults to None or False)."""
    return [f"--{name.replace('_', '-')}" for name, value in vars(args).items()
            if name.startswith("a2a_") and value not in (None, False)]


def resolve_agent(args: argparse.Namespace) -> None:
    """Which agent runs: --agent's; without it the A2A agent when an --a2a-* flag is given (they describe it),
    else tau2's default. An --a2a-* flag beside another --agent is refused: it would be ignored, and the run
    would score an agent other than the one it names."""
    given = a2a_flags_given(args)
    if args.agent is None:
        args.agent = A2A_AGENT if given else DEFAULT_AGENT_IMPLEMENTATION
    elif given and args.agent != A2A_AGENT:
        raise ConfigError(f"{given[0]} is for --agent {A2A_AGENT}, but --agent {args.agent} was given: drop "
                          f"--agent {args.agent} to evaluate the A2A agent, or drop the --a2a-* flags.")


def check_run_args(args: argparse.Namespace) -> None:
    """Refuse, with one line each, the values of `tau2-a2a run`'s flags no run can use, before anything starts."""
    resolve_agent(args)
    resolve_domain(args)
    _check_count("--num-tasks", args.num_tasks, optional=True)
    _check_count("--num-trials", args.num_trials)
    _check_count("--max-steps", args.max_steps)
    _check_count("--max-errors", args.max_errors)
    _check_count("--max-concurrency", args.max_concurrency)
    if not 0 <= args.max_retries <= MAX_COUNT:
        raise ConfigError(f"--max-retries must be between 0 and {MAX_COUNT}, got {args.max_retries}.")
    if not SEED_RANGE[0] <= args.seed <= SEED_RANGE[1]:
        raise ConfigError(f"--seed must be a 64-bit integer, got {args.seed}.")


def _check_count(flag: str, value: int | None, optional: bool = False) -> None:
    if value is None and optional:
        return
    if value is None or not 1 <= value <= MAX_COUNT:
        raise ConfigError(f"{flag} must be between 1 and {MAX_COUNT}, got {value}.")


def resume_command(argv: list[str], interrupted: RunInterrupted) -> str:
    """The command line that resumes a stopped run: the same flags, the run's --save-to, no secret.

    The token becomes `<token>`, and in `--agent-llm-args` / `--user-llm-args` every value whose
    key names a credential (api_key, extra_headers, ...) becomes `<secret>`.
    """
    from tau2_a2a.tau2bench.run.layout import run_name

    words = list(argv)
    for index, word in enumerate(words):
        flag, equals, value = word.partition("=")
        if flag == "--a2a-auth-token":
            if equals:
                words[index] = "--a2a-auth-token=<token>"
            elif index + 1 < len(words):
                words[index + 1] = "<token>"
        elif flag.endswith("-llm-args"):
            if equals:
                words[index] = f"{flag}={_without_secrets(value)}"
            elif index + 1 < len(words):
                words[index + 1] = _without_secrets(words[index + 1])
    if not any(word == "--save-to" or word.startswith("--save-to=") for word in words):
        words += ["--save-to", run_name(interrupted.results_path)]
    return shlex.join(["tau2-a2a", *words])


_CREDENTIAL_KEY = re.compile(r"(key|token|secret|password|authorization|credential|headers)", re.IGNORECASE)


def _without_secrets(llm_args: str) -> str:
    """LLM args given as JSON, each credential's value replaced by `<secret>` (other text as it is)."""
    try:
        parsed = json.loads(llm_args)
    except ValueError:
        return llm_args
    if not isinstance(parsed, dict):
        return llm_args
    return json.dumps({key: "<secret>" if _CREDENTIAL_KEY.search(key) else value for key, value in parsed.items()})


