"""`tau2-a2a run`: tau2's `run` flags, plus the A2A agent's, into one RunSettings, run by the runner.

Every flag of `tau2 run` works the same; `--agent a2a_agent` with
`--a2a-endpoint URL` evaluates an A2A agent. The flags are checked and turned
into settings here, once; the run itself is `runner.run.evaluate`.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from typing import Any

from tau2_a2a.cli.common import add_transport_args, auth_token
from tau2_a2a.client.config import AUTH_TOKEN_ENV, DEFAULT_MAX_REPLY_BYTES, DEFAULT_TIMEOUT_SECONDS, A2AConfig
from tau2_a2a.client.targets import TargetPolicy
from tau2_a2a.errors import ConfigError
from tau2_a2a.runner.interrupt import RunInterrupted, stop_on_sigint
from tau2_a2a.runner.outcome import report_outcome
from tau2_a2a.runner.parent import exit_with_parent
from tau2_a2a.runner.run import evaluate
from tau2_a2a.runner.settings import A2A_AGENT, RunSettings
from tau2_a2a.tau2bench.distribution import add_run_args
from tau2_a2a.tau2bench.runs import domains

# Largest values the counting flags take: beyond them no run is meant, and some overflow tau2's arithmetic.
MAX_COUNT = 1_000_000
SEED_RANGE = (-(2**63), 2**63 - 1)
RUN_EPILOG = ("Exit codes: 0 no simulation ended with an A2A error; 3 some did (they score 0); 2 the run could not "
              "start or the agent refused the token (finished simulations are kept; re-run to resume); 1 the run "
              "is incomplete: tau2 could not score some simulations (re-run to retry them), or a simulation's Ray "
              "worker died three times (with --ray); 130 stopped by Ctrl-C (finished "
              "simulations and their metrics are kept; the last line gives the command that resumes). A resume "
              "continues only a run with the same settings.")


def add_run_command(commands: Any) -> None:
    run = commands.add_parser("run", help="Run tau2-bench; with --agent a2a_agent, against an A2A agent",
                              epilog=RUN_EPILOG)
    run.add_argument("domain_positional", nargs="?", metavar="DOMAIN", help="The domain (same as --domain)")
    add_run_args(run)
    add_a2a_args(run)
    # Without --agent-llm an A2A agent is named after its card, and tau2's agents get tau2's default LLM.
    run.set_defaults(func=run_command, agent_llm=None)


def run_command(args: argparse.Namespace) -> int:
    exit_with_parent()
    settings = settings_from_args(args)
    with stop_on_sigint():
        return report_outcome(evaluate(settings))


def settings_from_args(args: argparse.Namespace) -> RunSettings:
    """The run the flags describe: tau2's settings as `tau2 run` maps them, and the A2A agent's; a value no run
    can use is refused in one line (ConfigError)."""
    check_run_args(args)
    return RunSettings(
        domain=args.domain,
        agent=args.agent,
        a2a=a2a_config_from_args(args) if args.agent == A2A_AGENT else None,
        ray=getattr(args, "ray", None),
        task_set_name=args.task_set_name,
        task_split_name=args.task_split_name,
        task_ids=args.task_ids,
        num_tasks=args.num_tasks,
        agent_llm=args.agent_llm,
        agent_llm_args=args.agent_llm_args,
        user=args.user,
        user_llm=args.user_llm,
        user_llm_args=args.user_llm_args,
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
        judge_llm=args.judge_llm,
        judge_api_key=args.judge_api_key,
        judge_llm_args=args.judge_llm_args,
        judge_window_size=args.judge_window_size,
        judge_system_prompt=args.judge_system_prompt,
        retrieval_config=args.retrieval_config,
        retrieval_config_kwargs=args.retrieval_config_kwargs,
        timeout=args.timeout,
        retry_delay=args.retry_delay,
    )


def a2a_config_from_args(args: argparse.Namespace) -> A2AConfig:
    if not args.a2a_endpoint:
        raise ConfigError("--agent a2a_agent needs --a2a-endpoint URL (the agent's base URL).")
    if args.ray and args.a2a_auth_token:
        raise ConfigError(f"With --ray, pass the agent's token in ${AUTH_TOKEN_ENV}, not --a2a-auth-token: Ray "
                          "keeps the driver's command line in its job table.")
    return A2AConfig(
        endpoint=args.a2a_endpoint,
        auth_token=auth_token(args.a2a_auth_token),
        timeout=args.a2a_timeout,
        debug=args.a2a_debug,
        transport=args.a2a_transport,
        streaming=args.a2a_streaming,
        max_reply_bytes=args.a2a_max_reply_bytes,
        targets=None if args.a2a_allowed_targets is None else TargetPolicy.parse(args.a2a_allowed_targets),
        price_model=args.a2a_price_model,
    )


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


def resolve_domain(args: argparse.Namespace) -> None:
    """The domain may come positionally or as --domain, not as two different ones, and tau2 must know it."""
    if args.domain_positional and args.domain and args.domain_positional != args.domain:
        raise ConfigError(f"Two domains given: {args.domain_positional!r} and --domain {args.domain!r}.")
    args.domain = args.domain or args.domain_positional
    if not args.domain:
        raise ConfigError(f"Name a domain: tau2-a2a {args.command} airline (or --domain airline).")
    known = domains()
    if args.domain not in known:
        raise ConfigError(f"Unknown domain {args.domain!r}: tau2 knows {', '.join(known)}.")


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


