"""`tau2-a2a run` with a non-A2A agent is `tau2 run`: same config, files and output, but for the API key
tau2 copies into the results file, which tau2-a2a never leaves there, and the provenance it adds."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tau2_a2a.tau2bench.distribution import DATA_DIR, DISTRIBUTION, NVIDIA
from tau2_a2a.tau2bench.provenance import PROVENANCE_KEY

BIN = Path(sys.executable).parent
VOLATILE = {"timestamp", "start_time", "end_time", "duration", "id", "git_commit", "created"}  # created: an LLM reply's time


def _run(command: str, results_dir: Path, env: dict[str, str] | None = None) -> str:
    """`command run` on two airline tasks with mocked LLMs; `results_dir` only where the command has the flag."""
    args = [
        str(BIN / command), "run", "--domain", "airline", "--agent", "llm_agent",
        "--agent-llm", "gpt-4.1", "--agent-llm-args", '{"mock_response": "I can help with that."}',
        "--user-llm", "gpt-4.1", "--user-llm-args", '{"mock_response": "###STOP###"}',
        "--num-tasks", "2", "--max-concurrency", "1", "--save-to", "same",
    ]
    if command == "tau2-a2a" or DISTRIBUTION == NVIDIA:
        args += ["--results-dir", str(results_dir)]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})}
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _run_tau2(tmp_path: Path) -> tuple[str, dict[str, Path]]:
    """`tau2 run`, and its files by the names tau2-a2a gives them. Upstream's has no --results-dir: it writes
    <data dir>/simulations/<save_to>/results.json, so it gets a data directory of its own holding the
    installed task data."""
    if DISTRIBUTION == NVIDIA:
        folder = tmp_path / "tau2"
        out = _run("tau2", folder)
        return out, {name: folder / name for name in ("same.json", "same_results.json",
                                                       "same_termination_summary.json")}
    data = tmp_path / "tau2_data"
    data.mkdir()
    (data / "tau2").symlink_to(DATA_DIR / "tau2")
    out = _run("tau2", data, {"TAU2_DATA_DIR": str(data)})
    assert sorted(p.name for p in (data / "simulations").iterdir()) == ["same"]
    return out, {"same.json": data / "simulations" / "same" / "results.json"}


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _panels(stdout: str) -> list[str]:
    """The output without times and paths, which differ from run to run."""
    text = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+|\d+\.\d+s|/\S+", "<x>", stdout)
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def test_non_a2a_agent_runs_exactly_like_tau2_run(tmp_path: Path) -> None:
    tau2_out, tau2_files = _run_tau2(tmp_path)
    ours_out = _run("tau2-a2a", tmp_path / "ours")
    for name, path in tau2_files.items():
        theirs = json.loads(path.read_text())
        ours = json.loads((tmp_path / "ours" / name).read_text())
        if name == "same.json":  # tau2 keeps the agent's API key (here its "dummy_key"); tau2-a2a keeps no secret
            ours_args, theirs_args = ours["info"]["agent_info"]["llm_args"], theirs["info"]["agent_info"]["llm_args"]
            if DISTRIBUTION == NVIDIA:
                assert theirs_args["api_key"] == "dummy_key" and ours_args["api_key"] == "***"
                ours_args["api_key"] = theirs_args["api_key"]
            else:  # upstream has no --agent-api-key, so no key in the file
                assert "api_key" not in theirs_args and "api_key" not in ours_args
            assert ours.pop(PROVENANCE_KEY)["task_set"] == "airline" and PROVENANCE_KEY not in theirs
        assert _stable(ours) == _stable(theirs), name
    assert sorted(p.name for p in (tmp_path / "ours").iterdir()) == sorted(tau2_files)
    assert _panels(ours_out) == _panels(tau2_out)
    results = json.loads((tmp_path / "ours" / "same.json").read_text())
    assert results["info"]["agent_info"]["implementation"] == "llm_agent"
    assert len(results["simulations"]) == 2
