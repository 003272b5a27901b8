"""On upstream tau2-bench v1.0.1 (Python 3.12+): the oracle over A2A scores what upstream's own run scores.

The native arm runs upstream's stock environments (no database cache), the A2A
arm tau2-a2a's cached ones with every fast database hash checked against
upstream's own; both use the scripted user. Also: a results file and metrics
file naming their tau2 and task set. bench/oracle_fidelity.py runs whole
domains. `demo`, resume and Ctrl-C run on upstream in tests/cli and
tests/runner, which the default test pass runs on upstream v1.0.1.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tau2_a2a.tau2bench.run.fidelity import trajectory_differences
from tau2_a2a.tau2bench.run.provenance import PROVENANCE_KEY, task_set_sha256
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, UPSTREAM, VERSION, Results
from tau2_a2a.tau2bench.speed.environments import VERIFY_ENV, environments
from tests.support.runs import run_a2a, run_native_oracle, telecom_sample

pytestmark = [
    pytest.mark.upstream,
    pytest.mark.skipif(DISTRIBUTION != UPSTREAM, reason=f"needs upstream tau2-bench; {DISTRIBUTION} is installed"),
]


SAMPLES = {
    "airline": ["0", "5", "11", "23", "38", "49"],
    # retail: tasks scored offline (upstream has 40 whose score needs an LLM judge of NL assertions)
    "retail": ["0", "1", "7", "42", "77", "100"],
    "telecom": telecom_sample("telecom"),
    "banking_knowledge": [
        "task_001",  # the user applies with a tool of its own; scored on the database
        "task_031",  # the agent gives the user a discoverable tool the user calls, unlocks and calls one itself
        "task_034",  # eight user actions, then the agent's transfer; scored on actions; its instructions name
                     # ###OUT-OF-SCOPE###, which ends a conversation wherever a user says it
        "task_061",  # discoverable tools of both kinds; its instructions end with ###STOP###
    ],
    "telecom-workflow": telecom_sample("telecom-workflow"),
}
TRIALS = {"banking_knowledge": 1, "telecom-workflow": 1}  # the others: 2
OFFLINE_RETRIEVAL = {"banking_knowledge": {"retrieval_config": "bm25_grep"}}  # BM25 and grep: no embeddings


@pytest.mark.parametrize("domain", sorted(SAMPLES))
def test_oracle_over_a2a_scores_what_upstream_scores(domain: str, oracle_url: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    task_ids, trials = SAMPLES[domain], TRIALS.get(domain, 2)
    settings = {"task_ids": task_ids, "num_trials": trials, "max_concurrency": 3, **OFFLINE_RETRIEVAL.get(domain, {})}
    monkeypatch.setenv(VERIFY_ENV, "1")
    with environments(cached=False):
        native = run_native_oracle(tmp_path / "native", domain, **settings)
    over_a2a = run_a2a(oracle_url, tmp_path / "a2a", domain, **settings).results

    expected = {(task_id, trial): 1.0 for task_id in task_ids for trial in range(trials)}
    assert {(s.task_id, s.trial): s.reward_info.reward for s in native.simulations} == expected
    assert {(s.task_id, s.trial): s.reward_info.reward for s in over_a2a.simulations} == expected
    assert {s.termination_reason.value for s in over_a2a.simulations} == {"user_stop"}
    assert trajectory_differences(over_a2a, native) == []


def test_results_and_metrics_files_name_their_tau2_and_task_set(oracle_url: str, tmp_path: Path) -> None:
    outcome = run_a2a(oracle_url, tmp_path, "airline", task_ids=["0", "1"])
    expected = {"tau2_distribution": "tau2", "tau2_version": VERSION, "task_set": "airline",
                "task_set_sha256": task_set_sha256("airline")}
    assert re.fullmatch(r"[0-9a-f]{64}", expected["task_set_sha256"])
    assert json.loads(outcome.results_path.read_text())[PROVENANCE_KEY] == expected
    assert json.loads(outcome.metrics_path.read_text())[PROVENANCE_KEY] == expected
    assert Results.load(outcome.results_path).simulations  # upstream still reads the file
