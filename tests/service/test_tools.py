"""The service's tools without a server: argument checks and their words, the domains listed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tau2_a2a.client.targets import TargetPolicy
from tau2_a2a.service.jobs.limits import Limits
from tau2_a2a.service.jobs.manager import EvaluationManager
from tau2_a2a.service.tools import EvaluationTools, ToolError
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, UPSTREAM
from tests.support.distributions import DOMAIN_LIST, DOMAINS
from tests.support.service import GOOD, child_given
from tests.support.targets import RESOLVER


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EvaluationTools]:
    manager = EvaluationManager(tmp_path_factory.mktemp("units"), Limits(max_simulations=20, max_concurrency=4))
    yield EvaluationTools(manager.start(), TargetPolicy(resolver=RESOLVER))
    manager.close()


@pytest.mark.parametrize("tool, arguments, message", [
    ("nope", {}, ("Unknown tool 'nope'. Tools: list_domains, run_tau2_evaluation, get_evaluation, "
                 "list_evaluations, cancel_evaluation; aliases: ListDomains (= list_domains), "
                 "RunTau2Evaluation (= run_tau2_evaluation).")),
    ("run_tau2_evaluation", {**GOOD, "domain": "bank"},
     f"Unknown domain 'bank'. Accepted domains: {DOMAIN_LIST}."),
    ("run_tau2_evaluation", {**GOOD, "num_tasks": -2}, "num_tasks must be at least 1, got -2."),
    ("run_tau2_evaluation", {**GOOD, "num_trials": 1.5}, "num_trials must be a whole number, got 1.5."),
    ("run_tau2_evaluation", {**GOOD, "max_concurrency": 9},
     "max_concurrency must be at most 4 on this service, got 9."),
    ("run_tau2_evaluation", {**GOOD, "agent_endpoint": "not a url"},
     ("agent_endpoint 'not a url' is not an http(s) URL. Pass the A2A agent's base URL, "
     "for example http://127.0.0.1:9000")),
    ("run_tau2_evaluation", {**GOOD, "task_split": "dev"},
     "Unknown task_split 'dev' for airline. Accepted splits: base, test, train."),
    ("run_tau2_evaluation", {**GOOD, "task_ids": ["0", "999"]},
     ("Unknown task_ids for airline (default split): 999. Accepted task ids: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, "
     "10, 11, ... (50 in all).")),
    ("run_tau2_evaluation", {**GOOD, "num_trials": 3},
     ("50 tasks x 3 trials = 150 simulations exceeds this service's limit of 20 per request; ask for fewer "
     "tasks (num_tasks, task_ids) or trials.")),
    ("run_tau2_evaluation", {**GOOD, "num_tasks": 2, "user_llm_args": {"api_key": "x"}},
     "user_llm_args accepts only sampling parameters; refused: api_key. Accepted: temperature, top_p, max_tokens, "
     "max_completion_tokens, seed, frequency_penalty, presence_penalty, reasoning_effort, stop (the user LLM's "
     "endpoint and keys are the service's)."),
    ("run_tau2_evaluation", {**GOOD, "user": "dummy_user"},
     "Unknown user 'dummy_user'. Accepted users: user_simulator, scripted_user."),
    ("run_tau2_evaluation", {**GOOD, "tasks": 3}, ("Unknown argument(s) for run_tau2_evaluation: tasks. Accepted "
     "arguments: domain, agent_endpoint, user_llm, user_llm_args, user, num_trials, num_tasks, task_ids, "
     "task_split, max_steps, max_concurrency, retrieval_config, agent_tools, agent_driven, agent_price_model, "
     "agent_auth_token.")),
    ("RunTau2Evaluation", {"domain": "airline"}, ('run_tau2_evaluation needs argument(s) agent_endpoint. Example: '
     '{"tool": "run_tau2_evaluation", "arguments": {"domain": "airline", "agent_endpoint": '
     '"http://127.0.0.1:9100", "user": "scripted_user", "num_tasks": 5}}')),
    ("get_evaluation", {"evaluation_id": "../../etc"}, ("evaluation_id '../../etc' is not an evaluation id: ids "
     "look like ev-0123456789ab (run_tau2_evaluation returns one; list_evaluations lists them).")),
    ("cancel_evaluation", {"evaluation_id": "ev-000000000000"},
     "No evaluation ev-000000000000 in this service. Use list_evaluations to see the known ones."),
])
def test_bad_arguments_name_the_argument_and_the_accepted_values(tools: EvaluationTools, tool: str,
                                                                 arguments: dict, message: str) -> None:
    with pytest.raises(ToolError) as error:
        tools.call(tool, arguments)
    assert str(error.value) == message


def test_arguments_as_a2a_doubles_are_accepted(tools: EvaluationTools, tmp_path: Path) -> None:
    spec = tools.check({"domain": "airline", "agent_endpoint": "http://127.0.0.1:9100", "user_llm": "scripted",
                        "user_llm_args": None, "user": "scripted_user", "num_trials": 2.0, "num_tasks": None,
                        "task_ids": [3.0, 1.0], "task_split": "base", "max_steps": 50.0, "max_concurrency": 2.0})
    assert (spec.task_ids, spec.num_trials, spec.total_simulations, spec.max_steps) == (["3", "1"], 2, 4, 50)
    given = child_given(tmp_path / "r", spec, token="s3cret-target-token")
    assert given["command"][1:] == ["-m", "tau2_a2a.runner"]  # the runner's entry point, its settings as data
    assert given["token"] is None and given["request"]["auth_token"] == "s3cret-target-token"  # stdin only
    settings = given["request"]["settings"]
    assert (settings["domain"], settings["task_ids"], settings["num_trials"], settings["max_steps"]) == (
        "airline", ["3", "1"], 2, 50)
    assert settings["ray"] is None  # its simulations in its one process: progress and cancel read its results file
    assert (settings["results_dir"], settings["save_to"]) == (str(tmp_path / "r"), "results")
    assert (given["cwd"], given["umask"]) == (str((tmp_path / "r").resolve()), 0o077)


@pytest.mark.nvidia
def test_list_domains_reports_tasks_splits_and_tools(tools: EvaluationTools) -> None:
    domains = {d["domain"]: d for d in tools.call("ListDomains")["domains"]}
    assert list(domains) == DOMAINS
    airline = domains["airline"]
    assert (airline["task_count"], airline["task_splits"]) == (50, {"train": 30, "test": 20, "base": 50})
    assert {"book_reservation", "cancel_reservation", "get_user_details"} <= set(airline["tools"])
    assert domains["retail"]["task_count"] == 114
    assert domains["telecom"]["task_count"] == 114 and domains["telecom"]["user_tools"]


@pytest.mark.upstream
@pytest.mark.skipif(DISTRIBUTION != UPSTREAM, reason=f"needs upstream tau2-bench; {DISTRIBUTION} is installed")
def test_banking_knowledge_is_listed_without_an_openai_key_with_its_default_retrievals_tools(
        tools: EvaluationTools, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its default retrieval (alltools) would embed the knowledge base with OpenAI and start a shell sandbox
    if its environment were built; the listing needs neither, and names the tools a default run offers."""
    from tau2_a2a.tau2bench.seam.distribution import domain_tool_names

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    banking = next(d for d in tools.call("list_domains")["domains"] if d["domain"] == "banking_knowledge")
    assert domain_tool_names("banking_knowledge") == (banking["tools"], banking["user_tools"])  # uncached
    assert (banking["task_count"], banking["task_splits"], banking["default_split"]) == (97, {}, None)
    assert {"KB_search_bm25", "KB_search_dense", "shell", "get_user_information_by_id",
            "unlock_discoverable_agent_tool"} <= set(banking["tools"])
    assert {"KB_search", "grep"}.isdisjoint(banking["tools"])
    assert banking["user_tools"] == ["apply_for_credit_card", "call_discoverable_user_tool",
                                     "list_discoverable_user_tools", "request_human_agent_transfer",
                                     "submit_referral", "submit_transaction"]


@pytest.mark.upstream
@pytest.mark.skipif(DISTRIBUTION != UPSTREAM, reason=f"needs upstream tau2-bench; {DISTRIBUTION} is installed")
@pytest.mark.parametrize("variant", ["no_knowledge", "bm25", "grep_only", "bm25_grep", "golden_retrieval"])
def test_banking_knowledges_unbuilt_tool_names_are_its_built_environments(variant: str) -> None:
    """The offline retrieval variants, built for real, name the tools their unbuilt toolkit classes name."""
    from tau2_a2a.tau2bench.seam.distribution import registry
    from tau2_a2a.tau2bench.seam.upstream import knowledge_tool_names

    environment = registry.get_env_constructor("banking_knowledge")(retrieval_variant=variant)
    built = (sorted(t.name for t in environment.get_tools()), sorted(t.name for t in environment.get_user_tools()))
    assert knowledge_tool_names(variant) == built
