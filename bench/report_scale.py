"""How fast `tau2-a2a report` builds, and how big its files are, at the size of a full evaluation.

Four domains x four trials of every task (airline 50, retail 114, telecom 114, and a
200-task telecom sample, about 1,900 simulations). Real trajectories first: the
oracle over A2A with the scripted user on a few tasks of each domain. They are
then cloned to the full task counts with outcomes drawn per task (seeded: some
tasks always pass, some flip between trials, some A2A errors and user stops),
so the page holds as many conversations, tool calls and A2A records as a real
run of that size. Prints the build time (reading, statistics, charts, page) and
the sizes of the HTML and JSON files, raw and gzip'd.

    .venv/bin/python bench/report_scale.py
    .venv/bin/python bench/report_scale.py --trials 4 --runs 2    # two runs side by side, compared
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import oracle_process  # noqa: E402

from tau2_a2a.client.config import A2AConfig  # noqa: E402
from tau2_a2a.compare.output import write  # noqa: E402
from tau2_a2a.protocol.hosting import free_port  # noqa: E402
from tau2_a2a.runner.run import evaluate  # noqa: E402
from tau2_a2a.runner.settings import RunSettings  # noqa: E402
from tau2_a2a.tau2bench.seam.distribution import mend_import_effects  # noqa: E402  (tau2 imported quietly)

mend_import_effects()  # this process is ours: what importing tau2 did to it is undone (see README)

SIZES = {"airline": ("airline", 50), "retail": ("retail", 114), "telecom": ("telecom", 114),
         "telecom-sample": ("telecom", 200)}


def real_runs(folder: Path, tasks: int) -> dict[str, dict]:
    """The oracle over A2A on the first `tasks` tasks of each source domain, one trial."""
    runs = {}
    with oracle_process(free_port()) as url:
        for domain in sorted({source for source, _ in SIZES.values()}):
            evaluate(RunSettings(domain=domain, a2a=A2AConfig(endpoint=url), agent_llm="oracle", agent_llm_args={},
                                 user="scripted_user", user_llm="scripted", user_llm_args={}, num_tasks=tasks,
                                 max_concurrency=2, results_dir=str(folder), save_to=domain, log_level="ERROR"))
            runs[domain] = json.loads((folder / f"{domain}.json").read_text())
    return runs


def failed(simulation: dict, rng: random.Random) -> dict:
    """The simulation turned into a failure: mostly a failed DB check, sometimes an A2A timeout."""
    simulation["reward_info"]["reward"] = 0.0
    if rng.random() < 0.2:
        simulation["termination_reason"] = "agent_error"
        last = simulation["messages"][-1]
        last["raw_data"] = {**(last.get("raw_data") or {}), "a2a": {**((last.get("raw_data") or {}).get("a2a") or {}),
                                                                      "error": "timeout"}}
        simulation["reward_info"]["reward_breakdown"] = None
    else:
        breakdown = simulation["reward_info"].get("reward_breakdown") or {"DB": 1.0}
        breakdown[next(iter(breakdown))] = 0.0
        simulation["reward_info"]["reward_breakdown"] = breakdown
    return simulation


def cloned(source: dict, name: str, tasks: int, trials: int, seed: int) -> dict:
    """A results file of `tasks` tasks x `trials` trials built from `source`'s real simulations."""
    rng = random.Random(seed)
    results = copy.deepcopy({k: v for k, v in source.items() if k != "simulations"})
    results["info"]["environment_info"]["domain_name"] = name
    results["info"]["num_trials"] = trials
    results["tasks"] = []
    results["simulations"] = []
    for index in range(tasks):
        template_task = source["tasks"][index % len(source["tasks"])]
        results["tasks"].append({**copy.deepcopy(template_task), "id": str(index)})
        template = next(s for s in source["simulations"] if s["task_id"] == template_task["id"])
        p = rng.choice([1.0, 1.0, 0.9, 0.75, 0.5, 0.25, 0.0])
        for trial in range(trials):
            simulation = copy.deepcopy(template)
            simulation.update(id=f"{name}-{index}-{trial}", task_id=str(index), trial=trial, seed=1000 + trial)
            if rng.random() >= p:
                simulation = failed(simulation, rng)
            results["simulations"].append(simulation)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--runs", type=int, default=1, help="runs side by side (each compared with the first)")
    parser.add_argument("--real-tasks", type=int, default=3, help="real oracle simulations per domain to clone")
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=None, help="keep the report here (an .html path)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        sources = real_runs(folder / "real", args.real_tasks)
        print(f"real oracle runs: {time.perf_counter() - started:.1f} s")
        arguments = []
        simulations = 0
        for run in range(args.runs):
            run_folder = folder / f"run{run}"
            run_folder.mkdir()
            for name, (source, tasks) in SIZES.items():
                results = cloned(sources[source], name, tasks, args.trials, seed=run * 100 + tasks)
                simulations += len(results["simulations"])
                (run_folder / f"{name}.json").write_text(json.dumps(results))
            arguments.append(f"run{run}={run_folder}")
        input_bytes = sum(p.stat().st_size for p in folder.glob("run*/*.json"))
        started = time.perf_counter()
        _, html_path, json_path = write(arguments, args.out or folder / "report.html", resamples=args.resamples)
        seconds = time.perf_counter() - started
        html, figures = html_path.read_bytes(), json_path.read_bytes()
        print(f"{simulations} simulations ({args.runs} run(s) x 4 domains x {args.trials} trials), "
              f"results files {input_bytes / 1e6:.1f} MB")
        print(f"report built in {seconds:.1f} s")
        print(f"HTML {len(html) / 1e6:.2f} MB ({len(gzip.compress(html)) / 1e6:.2f} MB gzip'd); "
              f"JSON {len(figures) / 1e6:.2f} MB ({len(gzip.compress(figures)) / 1e6:.2f} MB gzip'd)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
