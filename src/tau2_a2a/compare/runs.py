"""The runs a report reads: tau2 results files (one per domain) and the A2A metrics beside them.

A run is one results file (one domain), a run's directory holding one
(upstream's layout, `NAME/results.json`), or a folder of either (one per
domain), labelled `LABEL=PATH` or by its name. Also the facts each figure and
the page read off one simulation: its reward, failure kind, failed components
and A2A records.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from tau2_a2a.client.records import RAW_DATA_KEY
from tau2_a2a.compare import stats
from tau2_a2a.errors import first_line
from tau2_a2a.runner.outcome import left_out_of_metrics
from tau2_a2a.runner.protocol_metrics import conversation
from tau2_a2a.tau2bench.run import layout
from tau2_a2a.tau2bench.run.resume import CARD_KEY

SCHEMA_ID = "https://tau2-a2a.dev/schemas/report-2.json"
SCHEMA_PREFIX = "https://tau2-a2a.dev/schemas/report-"  # every version's: a folder's older reports are skipped too


class ReportError(Exception):
    """Bad input, said in one line naming the file and what to do."""


@dataclass
class DomainRun:
    """One tau2 results file, and the A2A metrics file beside it when there is one."""

    path: Path
    results: dict[str, Any]
    metrics: dict[str, Any] | None

    @property
    def domain(self) -> str:
        return str(self.results["info"]["environment_info"]["domain_name"])


@dataclass
class Run:
    """What one label stands for: one results file per domain. Runs labelled alike without LABEL= are told apart
    by their agents' `endpoint`, then by `when` tau2 named them, then by their `name`."""

    label: str
    domains: dict[str, DomainRun] = field(default_factory=dict)
    when: str | None = None
    named: bool = False  # labelled LABEL=PATH: the label stays as given
    name: str | None = None  # the run's own name (its --save-to, or the name tau2 made up)
    endpoint: str | None = None  # the agent's, as host:port/path: no scheme, credentials, query or fragment


# -- reading -------------------------------------------------------------------------


def load_json(path: Path) -> object:
    """The file's JSON, or a ReportError saying why not."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file; pass a tau2 results file (e.g. results/run.json)") from None
    except OSError as error:
        raise ReportError(f"{path}: cannot be read ({error.strerror}); check the path and its permissions") from None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        if "unexpected end" in str(error).lower() or "eof" in str(error).lower():
            raise ReportError(f"{path}: the JSON ends early (truncated at byte {len(raw)}); "
                              "let the run finish or resume it to rewrite the file") from None
        raise ReportError(f"{path}: not JSON ({first_line(error)}); pass a tau2 results file") from None


def check_results(path: Path, data: object) -> dict[str, Any]:
    """`data` if it has the shape of tau2's Results, else a ReportError."""
    what = "; pass the results file tau2 (or tau2-a2a run) wrote, not another JSON file"
    if not isinstance(data, dict) or not {"info", "tasks", "simulations"} <= set(data):
        raise ReportError(f"{path}: not a tau2 results file (no info, tasks and simulations){what}")
    try:
        domain = data["info"]["environment_info"]["domain_name"]
        trials = int(data["info"]["num_trials"])
        task_ids = {str(task["id"]) for task in data["tasks"]}
        for simulation in data["simulations"]:
            str(simulation["task_id"]), simulation["termination_reason"], list(simulation["messages"])
    except (KeyError, TypeError, ValueError) as error:
        raise ReportError(f"{path}: not a tau2 results file (missing or bad {error}){what}") from None
    if not isinstance(domain, str) or trials < 1:
        raise ReportError(f"{path}: not a tau2 results file (bad domain or num_trials){what}")
    if not data["simulations"]:
        raise ReportError(f"{path}: holds no simulations yet; report on it once the run has finished some")
    unknown = sorted({str(s["task_id"]) for s in data["simulations"]} - task_ids)
    if unknown:
        raise ReportError(f"{path}: simulations of tasks not in its task list ({', '.join(unknown[:3])}); "
                          "the file is damaged, re-run the evaluation")
    return data


def load_domain_run(path: Path) -> DomainRun:
    results = check_results(path, load_json(path))
    side = layout.metrics_path(path)
    metrics = None
    if side.exists():
        try:
            metrics = orjson.loads(side.read_bytes())
        except orjson.JSONDecodeError:
            metrics = None  # it is derived from the results file: the trajectories hold every record
    return DomainRun(path, results, metrics)


def results_files(folder: Path) -> list[Path]:
    """The tau2 results files in a folder, of either layout (not the files tau2 and tau2-a2a write beside
    them, nor reports)."""
    return [path for path in layout.results_files(folder) if not is_report(path)]


def is_report(path: Path) -> bool:
    """Whether `path` is a report this command wrote (its JSON names our schema, any version, first)."""
    with path.open("rb") as file:
        return SCHEMA_PREFIX.encode() in file.read(200)


def parse_run(argument: str) -> Run:
    """`LABEL=PATH` or `PATH`: a results file, a run's directory holding one, or a folder of either (one per
    domain); labelled, without LABEL, by the run's name or the folder's."""
    label, sep, rest = argument.partition("=")
    path = Path(rest if sep and label and not Path(argument).exists() else argument)
    named = bool(sep) and not Path(argument).exists()
    one_file = layout.results_in(path) != path or not path.is_dir()  # a results file, or a run's own directory
    if not named:
        label = layout.run_name(layout.results_in(path)) if one_file else path.name
    run = Run(label, named=named, name=label if not named else None)
    paths = results_files(path) if path.is_dir() else [path]
    if not paths:
        raise ReportError(f"{path}: a folder with no tau2 results files; pass the results file or its folder")
    for file in paths:
        domain_run = load_domain_run(file)
        if domain_run.domain in run.domains:
            raise ReportError(f"{path}: two results files of domain {domain_run.domain} "
                              f"({layout.shown(run.domains[domain_run.domain].path)}, {layout.shown(file)}); "
                              "pass them as separate runs (LABEL=FILE)")
        run.domains[domain_run.domain] = domain_run
    first = next(iter(run.domains.values())).results
    run.endpoint = endpoint_label(((first["info"].get("agent_info") or {}).get("llm_args") or {}).get(ENDPOINT_KEY))
    if not named and one_file:
        run.label, run.when = short_label(label, first)
    return run


ENDPOINT_KEY = "a2a_endpoint"  # where tau2's agent_info keeps the A2A agent's endpoint


def endpoint_label(url: object) -> str | None:
    """An endpoint as a label reads it: host:port and path, without scheme, credentials, query or fragment."""
    if not isinstance(url, str) or not url:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    if host and parts.port:
        host = f"{host}:{parts.port}"
    return f"{host}{parts.path.rstrip('/')}" or None


# tau2's own run names: "<YYYYMMDD>_<HHMMSS>_<domain>_<agent>_<agent llm>_<user>_<user llm>"
TAU2_RUN_NAME = re.compile(r"^(\d{4})(\d{2})(\d{2})_(\d{2})(\d{2})(\d{2})_")


def short_label(stem: str, results: dict[str, Any]) -> tuple[str, str | None]:
    """A run's name for the page: a name tau2 made up (a date and every setting) becomes the agent's name (its
    card's, or its LLM's), with the date kept to tell runs of one agent apart; a name someone chose stays."""
    made = TAU2_RUN_NAME.match(stem)
    if made is None:
        return stem, None
    agent = (results.get("info") or {}).get("agent_info") or {}
    card = (agent.get("llm_args") or {}).get(CARD_KEY) or {}
    name = str(card.get("name") or agent.get("llm") or agent.get("implementation") or stem)
    year, month, day, hour, minute, second = made.groups()
    return name, f"{year}-{month}-{day} {hour}:{minute}:{second}"


def parse_runs(arguments: list[str]) -> list[Run]:
    """The runs named on the command line; refuses runs that cannot stand side by side."""
    runs = [parse_run(argument) for argument in arguments]
    tell_apart(runs)
    seen: dict[str, int] = {}
    for run in runs:
        seen[run.label] = seen.get(run.label, 0) + 1
        if seen[run.label] > 1:
            run.label = f"{run.label} ({seen[run.label]})"
    first = runs[0]
    for run in runs[1:]:
        if set(run.domains) != set(first.domains):
            raise ReportError(f"runs on different domains: {first.label} covers {', '.join(sorted(first.domains))}, "
                              f"{run.label} covers {', '.join(sorted(run.domains))}; compare runs of the same domains")
        for domain in first.domains:
            mine, theirs = task_trials(first.domains[domain]), task_trials(run.domains[domain])
            if set(mine) != set(theirs):
                only = sorted(set(mine) ^ set(theirs))
                raise ReportError(f"runs on different task sets in {domain}: {first.label} and {run.label} differ in "
                                  f"{len(only)} tasks (e.g. {', '.join(only[:3])}); compare runs on the same tasks")
            if task_set_hash(first.domains[domain], mine) != task_set_hash(run.domains[domain], theirs):
                raise ReportError(f"runs on different task sets in {domain}: {first.label} and {run.label} have the "
                                  "same task ids but different task definitions (tau2 versions?); "
                                  "compare runs of the same task data")
    return runs


def tell_apart(runs: list[Run]) -> None:
    """Runs labelled alike (two agents with one card name) get, in turn, their agent's endpoint, the date tau2
    named them by, or their own name added, whichever first tells them apart. LABEL= labels stay as given."""
    details: tuple[tuple[Callable[[Run], str | None], str], ...] = (
        (lambda run: run.endpoint, "no endpoint"), (lambda run: run.when, "undated"), (lambda run: run.name, "unnamed"))
    for detail, missing in details:
        labels = [run.label for run in runs]
        for label in sorted({label for label in labels if labels.count(label) > 1}):
            alike = [run for run in runs if run.label == label and not run.named]
            if len({detail(run) for run in alike}) > 1:
                for run in alike:
                    run.label = f"{run.label} · {detail(run) or missing}"


# -- one simulation ------------------------------------------------------------------


def task_trials(run: DomainRun) -> dict[str, stats.TaskTrials]:
    """Each simulated task's rewards in trial order (see `scored_tasks`)."""
    return scored_tasks(run.results["simulations"])


def scored_tasks(simulations: Iterable[dict[str, Any]]) -> dict[str, stats.TaskTrials]:
    """Each simulated task's rewards in trial order, as tau2 counts them: a simulation with no reward scores 0,
    and one tau2 gave up on (an infrastructure error) is left out."""
    by_task: dict[str, list[tuple[int, float]]] = {}
    for index, simulation in enumerate(simulations):
        if left_out_of_metrics(simulation):
            continue
        trial = simulation.get("trial")
        by_task.setdefault(str(simulation["task_id"]), []).append(
            (trial if trial is not None else index, reward_of(simulation)))
    return {task: stats.TaskTrials(task, tuple(r for _, r in sorted(trials)))
            for task, trials in sorted(by_task.items(), key=lambda item: task_order(item[0]))}


def task_order(task_id: str) -> tuple[int, int | str]:
    """Numeric task ids in numeric order, then the others in text order."""
    return (0, int(task_id)) if task_id.isdigit() else (1, task_id)


def reward_of(simulation: dict[str, Any]) -> float:
    info = simulation.get("reward_info") or {}
    return float(info.get("reward") or 0.0)


def task_set_hash(run: DomainRun, simulated: dict[str, stats.TaskTrials]) -> str:
    """sha256 of the definitions of the simulated tasks (canonical JSON, by id): same hash, same tasks."""
    tasks = sorted((t for t in run.results["tasks"] if str(t["id"]) in simulated), key=lambda t: str(t["id"]))
    return hashlib.sha256(orjson.dumps(tasks, option=orjson.OPT_SORT_KEYS)).hexdigest()


def a2a_records(simulation: dict[str, Any]) -> list[dict[str, Any]]:
    """The A2A request records the trajectory carries (none for a native agent)."""
    records: list[dict[str, Any]] = []
    for message in simulation["messages"]:
        raw = (message.get("raw_data") or {}).get(RAW_DATA_KEY) or {}
        records.extend(raw.get("requests") or [])
    return records


def a2a_error(simulation: dict[str, Any]) -> str | None:
    for message in reversed(simulation["messages"]):
        error = ((message.get("raw_data") or {}).get(RAW_DATA_KEY) or {}).get("error")
        if error:
            return str(error)
    return None


def failed_components(simulation: dict[str, Any]) -> list[str]:
    """The reward components below 1 (DB, COMMUNICATE, ...), in tau2's naming."""
    breakdown = (simulation.get("reward_info") or {}).get("reward_breakdown") or {}
    return [str(name) for name, value in breakdown.items() if value is not None and not stats.is_success(value)]


def failure_kind(simulation: dict[str, Any]) -> tuple[str, str]:
    """(group, kind) of a simulation: ('pass', 'pass') or why it failed.

    Groups: agent (A2A error categories), infrastructure (the agent unreachable, the user
    simulator crashed, a skipped sample, upstream's infrastructure error), user-stop (the user simulator ended the
    conversation and the task was not done), agent-stop, max-steps, too-many-errors.
    """
    if stats.is_success(reward_of(simulation)):
        return "pass", "pass"
    reason = str(simulation.get("termination_reason"))
    error = a2a_error(simulation)
    if simulation.get("skipped"):
        return "infrastructure", "skipped"
    if reason == "agent_error":
        if error == "connection":
            return "infrastructure", "connection"
        return "agent", error or "agent"
    if reason == "user_error":
        return "infrastructure", "user-simulator"
    if reason == "infrastructure_error":  # upstream gave up on the simulation (e.g. its LLM judge unreachable)
        return "infrastructure", "tau2"
    if reason == "user_stop":
        return "user-stop", "user-stop"
    return reason.replace("_", "-"), reason.replace("_", "-")


COST_PARTIES = ("agent", "user", "judge", "total")


def conversation_cost(simulation: dict[str, Any]) -> dict[str, float | None]:
    """What one conversation cost, by participant (USD; None: not reported): as tau2-a2a kept it for the A2A
    agent, else tau2's own agent_cost and user_cost (a native agent's: its judge's cost is recorded nowhere)."""
    kept = conversation(simulation)
    if kept is not None:
        return {who: kept.get("cost_usd", {}).get(who) for who in COST_PARTIES}
    costs = {"agent": _finite(simulation.get("agent_cost")), "user": _finite(simulation.get("user_cost")),
             "judge": None}
    return {**costs, "total": None}


def conversation_times(simulation: dict[str, Any]) -> dict[str, float] | None:
    """Seconds of one conversation by phase (agent, user, tools, judge), when tau2-a2a kept them."""
    kept = conversation(simulation)
    return kept.get("time_s") if kept else None


def _finite(value: float | None) -> float | None:
    if value is None:
        return None
    number = float(value)
    return None if number != number else number
