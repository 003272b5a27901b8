"""What an evaluation has produced so far, read from tau2's results file, and what it produced in the end.

tau2 rewrites the results file after every simulation, so progress is read on
demand and a reading is reused until the file changes. When an evaluation
ends, its result holds the metrics of the simulations that finished and the
protocol metrics beside the results file (the child's, or rebuilt).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from tau2_a2a.files import PRIVATE_FILE
from tau2_a2a.service import summary
from tau2_a2a.service.jobs.evaluation import Progress
from tau2_a2a.service.wire import JsonObject
from tau2_a2a.tau2bench.run.layout import metrics_path

log = logging.getLogger("tau2_a2a.service")


@dataclass
class _Reading:
    key: tuple[int, int]  # the file's modification time and size when read
    progress: Progress


def progress_of(results: JsonObject | None, total: int) -> Progress:
    """Simulations done of `total` in tau2's results, and the average reward so far."""
    return Progress(**summary.progress(results, total))


class ProgressReader:
    """Progress of running evaluations, each read again only when its results file has changed."""

    def __init__(self) -> None:
        self._readings: dict[str, _Reading] = {}

    def running(self, evaluation_id: str, path: Path, total: int) -> Progress:
        """Simulations done of `total` and the average reward so far, from the results file at `path`."""
        nothing_yet = progress_of(None, total)
        try:
            stat = path.stat()
        except OSError:
            return nothing_yet
        key = (stat.st_mtime_ns, stat.st_size)
        cached = self._readings.get(evaluation_id)
        if cached and cached.key == key:
            return cached.progress
        results = summary.read_results(path)
        if results is None:  # being rewritten right now: keep the last reading
            return cached.progress if cached else nothing_yet
        progress = progress_of(results, total)
        self._readings[evaluation_id] = _Reading(key, progress)
        return progress

    def forget(self, evaluation_id: str) -> None:
        """The evaluation ended: its result holds its progress from now on."""
        self._readings.pop(evaluation_id, None)


def final_result(path: Path, ran_every_simulation: bool) -> JsonObject:
    """The result of an evaluation that ended, from its results file at `path` (which may be missing)."""
    results = summary.read_results(path)
    return summary.outcome(results, protocol_metrics(path, results, ran_every_simulation))


def protocol_metrics(path: Path, results: JsonObject | None, ran_every_simulation: bool) -> JsonObject | None:
    """The protocol metrics beside the results file (the child's, or rebuilt from them)."""
    if results is None or not results.get("simulations"):
        return None
    metrics_file = metrics_path(path)
    if ran_every_simulation and metrics_file.exists():
        metrics = summary.read_results(metrics_file)
        if metrics is not None:
            return metrics
    try:  # a canceled or failed run: build the metrics file from what finished
        from tau2_a2a.runner.protocol_metrics import write_metrics

        metrics = write_metrics(path)
        metrics_file.chmod(PRIVATE_FILE)
        return metrics
    except Exception as error:  # noqa: BLE001 (a damaged results file must not lose the record)
        log.warning("evaluation %s: no protocol metrics (%s)", path.parent.name, error)
        return None
