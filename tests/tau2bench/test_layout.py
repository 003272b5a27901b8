"""Where a run's files are (tau2bench/run/layout.py): the installed tau2's layout for what a run writes, both
layouts for what is read, and an earlier version's file where it is."""

from __future__ import annotations

from pathlib import Path

from tau2_a2a.service.jobs.directory import results_file
from tau2_a2a.tau2bench.run.layout import (
    metrics_path,
    results_files,
    results_in,
    results_path,
    results_root,
    run_directory,
    run_name,
    shown,
)
from tau2_a2a.tau2bench.seam.distribution import DATA_DIR, DISTRIBUTION, NVIDIA


def test_a_run_is_placed_as_the_installed_tau2_run_places_it(tmp_path: Path) -> None:
    if DISTRIBUTION == NVIDIA:
        assert results_path("run", tmp_path) == tmp_path / "run.json"
        assert metrics_path(results_path("run", tmp_path)) == tmp_path / "run_a2a_metrics.json"
    else:
        assert results_path("run", tmp_path) == tmp_path / "run" / "results.json"
        assert metrics_path(results_path("run", tmp_path)) == tmp_path / "run" / "results_a2a_metrics.json"
    assert results_root() == DATA_DIR / "simulations" and results_root(str(tmp_path)) == tmp_path
    assert results_path("run").parent in (DATA_DIR / "simulations", DATA_DIR / "simulations" / "run")
    assert results_file(tmp_path / "ev-0123456789ab") == results_path("results", tmp_path / "ev-0123456789ab")


def test_an_earlier_versions_file_is_found_where_it_is_until_the_run_has_its_own(tmp_path: Path) -> None:
    earlier = tmp_path / "run.json"
    earlier.write_text("{}")
    assert results_path("run", tmp_path) == earlier
    if DISTRIBUTION != NVIDIA:
        (tmp_path / "run").mkdir()
        assert results_path("run", tmp_path) == earlier  # a directory alone (logs) does not make the run
        (tmp_path / "run" / "results.json").write_text("{}")
        assert results_path("run", tmp_path) == tmp_path / "run" / "results.json"


def test_names_of_either_layout(tmp_path: Path) -> None:
    own = tmp_path / "named" / "results.json"
    one_file = tmp_path / "named.json"
    assert (run_name(own), run_name(one_file)) == ("named", "named")
    assert (shown(own), shown(one_file)) == ("named/results.json", "named.json")
    assert (run_directory(own), run_directory(one_file)) == (tmp_path / "named", tmp_path / "named")
    assert (metrics_path(own), metrics_path(one_file)) == (tmp_path / "named" / "results_a2a_metrics.json",
                                                           tmp_path / "named_a2a_metrics.json")


def test_readers_take_a_results_file_a_runs_directory_or_a_folder_of_either(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    for name in ("a/results.json", "a/results_a2a_metrics.json", "b.json", "b_a2a_metrics.json", "b_results.json",
                 "b_termination_summary.json"):
        (tmp_path / name).write_text("{}")
    assert results_in(tmp_path / "a") == tmp_path / "a" / "results.json"
    assert results_in(tmp_path / "b.json") == tmp_path / "b.json"
    assert results_files(tmp_path) == [tmp_path / "a" / "results.json", tmp_path / "b.json"]
    assert results_files(tmp_path / "a") == [tmp_path / "a" / "results.json"]
