"""`tau2-a2a report BASE NEW --gate` on results files whose difference is known by construction.

The files are a real run's (the oracle over A2A on 20 airline tasks), with each (task, trial)'s outcome set:
every figure the gate reads is a simulation's reward.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tau2_a2a.cli import main
from tests.support.runs import run_a2a

TASKS = [str(i) for i in range(20)]
TRIALS = 4


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, oracle_url: str) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("gate_template")
    outcome = run_a2a(oracle_url, folder, task_ids=TASKS, max_concurrency=4, save_to="template")
    return json.loads(outcome.results_path.read_text())


def constructed(template: dict[str, Any], path: Path, outcomes: dict[str, str], trials: int = TRIALS) -> Path:
    """The template with `trials` trials of each task, trial i passed when outcomes[task][i] is "1" (default all)."""
    data = copy.deepcopy(template)
    by_task = {s["task_id"]: s for s in data["simulations"]}
    data["info"]["num_trials"] = trials
    data["simulations"] = []
    for task in TASKS:
        for trial, passed in enumerate(outcomes.get(task, "1" * trials)):
            simulation = copy.deepcopy(by_task[task])
            simulation["id"] = f"{task}-{trial}"
            simulation["trial"] = trial
            simulation["reward_info"]["reward"] = float(passed == "1")
            data["simulations"].append(simulation)
    path.write_text(json.dumps(data))
    return path


def gate(capsys: pytest.CaptureFixture[str], tmp_path: Path, base: Path, new: Path, *flags: str) -> tuple[int, str]:
    """The exit code and the verdict, which is the output's last line (a CI step's `tail -1`)."""
    code = main(["report", f"base={base}", f"new={new}", "--gate", "--resamples", "2000",
                 "--out", str(tmp_path / "gate.html"), *flags])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    lines = captured.out.splitlines()
    assert [line for line in lines if line.startswith("gate: ")] == lines[-1:]
    assert lines[-3:-1] == [f"Report: {tmp_path / 'gate.html'}", f"Figures: {tmp_path / 'gate.json'}"]
    return code, lines[-1]


def test_identical_runs_pass(template: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mixed = {"0": "1101", "3": "0000", "7": "0110", "12": "1000"}
    base = constructed(template, tmp_path / "base.json", mixed)
    code, line = gate(capsys, tmp_path, base, constructed(template, tmp_path / "new.json", mixed))
    assert code == 0
    assert line.startswith("gate: pass: new is not worse than base beyond noise (airline: no regression beyond "
                           "noise: average reward +0.0 points; paired permutation over 20 tasks p = 1, McNemar 0 "
                           "lost vs 0 gained of 80 task x trial pairs p = 1 ")
    report = json.loads((tmp_path / "gate.json").read_text())
    assert report["gate"]["regression"] is False and report["comparisons"][0]["flips"] == []


def test_a_real_regression_fails(template: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """8 of 20 tasks now fail every trial: 40 points lost, far beyond noise."""
    base = constructed(template, tmp_path / "base.json", {})
    new = constructed(template, tmp_path / "new.json", dict.fromkeys(TASKS[:8], "0000"))
    code, line = gate(capsys, tmp_path, base, new)
    assert code == 1
    assert line.startswith("gate: FAIL: new is worse than base (airline: worse beyond noise: average reward -40.0 "
                           "points; paired permutation over 20 tasks p = 0.00391, McNemar 32 lost vs 0 gained of 80 "
                           "task x trial pairs p = ")
    assert line.endswith("(one-sided, normal approximation, continuity-corrected); alpha 0.05 (each test at 0.025), "
                         "min effect 0 points)")
    report = json.loads((tmp_path / "gate.json").read_text())
    assert [row["task_id"] for row in report["comparisons"][0]["flips"]] == TASKS[:8]
    page = (tmp_path / "gate.html").read_text()
    assert '<p class="gate fail">gate: FAIL: new is worse than base' in page

    code, line = gate(capsys, tmp_path, base, new, "--min-effect", "50")
    assert code == 0
    assert line.startswith("gate: pass: new is worse than base, but by less than the min effect (50 points) "
                           "(airline: worse, but by less than the min effect: average reward -40.0 points; ")
    verdict = json.loads((tmp_path / "gate.json").read_text())["gate"]
    assert [d["verdict"] for d in verdict["domains"]] == ["worse, but by less than the min effect"]


def test_noise_passes(template: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A few verdicts flip each way, as between two runs of one agent: no regression."""
    base = constructed(template, tmp_path / "base.json", {"0": "1011", "1": "1110", "2": "0111", "5": "1101"})
    new = constructed(template, tmp_path / "new.json", {"0": "1111", "1": "1100", "2": "0101", "5": "1101",
                                                        "9": "1011", "14": "0111"})
    code, line = gate(capsys, tmp_path, base, new)
    assert code == 0
    assert line.startswith("gate: pass: new is not worse than base beyond noise (airline: no regression beyond noise: "
                           "average reward -3.8 points; paired permutation over 20 tasks p = ")
    assert "McNemar 4 lost vs 1 gained of 80 task x trial pairs p = 0.188 (one-sided, exact binomial)" in line


def test_runs_with_other_trial_counts_are_refused_unless_asked(template: dict[str, Any], tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """3 trials against 1: refused; with --unequal-trials judged, and the verdict says how the trials were paired."""
    base = constructed(template, tmp_path / "base.json", {}, trials=3)
    new = constructed(template, tmp_path / "new.json", dict.fromkeys(TASKS[:8], "0"), trials=1)
    assert main(["report", f"base={base}", f"new={new}", "--gate", "--out", str(tmp_path / "refused.html")]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        "error: --gate: base and new ran different trials per task in airline (base 3, new 1); run both with the "
        "same --num-trials, or pass --unequal-trials to pair trial i with trial i over the fewer"]
    assert captured.out == "" and not (tmp_path / "refused.html").exists()

    code, line = gate(capsys, tmp_path, base, new, "--unequal-trials")
    assert code == 1
    assert line.startswith("gate: FAIL: new is worse than base (airline: worse beyond noise: average reward -40.0 "
                           "points; paired permutation over 20 tasks p = 0.00391, McNemar 8 lost vs 0 gained of 20 "
                           "task x trial pairs p = 0.00391 (one-sided, exact binomial)")
    assert line.endswith("min effect 0 points; trials per task 3 (base) vs 1 (new): McNemar paired trial i with "
                         "trial i over the first 1, the permutation test compared per-task means)")
    verdict = json.loads((tmp_path / "gate.json").read_text())["gate"]
    assert verdict["domains"][0]["trials"] == {"base": 3, "new": 1}


def test_runs_on_other_tasks_or_more_runs_are_refused(template: dict[str, Any], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    base = constructed(template, tmp_path / "base.json", {})
    fewer = json.loads(base.read_text())
    fewer["simulations"] = [s for s in fewer["simulations"] if s["task_id"] != "19"]
    (tmp_path / "fewer.json").write_text(json.dumps(fewer))
    for arguments, expected in (
        ([f"base={base}", f"new={tmp_path / 'fewer.json'}"],
         "error: runs on different task sets in airline: base and new differ in 1 tasks (e.g. 19); "
         "compare runs on the same tasks"),
        ([str(base), str(base), str(base)],
         "error: --gate compares two runs, base then new; got 3: tau2-a2a report BASE.json NEW.json --gate"),
        ([str(base), str(base), "--alpha", "1.5"], "error: --alpha must be between 0 and 1 (e.g. 0.05), got 1.5"),
    ):
        assert main(["report", *arguments, "--gate", "--out", str(tmp_path / "refused.html")]) == 2
        captured = capsys.readouterr()
        assert captured.err.splitlines() == [expected] and captured.out == ""
        assert not (tmp_path / "refused.html").exists()
