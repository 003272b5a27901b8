"""tau2-a2a: run | card | agent | demo | ab | serve.

Exit codes of `tau2-a2a run`: 0 every simulation ran without an A2A error;
3 some simulations ended with A2A errors (they score 0; the last line says how
many and why); 2 the run could not start or was stopped (bad flag, agent
unreachable, card invalid, token refused, before or during the run; finished
simulations are kept); 1 a worker process failed (with --ray: a simulation's Ray worker
died three times); 130 stopped by Ctrl-C (finished simulations are kept; the
last line says how to resume).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shlex
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


import tau2_a2a  # noqa: E402,F401  (registers our agents and user with tau2)
from tau2.cli import add_run_args  # noqa: E402
from tau2.run import get_options  # noqa: E402
from tau2.data_model.simulation import RunConfig  # noqa: E402
from tau2.config import DEFAULT_LLM_AGENT  # noqa: E402

from tau2_a2a.client.agent import AGENT_NAME  # noqa: E402
from tau2_a2a.client.errors import A2AFailure  # noqa: E402
from tau2_a2a.client.metrics import a2a_error_line, format_summary  # noqa: E402
from tau2_a2a.runner.processes import processes_phrase  # noqa: E402
from tau2_a2a.runner.resume import planned_task_ids  # noqa: E402
from tau2_a2a.runner.interrupt import RunInterrupted, exit_now, stop_on_sigint  # noqa: E402
from tau2_a2a.runner.run import (agent_model_name, check_results_dir, discover, evaluate,  # noqa: E402
                                 results_path_for)
from tau2_a2a.runner.scoring import default_scoring_processes  # noqa: E402
from tau2_a2a.runner.shards import ShardFailed, default_workers, evaluate_in_processes  # noqa: E402
from tau2_a2a.client.targets import TargetPolicy  # noqa: E402
from tau2_a2a.config import (AUTH_TOKEN_ENV, DEFAULT_MAX_REPLY_BYTES, DEFAULT_TIMEOUT_SECONDS, TRANSPORTS,  # noqa: E402
                             A2AConfig, ConfigError, check_timeout)
from tau2_a2a.runner.ray_engine import SimulationLost  # noqa: E402

EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_A2A_ERRORS = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a command stopped by Ctrl-C

# Largest values the counting flags take: beyond them no run is meant, and some overflow tau2's arithmetic.
MAX_COUNT = 1_000_000
SEED_RANGE = (-(2**63), 2**63 - 1)
MAX_PROCESSES = 256  # --a2a-workers, --a2a-scoring-processes: each one a process of this machine


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad flag gets one line (what is wrong, where to look) instead of the usage text."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"error: {message} (see {self.prog} --help)\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    with _command_logging(getattr(args, "a2a_debug", False)):
        try:
            return int(args.func(args) or 0)
        except (A2AFailure, ConfigError) as error:
            print(f"error: {error}", file=sys.stderr)
            return EXIT_USAGE
        except (ShardFailed, SimulationLost) as error:
            print(f"error: {error}", file=sys.stderr)
            return EXIT_FAILED
        except RunInterrupted as interrupted:
            # Simulations abandoned in their threads would hold up a normal exit until they end.
            exit_now(EXIT_INTERRUPTED, f"{interrupted}; to resume, run: {resume_command(argv, interrupted)}")
        except KeyboardInterrupt:
            exit_now(EXIT_INTERRUPTED, "Stopped by Ctrl-C.")
    return EXIT_USAGE  # not reached


def resume_command(argv: list[str], interrupted: RunInterrupted) -> str:
    """The command line that resumes a stopped run: the same flags, the run's --save-to, no secret.

    The token becomes `<token>`, and in `--agent-llm-args` / `--user-llm-args` every value whose
    key names a credential (api_key, extra_headers, ...) becomes `<secret>`.
    """
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
        words += ["--save-to", interrupted.results_path.stem]
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


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="tau2-a2a", description=__doc__)
    commands = parser.add_subparsers(dest="command")

    run = commands.add_parser("run", help="Run tau2-bench; with --agent a2a_agent, against an A2A agent",
                              epilog="Exit codes: 0 no simulation ended with an A2A error; 3 some did (they score 0); "
                                     "2 the run could not start or the agent refused the token (finished simulations "
                                     "are kept; re-run to resume); 1 a worker process failed (with --ray: a "
                                     "simulation's Ray worker died three times); 130 stopped by Ctrl-C (finished "
                                     "simulations and their metrics are kept; the last line gives the command "
                                     "that resumes). A resume continues only a run with the same settings.")
    run.add_argument("domain_positional", nargs="?", metavar="DOMAIN", help="The domain (same as --domain)")
    add_run_args(run)
    add_a2a_args(run)
    run.set_defaults(func=run_command)

    card = commands.add_parser("card", help="Fetch, validate and show an agent card")
    card.add_argument("url", help="The agent's base URL")
    card.add_argument("--a2a-auth-token", default=None, help=f"Bearer token (or ${AUTH_TOKEN_ENV})")
    card.add_argument("--a2a-timeout", type=float, default=30.0, help="Seconds to wait for the card")
    add_transport_args(card)
    card.set_defaults(func=card_command)

    agent = commands.add_parser("agent", help="Serve a reference A2A agent")
    agent_kinds = agent.add_subparsers(dest="kind")
    oracle = agent_kinds.add_parser("oracle", help="Replays each task's golden actions (use with scripted_user)")
    oracle.add_argument("--host", default="127.0.0.1")
    oracle.add_argument("--port", type=int, default=9100, help="JSON-RPC, HTTP+JSON and the card")
    oracle.add_argument("--grpc-port", type=int, default=None, help="Serve gRPC too, on this port")
    oracle.add_argument("--delay", type=float, default=0.0, help="Seconds to wait before each reply")
    oracle.set_defaults(func=oracle_command)
    llm = agent_kinds.add_parser("llm", help="The baseline LLM agent (tau2's llm_agent over A2A), any LiteLLM model")
    llm.add_argument("--model", required=True, help="LiteLLM model name, e.g. gpt-4.1 or openai/my-model")
    llm.add_argument("--api-base", default=None, help="Base URL of an OpenAI-compatible endpoint")
    llm.add_argument("--api-key-env", default=None,
                     help="Name of the environment variable holding the API key (default: LiteLLM's own)")
    llm.add_argument("--llm-args", type=json.loads, default={"temperature": 0.0},
                     help="JSON of extra LiteLLM arguments (default: %(default)s, as tau2's llm_agent)")
    llm.add_argument("--max-retries", type=int, default=3,
                     help="Retries of a failed or empty LLM call (default: %(default)s, as tau2 run)")
    llm.add_argument("--idle-timeout", type=float, default=3600.0,
                     help="Forget a conversation idle for this many seconds (default: %(default)s)")
    llm.add_argument("--host", default="127.0.0.1")
    llm.add_argument("--port", type=int, default=9101, help="JSON-RPC, HTTP+JSON and the card")
    llm.add_argument("--grpc-port", type=int, default=None, help="Serve gRPC too, on this port")
    llm.set_defaults(func=llm_agent_command)
    adk = agent_kinds.add_parser("adk", help="A Google ADK agent served by ADK's to_a2a, any LiteLLM model")
    adk.add_argument("--model", required=True, help="LiteLLM model name, e.g. gpt-4.1 or openai/my-model")
    adk.add_argument("--api-base", default=None, help="Base URL of an OpenAI-compatible endpoint")
    adk.add_argument("--api-key-env", default=None,
                     help="Name of the environment variable holding the API key (default: LiteLLM's own)")
    adk.add_argument("--llm-args", type=json.loads, default={"temperature": 0.0},
                     help="JSON of extra LiteLLM arguments (default: %(default)s, as tau2's llm_agent)")
    adk.add_argument("--host", default="127.0.0.1")
    adk.add_argument("--port", type=int, default=9102)
    adk.set_defaults(func=adk_agent_command)

    demo = commands.add_parser("demo", help="Offline: evaluate the bundled oracle over A2A on a few tasks")
    demo.add_argument("--domain", default="airline")
    demo.add_argument("--num-tasks", type=int, default=5)
    demo.add_argument("--max-concurrency", type=int, default=4)
    demo.add_argument("--results-dir", default="results")
    demo.set_defaults(func=demo_command)

    ab = commands.add_parser("ab", help="Protocol A/B: tau2's llm_agent vs the same model over A2A, side by side")
    ab.add_argument("domain_positional", nargs="?", metavar="DOMAIN", help="The domain (same as --domain)")
    ab.add_argument("--model", required=True, help="LiteLLM model for both arms (sets --agent-llm)")
    ab.add_argument("--api-base", default=None, help="Base URL of an OpenAI-compatible endpoint, for both arms")
    add_run_args(ab)
    ab.set_defaults(func=ab_command)

    report = commands.add_parser("report", help="Scores with 95% intervals, comparisons and every trajectory: "
                                 "one offline HTML page, its figures as JSON, a summary")
    report.add_argument("results", nargs="+", metavar="RESULTS",
                        help="tau2 results files or folders of them (one per domain); LABEL=PATH names a run. "
                             "Several runs are compared with the first, on the same domains and tasks")
    report.add_argument("--out", type=Path, default=Path("report.html"), help="the HTML page (default: %(default)s)")
    report.add_argument("--json", type=Path, default=None, help="the figures as JSON (default: beside --out, .json)")
    report.add_argument("--seed", type=int, default=0, help="bootstrap and permutation seed (default: %(default)s)")
    report.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default: %(default)s)")
    report.set_defaults(func=report_command)

    from tau2_a2a.cli.serve import add_serve_command

    add_serve_command(commands)
    from tau2_a2a.runner.merge import add_merge_command

    add_merge_command(commands)

    return parser


def add_a2a_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("A2A agent under test (with --agent a2a_agent)")
    group.add_argument("--a2a-endpoint", default=None, help="Base URL of the A2A agent")
    group.add_argument("--a2a-auth-token", default=None,
                       help=f"Bearer token for the agent (default: ${AUTH_TOKEN_ENV})")
    group.add_argument("--a2a-timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS,
                       help="Seconds to wait for one reply (default: %(default)s)")
    group.add_argument("--a2a-debug", action="store_true", help="Log every A2A request and reply in full")
    group.add_argument("--a2a-allowed-targets", default=None, metavar="LIST",
                       help="Comma-separated hosts, *.domains, IPs, CIDR networks and the keywords public, private, "
                            "loopback the run may connect to: the endpoint, the card's interfaces, and what DNS "
                            "answers when connecting (default: any but link-local and cloud metadata addresses, "
                            "which are always refused)")
    group.add_argument("--a2a-max-reply-bytes", type=int, default=DEFAULT_MAX_REPLY_BYTES, metavar="BYTES",
                       help="Largest reply read from the agent (a whole event stream counts as one reply); a "
                            "larger one ends its simulation as a malformed reply. A tau2 turn is kilobytes, and "
                            "each reply is held several times over in memory, so one hostile agent's reply must "
                            "not be unbounded (default: %(default)s, 8 MiB)")
    add_transport_args(group)
    group.add_argument("--a2a-workers", type=int, default=None, metavar="N",
                       help="Processes to spread the simulations over, each with its share of "
                            "--max-concurrency and of the scoring processes. A resume keeps the split the run "
                            "started with. Default: one per 16 simulations at once, at most one per usable "
                            "core, for runs of 20 simulations or more; otherwise 1")
    group.add_argument("--a2a-scoring-processes", type=int, default=None, metavar="N",
                       help="Processes that score finished simulations with tau2's evaluator, so scoring "
                            "does not hold up the simulations (0: score in the main process). "
                            "Default: one per usable core, up to --max-concurrency, for runs of 20 simulations or more")
    group.add_argument("--ray", default=None, metavar="ADDRESS",
                       help="Run the simulations on Ray actors, scored there, spread over the cluster's nodes: "
                            "local (a Ray instance for this run), auto (the cluster this machine joined with "
                            "`ray start`), ray://HOST:PORT (Ray Client) or HOST:PORT (the head's GCS). This process "
                            "keeps the results file. Needs the ray extra: pip install 'tau2-a2a[ray]'")


def add_transport_args(parser: Any) -> None:
    parser.add_argument("--a2a-transport", choices=TRANSPORTS, default="auto",
                        help="A2A binding to use: auto takes the card's first interface tau2-a2a speaks "
                             "(default: %(default)s)")
    parser.add_argument("--a2a-streaming", action="store_true",
                        help="Send SendStreamingMessage when the card says the agent streams (blocking otherwise)")


def run_config_from_args(args: argparse.Namespace) -> RunConfig:
    """The RunConfig `tau2 run` builds from the same flags (tau2.cli.main's mapping)."""
    return RunConfig(
        domain=args.domain,
        task_set_name=args.task_set_name,
        task_split_name=args.task_split_name,
        task_ids=args.task_ids,
        num_tasks=args.num_tasks,
        agent=args.agent,
        llm_agent=args.agent_llm,
        llm_args_agent=args.agent_llm_args,
        user=args.user,
        llm_user=args.user_llm,
        llm_args_user=args.user_llm_args,
        agent_api_key=args.agent_api_key,
        user_api_key=args.user_api_key,
        num_trials=args.num_trials,
        max_steps=args.max_steps,
        max_errors=args.max_errors,
        save_to=args.save_to,
        results_dir=args.results_dir,
        max_concurrency=args.max_concurrency,
        max_retries=args.max_retries,
        seed=args.seed,
        log_level=args.log_level,
        enforce_communication_protocol=args.enforce_communication_protocol,
        skip_failed_samples=args.skip_failed_samples,
        llm_judge=args.judge_llm,
        judge_api_key=args.judge_api_key,
        llm_args_judge=args.judge_llm_args,
        judge_window_size=args.judge_window_size,
        judge_system_prompt=args.judge_system_prompt,
    )


def resolve_domain(args: argparse.Namespace) -> None:
    """The domain may come positionally or as --domain, not as two different ones, and tau2 must know it."""
    if args.domain_positional and args.domain and args.domain_positional != args.domain:
        raise ConfigError(f"Two domains given: {args.domain_positional!r} and --domain {args.domain!r}.")
    args.domain = args.domain or args.domain_positional
    if not args.domain:
        raise ConfigError(f"Name a domain: tau2-a2a {args.command} airline (or --domain airline).")
    domains = get_options().domains
    if args.domain not in domains:
        raise ConfigError(f"Unknown domain {args.domain!r}: tau2 knows {', '.join(domains)}.")


def check_run_args(args: argparse.Namespace) -> None:
    """Refuse, with one line each, the values of `tau2-a2a run`'s flags no run can use, before anything starts."""
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
    check_timeout(args.a2a_timeout, "--a2a-timeout")
    if args.a2a_workers is not None and not 1 <= args.a2a_workers <= MAX_PROCESSES:
        raise ConfigError(f"--a2a-workers must be between 1 and {MAX_PROCESSES}, got {args.a2a_workers}.")
    if args.a2a_scoring_processes is not None and not 0 <= args.a2a_scoring_processes <= MAX_PROCESSES:
        raise ConfigError(f"--a2a-scoring-processes must be between 0 and {MAX_PROCESSES}, "
                          f"got {args.a2a_scoring_processes}.")


def _check_count(flag: str, value: int | None, optional: bool = False) -> None:
    if value is None and optional:
        return
    if value is None or not 1 <= value <= MAX_COUNT:
        raise ConfigError(f"{flag} must be between 1 and {MAX_COUNT}, got {value}.")


def parse_run_args(argv: list[str]) -> argparse.Namespace:
    """`tau2-a2a run ARGV` parsed and checked, nothing run: argparse exits 2 on a malformed flag,
    a value no run can use raises ConfigError."""
    args = build_parser().parse_args(["run", *argv])
    check_run_args(args)
    return args


def run_command(args: argparse.Namespace) -> int:
    from tau2_a2a.runner.parent import exit_with_parent

    exit_with_parent()
    check_run_args(args)
    config = run_config_from_args(args)
    planned_task_ids(config)  # tasks that do not exist: said now, not after the agent's check
    check_results_dir(config)
    with stop_on_sigint():
        return _run(args, config)


def _run(args: argparse.Namespace, config: RunConfig) -> int:
    """The run itself, native or A2A; Ctrl-C meanwhile ends it with what finished kept."""
    if args.agent != AGENT_NAME:
        if args.ray:
            raise ConfigError("--ray runs the simulations of an A2A evaluation: pass --agent a2a_agent.")
        evaluate(config)
        return 0
    a2a = a2a_config_from_args(args)
    card = discover(a2a)
    print(f"A2A agent: {card.name} at {a2a.endpoint} ({describe_binding(a2a)})")
    if config.llm_agent == DEFAULT_LLM_AGENT:
        config.llm_agent = agent_model_name(card.name)
    if args.ray:
        from tau2_a2a.runner.ray_engine import evaluate_on_ray

        outcome = evaluate_on_ray(config, a2a, args.ray)
    else:
        outcome = _evaluate_here(config, a2a, args)
    return report_outcome(outcome)


def report_outcome(outcome: Any) -> int:
    """The protocol summary and where the files are; the last line and exit code say if A2A errors ended simulations."""
    print(format_summary(outcome.report))
    print(f"Results: {outcome.results_path}\nProtocol metrics: {outcome.metrics_path}", flush=True)
    failed = a2a_error_line(outcome.report, outcome.metrics_path)
    if failed:
        print(failed, file=sys.stderr)
        return EXIT_A2A_ERRORS
    return 0


def _evaluate_here(config: RunConfig, a2a: A2AConfig, args: argparse.Namespace) -> Any:
    """On this machine: in this process, or over worker processes (--a2a-workers)."""
    workers = args.a2a_workers or default_workers(config, results_path_for(config))
    scoring = args.a2a_scoring_processes
    if scoring is None:
        scoring = default_scoring_processes(config)
    if workers > 1:
        return evaluate_in_processes(config, a2a, workers, scoring)
    print(f"Scoring: in {processes_phrase(scoring)} of its own" if scoring else "Scoring: in this process")
    return evaluate(config, a2a, scoring)


def describe_binding(a2a: A2AConfig) -> str:
    """'A2A 1.0 over JSON-RPC, streaming': what the session settled on from the card."""
    from tau2_a2a.client.bindings import READABLE
    from tau2_a2a.client.session import sessions

    session = sessions.get(a2a)
    return (f"A2A {session.protocol_version} over {READABLE[session.binding]}"
            + (", streaming" if session.streaming else ""))


def a2a_config_from_args(args: argparse.Namespace) -> A2AConfig:
    if not args.a2a_endpoint:
        raise ConfigError("--agent a2a_agent needs --a2a-endpoint URL (the agent's base URL).")
    if args.ray and (args.a2a_workers is not None or args.a2a_scoring_processes is not None):
        raise ConfigError("--ray spreads the simulations over the cluster's actors and scores them there; "
                          "drop --a2a-workers and --a2a-scoring-processes.")
    if args.ray and args.a2a_auth_token:
        raise ConfigError(f"With --ray, pass the agent's token in ${AUTH_TOKEN_ENV}, not --a2a-auth-token: Ray "
                          "keeps the driver's command line in its job table.")
    return A2AConfig(
        endpoint=args.a2a_endpoint,
        auth_token=args.a2a_auth_token or os.environ.get(AUTH_TOKEN_ENV) or None,
        timeout=args.a2a_timeout,
        debug=args.a2a_debug,
        transport=args.a2a_transport,
        streaming=args.a2a_streaming,
        max_reply_bytes=args.a2a_max_reply_bytes,
        targets=None if args.a2a_allowed_targets is None else TargetPolicy.parse(args.a2a_allowed_targets),
    )


def card_command(args: argparse.Namespace) -> int:
    from tau2_a2a.client.card import describe_card

    a2a = A2AConfig(endpoint=args.url, timeout=args.a2a_timeout, transport=args.a2a_transport,
                    streaming=args.a2a_streaming,
                    auth_token=args.a2a_auth_token or os.environ.get(AUTH_TOKEN_ENV) or None)
    print(describe_card(discover(a2a), a2a.endpoint, a2a.transport, a2a.streaming))
    return 0


def oracle_command(args: argparse.Namespace) -> int:
    from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
    from tau2_a2a.serving import a2a_app, serve_forever

    url, grpc_url = _agent_urls(args)
    print(f"tau2 oracle agent at {url} (card: {url}/.well-known/agent-card.json)")
    _print_bindings(url, grpc_url)
    serve_forever(a2a_app(OracleExecutor(delay=args.delay), oracle_card(url, grpc_url)),
                  args.host, args.port, grpc_port=args.grpc_port)
    return 0


def _agent_urls(args: argparse.Namespace) -> tuple[str, str | None]:
    """The HTTP URL and the gRPC host:port (None without --grpc-port) an agent's card declares."""
    return f"http://{args.host}:{args.port}", f"{args.host}:{args.grpc_port}" if args.grpc_port else None


def _print_bindings(url: str, grpc_url: str | None) -> None:
    grpc = f", gRPC at {grpc_url}" if grpc_url else ""
    print(f"  bindings (A2A 1.0 and 0.3): JSON-RPC and HTTP+JSON at {url}{grpc}", flush=True)


def llm_agent_command(args: argparse.Namespace) -> int:
    from tau2_a2a.reference.llm_agent import LLMExecutor, llm_agent_card
    from tau2_a2a.serving import a2a_app, serve_forever

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
    executor = LLMExecutor(args.model, llm_args, idle_timeout=args.idle_timeout)
    serve_forever(a2a_app(executor, llm_agent_card(url, args.model, grpc_url)),
                  args.host, args.port, grpc_port=args.grpc_port)
    return 0


def adk_agent_command(args: argparse.Namespace) -> int:
    import warnings

    import uvicorn

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
    url = f"http://{args.host}:{args.port}"
    print(f"tau2 ADK agent ({args.model}) at {url} (card: {url}/.well-known/agent-card.json)", flush=True)
    uvicorn.run(adk_app(args.model, url, args.api_base, llm_args), host=args.host, port=args.port, log_level="warning")
    return 0


def demo_command(args: argparse.Namespace) -> int:
    from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
    from tau2_a2a.serving import BackgroundServer, a2a_app, free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with BackgroundServer(a2a_app(OracleExecutor(), oracle_card(url)), port=port):
        print(f"Reference oracle agent serving A2A at {url}")
        config = RunConfig(
            domain=args.domain, agent=AGENT_NAME, llm_agent="a2a-oracle",
            user="scripted_user", llm_user="scripted", llm_args_user={}, llm_args_judge={},
            num_tasks=args.num_tasks, max_concurrency=args.max_concurrency,
            results_dir=args.results_dir,
        )
        outcome = evaluate(config, A2AConfig(endpoint=url))
    return report_outcome(outcome)


def ab_command(args: argparse.Namespace) -> int:
    from tau2_a2a.ab import run_ab

    resolve_domain(args)
    args.agent_llm = args.model
    if args.api_base:
        args.agent_llm_args = {**args.agent_llm_args, "api_base": args.api_base}
    outcome = run_ab(run_config_from_args(args))
    print(outcome.table)
    print(f"Results: {outcome.native.results_path}\n         {outcome.a2a.results_path}")
    print(f"A/B table: {outcome.table_path} ({outcome.json_path.name} beside it)")
    return 0


def report_command(args: argparse.Namespace) -> int:
    from tau2_a2a.compare.output import write
    from tau2_a2a.compare.report import terminal_summary
    from tau2_a2a.compare.runs import ReportError

    try:
        report, html_path, json_path = write(args.results, args.out, args.json, args.seed, args.resamples)
    except ReportError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    print(terminal_summary(report))
    print(f"Report: {html_path}\nFigures: {json_path}")
    return 0


@contextmanager
def _command_logging(debug: bool) -> Iterator[None]:
    """Our stdlib logging to stderr for one command (tau2 resets loguru's sinks, not
    these); put back as it was afterwards, for callers of main() in a process."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    package = logging.getLogger("tau2_a2a")
    handlers, level, propagate = package.handlers[:], package.level, package.propagate
    package.handlers[:] = [handler]
    package.setLevel(logging.INFO if debug else logging.WARNING)
    package.propagate = False
    try:
        yield
    finally:
        package.handlers[:] = handlers
        package.setLevel(level)
        package.propagate = propagate


if __name__ == "__main__":
    sys.exit(main())
