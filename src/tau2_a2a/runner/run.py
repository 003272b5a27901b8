"""A run: tau2's evaluation of one agent, in this process or with its simulations on Ray.

`evaluate(settings)` is the one way in, for `tau2-a2a run`, the service's
evaluation processes, `demo`, `ab` and Python callers, so all behave alike:
the agent's card is checked before any simulation, the results file and its
protocol metrics file sit side by side, an existing results file of a run
with the same settings is resumed without a prompt (one of another run is
refused, see `tau2bench.run.resume`), and no secret is left in the results.

An A2A run makes one A2A session from its config and closes it at the end:
every simulation in this process talks over it, and its discovery records go
to the metrics file.
"""

from __future__ import annotations

import hashlib
import logging
import re
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from a2a.types import AgentCard

from tau2_a2a.client import tracing
from tau2_a2a.client.bindings import READABLE
from tau2_a2a.client.config import DRIVEN, MCP
from tau2_a2a.client.errors import AgentAuthError
from tau2_a2a.client.session import A2ASession
from tau2_a2a.runner.interrupt import RunInterrupted
from tau2_a2a.runner.outcome import RESUME, RunOutcome, RunStopped
from tau2_a2a.runner.protocol_metrics import write_metrics
from tau2_a2a.runner.settings import A2A_AGENT, RunSettings
from tau2_a2a.tau2bench.run.layout import metrics_path
from tau2_a2a.tau2bench.run.orchestration import on_session
from tau2_a2a.tau2bench.run.resume import CARD_KEY, TOOLS_KEY
from tau2_a2a.tau2bench.run.runs import plan_run, simulations_saved
from tau2_a2a.tau2bench.seam.hooks import tau2_hooks
from tau2_a2a.tau2bench.speed.environments import environments
from tau2_a2a.terminal import plain

log = logging.getLogger("tau2_a2a.runner")


def evaluate(settings: RunSettings) -> RunOutcome:
    """Run `settings`: a tau2 agent as `tau2 run` would, or the A2A agent of `settings.a2a`.

    An A2A run checks the agent's card before any simulation, records who answered, runs its simulations in
    this process on its one session (or on Ray's actors), and writes the protocol metrics of what finished,
    however it ended. A Ctrl-C (see `interrupt`) raises RunInterrupted once what finished is saved; the A2A
    agent refusing our credentials mid-run raises RunStopped, also keeping what finished. tau2 is as it was
    when it returns (see `tau2bench.seam.hooks`).
    """
    tracing.setup()  # on only when OpenTelemetry's variables ask for it
    with ExitStack() as run:
        run.enter_context(tau2_hooks())  # tau2-a2a's parts inside tau2, for this run only
        run.enter_context(environments(cached=True))
        plan = plan_run(settings.tau2)  # tasks that do not exist: said now, not after the agent's check
        run.callback(tracing.flush)  # last: the run's spans are in the viewer when it returns
        span = run.enter_context(tracing.span(f"tau2-a2a run {settings.domain}", run_span_attributes(settings)))
        session = run.enter_context(A2ASession(settings.a2a)) if settings.a2a else None
        if session is not None:
            card = session.card
            if span is not None:
                span.set_attributes({"gen_ai.agent.name": card.name, "a2a.binding": session.binding})
            print(f"A2A agent: {plain(card.name)} at {session.config.endpoint} ({describe_binding(session)})",
                  flush=True)
            plan.point_at(A2A_AGENT, {**session.config.as_record(), CARD_KEY: card_identity(card),
                                      TOOLS_KEY: session.tools_mode},
                          agent_model_name(card.name) if settings.agent_llm is None else None)
            if settings.ray:
                from tau2_a2a.runner.ray_engine import simulations_on_ray

                run.enter_context(simulations_on_ray(settings.ray, session.config, plan.config.max_concurrency,
                                                      plan.simulations, plan.results_path))
            else:
                run.enter_context(on_session(session))
        path = plan.results_path
        try:
            results, ended = plan.run(), None
        except (AgentAuthError, KeyboardInterrupt) as error:  # after Ctrl-C the results file is frozen already
            results, ended = None, error
        metrics = write_metrics(path, session.discovery) if session and path.exists() else None
        if ended is not None:
            raise ending(ended, path, metrics, session) from None
        return RunOutcome(results, path, metrics_path(path) if metrics else None, metrics)
    raise AssertionError("not reached")  # ExitStack does not swallow what the run raises


def run_span_attributes(settings: RunSettings) -> dict[str, str | int | None]:
    """What a run's span says of it (nothing secret: the endpoint is named by its host and port only)."""
    endpoint = urlsplit(settings.a2a.endpoint) if settings.a2a else None
    return {"tau2.domain": settings.domain, "tau2.agent": settings.agent, "tau2.num_trials": settings.num_trials,
            "tau2.num_tasks": settings.num_tasks, "tau2.task_ids": ",".join(settings.task_ids or []) or None,
            "tau2.user": settings.user, "tau2.user_llm": settings.user_llm, "tau2.ray": settings.ray,
            "server.address": endpoint.hostname if endpoint else None,
            "server.port": endpoint.port if endpoint else None}


def ending(error: BaseException, path: Path, metrics: dict[str, Any] | None,
           session: A2ASession | None) -> Exception:
    """What stopped the run early, for its caller: the simulations finished before it are kept in `path`."""
    finished = len(metrics["simulations"]) if metrics else simulations_saved(path)
    if not isinstance(error, AgentAuthError) or session is None:
        return RunInterrupted(finished, path, metrics_path(path) if metrics else None)
    return RunStopped(
        f"The agent at {session.config.endpoint} refused our credentials mid-run "
        f"({f'HTTP {error.status}' if error.status else 'gRPC UNAUTHENTICATED'}), so the run stopped; its "
        f"{finished} finished simulations are kept in {path}. Pass a valid bearer token with "
        f"--a2a-auth-token or TAU2_A2A_AUTH_TOKEN and {RESUME}.",
        status=error.status,
    )


MAX_SLUG = 48  # characters of a card's name in a results file's name


def agent_model_name(card_name: str) -> str:
    """A run-name-safe label for the agent under test (tau2 names runs, and their results files, after the agent's
    LLM): the card's name in letters, digits, '.', '_' and '-', at most MAX_SLUG of them; a longer name is cut
    and ends with 8 hex digits of its hash, so that two long names stay apart."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", card_name).strip("-") or "agent"
    if len(slug) > MAX_SLUG:
        slug = f"{slug[:MAX_SLUG - 9].rstrip('-.')}-{hashlib.sha256(card_name.encode()).hexdigest()[:8]}"
    return f"a2a-{slug}"


def card_identity(card: AgentCard) -> dict[str, str]:
    """Who answered: the card's name, its url (first interface's) and version, kept with the results."""
    interfaces = list(card.supported_interfaces)  # never empty: see validate_card
    return {"name": card.name, "url": interfaces[0].url if interfaces else "", "version": card.version}


def describe_binding(session: A2ASession) -> str:
    """'A2A 1.0 over JSON-RPC, streaming': what the session settled on from the card."""
    tools = {MCP: ", tools over MCP", DRIVEN: ", driving the conversation over MCP"}.get(session.tools_mode, "")
    return (f"A2A {session.protocol_version} over {READABLE[session.binding]}"
            + (", streaming" if session.streaming else "") + tools)
