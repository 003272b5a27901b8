"""A run: tau2's evaluation of one agent, in this process or with its simulations on Ray.

`evaluate(settings)` is the one way in, for `tau2-a2a run`, the service's
evaluation processes, `demo`, `ab` and Python callers, so all behave alike:
the agent's card is checked before any simulation, the results file and its
protocol metrics file sit side by side, an existing results file of a run
with the same settings is resumed without a prompt (one of another run is
refused, see `tau2bench.resume`), and no secret is left in the results.

An A2A run makes one A2A session from its config and closes it at the end:
every simulation in this process talks over it, and its discovery records go
to the metrics file.
"""

from __future__ import annotations

import logging
import re
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from tau2_a2a.client.bindings import READABLE
from tau2_a2a.client.errors import AgentAuthError
from tau2_a2a.client.session import A2ASession
from tau2_a2a.runner.interrupt import RunInterrupted, freeze_writes
from tau2_a2a.runner.outcome import RunOutcome, RunStopped
from tau2_a2a.runner.protocol_metrics import metrics_path, write_report
from tau2_a2a.runner.settings import A2A_AGENT, RunSettings
from tau2_a2a.tau2bench.distribution import RunConfig
from tau2_a2a.tau2bench.environments import install as install_environments
from tau2_a2a.tau2bench.orchestration import on_session
from tau2_a2a.tau2bench.resume import CARD_KEY, refuse_changed_resume
from tau2_a2a.tau2bench.runs import (
    check_results_dir,
    planned_simulations,
    results_path_for,
    run,
    run_config,
    seal,
    simulations_saved,
)

log = logging.getLogger("tau2_a2a.runner")


def evaluate(settings: RunSettings) -> RunOutcome:
    """Run `settings`: a tau2 agent as `tau2 run` would, or the A2A agent of `settings.a2a`.

    A Ctrl-C (see `interrupt`) raises RunInterrupted once what finished is saved.
    """
    install_environments()
    config = run_config(settings.tau2_fields())
    simulations = planned_simulations(config)  # tasks that do not exist: said now, not after the agent's check
    check_results_dir(config)
    if not settings.is_a2a:
        return _evaluate_native(config)
    assert settings.a2a is not None  # RunSettings says so
    session = A2ASession(settings.a2a)
    try:
        return _evaluate_a2a(settings, config, session, simulations)
    finally:
        session.close()


def _evaluate_a2a(settings: RunSettings, config: RunConfig, session: A2ASession, simulations: int) -> RunOutcome:
    card = session.card
    print(f"A2A agent: {card.name} at {session.config.endpoint} ({describe_binding(session)})", flush=True)
    path = prepare_a2a_run(config, session, name_after_card=settings.agent_llm is None)
    try:
        with ExitStack() as engine:
            if settings.ray:
                from tau2_a2a.runner.ray_engine import simulations_on_ray

                engine.enter_context(simulations_on_ray(settings.ray, session.config, config.max_concurrency,
                                                        simulations, path))
            else:
                engine.enter_context(on_session(session))
            results = run(config)
    except AgentAuthError as refusal:
        raise stopped_by_refusal(refusal, session, path, config) from None
    except KeyboardInterrupt:
        raise interrupted(path, config, session) from None
    seal(path, config)
    report = write_report(path, session.discovery)
    return RunOutcome(results, path, metrics_path(path), report)


def prepare_a2a_run(config: RunConfig, session: A2ASession, name_after_card: bool) -> Path:
    """Point `config` at the A2A agent (its llm_args: what the results file records of the config, and the
    card's identity; its LLM's name, unless given, from the card), name the results file, and refuse to
    resume a results file of another run."""
    card = session.card
    config.agent = A2A_AGENT
    if name_after_card:
        config.llm_agent = agent_model_name(card.name)
    config.llm_args_agent = {**(config.llm_args_agent or {}), **session.config.as_record(),
                             CARD_KEY: card_identity(card)}
    config.agent_api_key = None
    path = results_path_for(config)
    refuse_changed_resume(config, path)
    return path


def _evaluate_native(config: RunConfig) -> RunOutcome:
    """A tau2 agent run as `tau2 run` would, resuming only a run with the same settings, without a prompt."""
    path = results_path_for(config)
    refuse_changed_resume(config, path)
    try:
        results = run(config)
    except KeyboardInterrupt:
        raise interrupted(path, config) from None
    seal(path, config)
    return RunOutcome(results, path, None, None)


def agent_model_name(card_name: str) -> str:
    """A run-name-safe label for the agent under test (tau2 names runs after the agent's LLM)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", card_name).strip("-") or "agent"
    return f"a2a-{slug}"


def card_identity(card: Any) -> dict[str, str]:
    """Who answered: the card's name, its url (first interface's) and version, kept with the results."""
    interfaces = list(card.supported_interfaces)  # never empty: see validate_card
    return {"name": card.name, "url": interfaces[0].url if interfaces else "", "version": card.version}


def describe_binding(session: A2ASession) -> str:
    """'A2A 1.0 over JSON-RPC, streaming': what the session settled on from the card."""
    return (f"A2A {session.protocol_version} over {READABLE[session.binding]}"
            + (", streaming" if session.streaming else ""))


def interrupted(path: Path, config: RunConfig, session: A2ASession | None = None) -> RunInterrupted:
    """The run stopped by Ctrl-C: freeze its results file and write the metrics of what it holds."""
    freeze_writes()
    if not path.exists():
        return RunInterrupted(0, path, None)
    seal(path, config)
    if session is None:
        return RunInterrupted(simulations_saved(path), path, None)
    report = write_report(path, session.discovery)
    return RunInterrupted(len(report["simulations"]), path, metrics_path(path))


def stopped_by_refusal(refusal: AgentAuthError, session: A2ASession, path: Path, config: RunConfig) -> RunStopped:
    """The run stopped when the agent refused our credentials: keep what finished, say what to pass."""
    finished = 0
    if path.exists():
        seal(path, config)
        finished = len(write_report(path, session.discovery)["simulations"])
    return RunStopped(
        f"The agent at {session.config.endpoint} refused our credentials mid-run "
        f"({f'HTTP {refusal.status}' if refusal.status else 'gRPC UNAUTHENTICATED'}), so the run stopped; its "
        f"{finished} finished simulations are kept in {path}. Pass a valid bearer token with "
        "--a2a-auth-token or TAU2_A2A_AUTH_TOKEN and re-run the same command to resume.",
        status=refusal.status,
    )
