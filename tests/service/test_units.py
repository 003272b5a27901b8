"""The service's parts without servers: target policy, argument checks, metrics, card, vault."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from a2a.helpers import new_data_part, new_text_part
from a2a.types import Message, Role
from google.genai import types
from google.protobuf.json_format import MessageToDict

from tau2_a2a.client.targets import TargetPolicy, TargetRefused
from tau2_a2a.protocol.cards import card_json
from tau2_a2a.protocol.hosting import free_port
from tau2_a2a.service import summary
from tau2_a2a.service.jobs.child import ChildOptions
from tau2_a2a.service.jobs.database import Database, StoreError
from tau2_a2a.service.jobs.errors import EvaluationError
from tau2_a2a.service.jobs.limits import Limits
from tau2_a2a.service.jobs.manager import EvaluationManager
from tau2_a2a.service.public_card import ADK_BINDINGS, service_card
from tau2_a2a.service.tools import EvaluationTools, ToolError
from tau2_a2a.service.vault import TokenVault, scrub_a2a_message, scrub_genai_content
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, UPSTREAM
from tests.support.distributions import DOMAIN_LIST, DOMAINS, structured, with_installed_tau2
from tests.support.service import child_given

REPO = Path(__file__).resolve().parents[2]


def fake_resolver(table: dict[str, list[str]]):
    def resolve(host: str):
        try:
            return [ipaddress.ip_address(host)]
        except ValueError:
            return [ipaddress.ip_address(a) for a in table[host]]
    return resolve


RESOLVER = fake_resolver({"agents.example.com": ["203.0.113.7"], "evil.example.net": ["169.254.169.254"],
                          "inside.corp": ["10.1.2.3"], "localhost": ["127.0.0.1", "::1"]})


@pytest.mark.parametrize("endpoint, words", [
    ("http://169.254.169.254/latest", "169.254.0.0/16"),
    ("http://evil.example.net:8080", "resolves to 169.254.169.254"),
    ("http://metadata.google.internal/computeMetadata", "cloud metadata service"),
    ("http://100.100.100.200/", "100.100.100.200/32"),
    ("http://[fd00:ec2::254]/", "fd00:ec2::254/128"),
    ("http://[fe80::1]:9000", "fe80::/10"),
    ("http://[::ffff:169.254.169.254]/", "169.254.0.0/16"),
])
def test_link_local_and_metadata_targets_are_always_refused(endpoint: str, words: str) -> None:
    for policy in (TargetPolicy(resolver=RESOLVER),
                   TargetPolicy.from_entries(["0.0.0.0/0", "::/0", "*.example.net"], resolver=RESOLVER)):
        with pytest.raises(TargetRefused, match="refused") as refused:
            policy.check(endpoint)
        assert words in str(refused.value)


def test_allow_list_of_hosts_wildcards_and_networks() -> None:
    policy = TargetPolicy.from_entries(["localhost", "*.example.com", "10.0.0.0/8"], resolver=RESOLVER)
    assert policy.check("http://localhost:9000/") == "http://localhost:9000"
    assert policy.check("https://agents.example.com") == "https://agents.example.com"
    assert policy.check("http://inside.corp:1") == "http://inside.corp:1"
    with pytest.raises(TargetRefused) as refused:
        policy.check("http://192.0.2.1:9000")
    assert str(refused.value) == (
        "agent_endpoint 'http://192.0.2.1:9000' is refused: 192.0.2.1 is a reserved address, and the allowed "
        "targets (localhost,*.example.com,10.0.0.0/8) do not include it. To allow it: --a2a-allowed-targets "
        "localhost,*.example.com,10.0.0.0/8,192.0.2.1")
    assert TargetPolicy(resolver=RESOLVER).check("http://192.0.2.1:9000") == "http://192.0.2.1:9000"


def test_malformed_endpoint_and_allow_list_entries_get_clear_errors() -> None:
    with pytest.raises(ValueError, match=r"agent_endpoint 'ftp://x' is not an http\(s\) URL"):
        TargetPolicy(resolver=RESOLVER).check("ftp://x")
    with pytest.raises(ValueError, match="neither a host name"):
        TargetPolicy.from_entries(["http://a/b"])


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EvaluationTools]:
    manager = EvaluationManager(tmp_path_factory.mktemp("units"), Limits(max_simulations=20, max_concurrency=4))
    yield EvaluationTools(manager.start(), TargetPolicy(resolver=RESOLVER))
    manager.close()


GOOD = {"domain": "airline", "agent_endpoint": "http://127.0.0.1:9100", "user": "scripted_user"}


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


def test_metrics_pass_hat_k_and_per_trial_rewards() -> None:
    def sim(task: str, trial: int, reward: float, cost=0.5):
        return {"task_id": task, "trial": trial, "reward_info": {"reward": reward},
                "termination_reason": "user_stop", "agent_cost": cost}

    simulations = [sim("a", 0, 1.0), sim("a", 1, 1.0), sim("b", 0, 1.0), sim("b", 1, 0.0, None)]
    out = summary.outcome({"simulations": simulations}, None)
    # one simulation's cost not reported: the average is not known either (never over the others alone)
    assert out["metrics"] == {"avg_reward": 0.75, "pass_hat_k": {"1": 0.75, "2": 0.5}, "num_simulations": 4,
                              "avg_agent_cost": None}
    simulations[-1]["agent_cost"] = 0.25
    assert summary.outcome({"simulations": simulations}, None)["metrics"]["avg_agent_cost"] == 0.4375
    assert out["tasks"][1] == {"task_id": "b", "rewards": [1.0, 0.0], "avg_reward": 0.5, "trials": [
        {"trial": 0, "reward": 1.0, "termination_reason": "user_stop"},
        {"trial": 1, "reward": 0.0, "termination_reason": "user_stop"}]}
    assert summary.outcome(None, None)["metrics"]["num_simulations"] == 0


def test_card_has_one_skill_per_tool_with_schema_and_example_and_never_a_secret() -> None:
    secret = "service-secret-123"
    card = service_card("http://127.0.0.1:9200", Limits(), auth=True)
    assert [s.id for s in card.skills] == ["list_domains", "run_tau2_evaluation", "get_evaluation",
                                           "list_evaluations", "cancel_evaluation"]
    run = card.skills[1]
    schema = json.loads(run.description.split("Arguments (JSON Schema): ", 1)[1])
    assert set(schema["required"]) == {"domain", "agent_endpoint"} and "agent_auth_token" in schema["properties"]
    assert json.loads(run.examples[0])["tool"] == "run_tau2_evaluation"
    assert "RunTau2Evaluation" in run.description and "ListDomains" in card.skills[0].description
    served = json.dumps(card_json(card))
    assert secret not in served
    assert MessageToDict(card.security_schemes["bearer"]) == {"httpAuthSecurityScheme": {
        "scheme": "bearer", "description": "The service's token (tau2-a2a serve --auth-token or "
                                           "$TAU2_EVAL_AUTH_TOKEN)."}}
    assert not service_card("http://x:1", Limits(), auth=False).security_schemes


@pytest.mark.nvidia
def test_adk_agents_card_is_the_generated_card() -> None:
    committed = json.loads((REPO / "adk_agents" / "tau2_eval" / "agent.json").read_text())
    url = committed["supportedInterfaces"][0]["url"]
    assert url.endswith("/a2a/tau2_eval")
    generated = card_json(service_card(url, Limits(), http_bindings=ADK_BINDINGS))  # ADK serves JSON-RPC
    assert with_installed_tau2(committed) == structured(generated)
    if DISTRIBUTION == UPSTREAM:  # the card is generated on the default distribution: there it is the same JSON
        assert committed == generated


def test_target_token_is_moved_out_of_requests_before_anything_stores_them() -> None:
    vault = TokenVault()
    message = Message(role=Role.ROLE_USER, message_id="m", parts=[
        new_text_part("go"), new_data_part({"tool": "run_tau2_evaluation",
                                            "arguments": {"domain": "airline", "agent_auth_token": "tok-1"}})])
    scrub_a2a_message(message, vault)
    arguments = MessageToDict(message.parts[1].data)["arguments"]
    assert "tok-1" not in str(message) and set(arguments) == {"domain", "agent_auth_token_ref"}
    assert vault.take(arguments["agent_auth_token_ref"]) == "tok-1"
    assert vault.take(arguments["agent_auth_token_ref"]) is None  # one use only

    blob = b'<a2a_datapart_json>{"tool": "RunTau2Evaluation", "arguments": {"agent_auth_token": "tok-2"}}' \
           b"</a2a_datapart_json>"
    content = types.Content(role="user", parts=[types.Part(inline_data=types.Blob(mime_type="text/plain",
                                                                                  data=blob))])
    assert scrub_genai_content(content, vault)
    assert b"tok-2" not in content.parts[0].inline_data.data


def test_queue_positions_queue_limit_and_canceling(tmp_path: Path) -> None:
    """Evaluations beyond max_running wait in order; beyond max_queued they are refused.

    The evaluation processes here are stand-ins that just sleep: this is about the queue.
    """
    sleeper = tmp_path / "sleeper"
    sleeper.write_text("#!/bin/sh\nexec sleep 60\n")
    sleeper.chmod(0o755)
    children = ChildOptions(python=str(sleeper))
    manager = EvaluationManager(tmp_path / "results", Limits(max_running=1, max_queued=2), children=children).start()
    tools = EvaluationTools(manager, TargetPolicy(resolver=RESOLVER))
    try:
        first, second, third = (tools.call("run_tau2_evaluation", {**GOOD, "task_ids": [str(i)]}) for i in range(3))
        assert [r["status"] for r in (first, second, third)] == ["running", "queued", "queued"]
        assert (second["queue_position"], third["queue_position"]) == (1, 2)
        with pytest.raises(ToolError, match=r"The evaluation queue is full \(2 waiting, 1 running\)"):
            tools.call("run_tau2_evaluation", GOOD)
        assert tools.cancel_evaluation(second["evaluation_id"])["status"] == "canceled"
        assert tools.get_evaluation(third["evaluation_id"])["queue_position"] == 1
        canceled = tools.cancel_evaluation(first["evaluation_id"])
        assert canceled["status"] == "canceled" and canceled["result"]["metrics"]["num_simulations"] == 0
        assert tools.get_evaluation(third["evaluation_id"])["status"] == "running"  # its turn came
    finally:
        manager.close()
    # A service that stops leaves its running evaluation to the next one, which resumes it.
    restarted = EvaluationManager(tmp_path / "results", Limits(max_running=1, max_queued=2), children=children).start()
    try:
        again = restarted.get(third["evaluation_id"]).to_json()
        assert (again["status"], again["resumed"], again["error"]) == ("running", 1, None)
        assert restarted.get(first["evaluation_id"]).to_json()["status"] == "canceled"
    finally:
        restarted.close()
    import sqlite3

    with sqlite3.connect(tmp_path / "results" / "service.sqlite") as database:
        rows = database.execute("SELECT evaluation_id, status, record FROM tau2_eval_evaluations").fetchall()
    assert {evaluation_id: status for evaluation_id, status, _ in rows} == {
        first["evaluation_id"]: "canceled", second["evaluation_id"]: "canceled", third["evaluation_id"]: "running"}
    assert not [record for _, _, record in rows if "status" in json.loads(record)]  # kept once: the column


def test_an_evaluation_whose_process_cannot_start_fails_saying_so_and_the_queue_goes_on(tmp_path: Path) -> None:
    """A child that cannot start (here: the interpreter is missing) ends its evaluation as failed, in words a
    caller can act on and without the service's paths, instead of leaving it running with no process; the
    evaluations queued behind it are started (and end the same way), and the service keeps answering."""
    missing = tmp_path / "no-such-python"
    manager = EvaluationManager(tmp_path / "results", Limits(max_running=1, max_queued=3),
                                children=ChildOptions(python=str(missing))).start()
    tools = EvaluationTools(manager, TargetPolicy(resolver=RESOLVER))
    try:
        answers = [tools.call("run_tau2_evaluation", {**GOOD, "task_ids": [str(i)]}) for i in range(3)]
        for answer in answers:
            ended = manager.wait(answer["evaluation_id"], timeout=30).to_json()
            assert ended["status"] == "failed", ended
            assert ended["error"] == (
                "the service could not start this evaluation's process (FileNotFoundError); finished simulations, "
                "if any, are kept. Submit it again later, or ask the service's operator: its log says why.")
            assert str(missing) not in json.dumps(ended)
        assert manager.scheduler.supervisor.running() == 0
        assert [view.status.value for view in manager.list()] == ["failed"] * 3
    finally:
        manager.close()


def test_evaluations_run_below_the_service_priority(tmp_path: Path) -> None:
    """An evaluation's process runs 10 nice steps below the service (the default), in a session of its own
    whose autogroup (Linux) is lowered too: autogroup scheduling shares the CPU between sessions whatever
    their processes' nice values."""
    import os

    sleeper = tmp_path / "sleeper"
    sleeper.write_text("#!/bin/sh\nexec sleep 60\n")
    sleeper.chmod(0o755)
    with pytest.raises(EvaluationError, match="0 to 19 nice steps below the service, got 20: set --evaluation-nice"):
        ChildOptions(python=str(sleeper), nice=20)
    manager = EvaluationManager(tmp_path / "results", children=ChildOptions(python=str(sleeper))).start()
    tools = EvaluationTools(manager, TargetPolicy(resolver=RESOLVER))
    try:
        record = tools.call("run_tau2_evaluation", GOOD)
        job = manager.scheduler.supervisor.job(record["evaluation_id"])
        assert job is not None and job.child is not None
        pid = job.child.pid
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + 10)
        assert os.getsid(pid) == pid
        autogroup = Path(f"/proc/{pid}/autogroup")
        if autogroup.exists():
            assert autogroup.read_text().split()[-1] == "10"  # "/autogroup-N nice 10"
    finally:
        manager.close()


def test_a_database_that_cannot_be_used_is_named_without_its_password() -> None:
    port = free_port()
    with pytest.raises(StoreError) as refused:
        Database(f"postgresql://tau2:s3cret-pw@127.0.0.1:{port}/evaluations").open()
    message = str(refused.value)
    assert message.startswith(f"Cannot use the database postgresql://tau2:***@127.0.0.1:{port}/evaluations: "
                              "OperationalError: ")
    assert message.endswith("Check that it runs and the URL is right.") and "s3cret-pw" not in message
    with pytest.raises(StoreError, match=r"^--database 'mysql://db/x' is neither a SQLite file nor a "
                                         r"postgresql:// URL\.$"):
        Database("mysql://db/x")


def test_an_evaluations_end_is_read_from_its_runs_outcome_file_and_said_in_the_services_words(tmp_path: Path) -> None:
    from tau2_a2a.runner.outcome_file import Failure, FailureKind, RunEnd, RunStatus, words_of, write_outcome
    from tau2_a2a.service.jobs.directory import outcome_file, results_file
    from tau2_a2a.service.jobs.evaluation import Status
    from tau2_a2a.service.jobs.outcome import Ending, ending

    def ended_with(message: str, kind: FailureKind = FailureKind.AGENT_AUTH, code: int = 2) -> None:
        write_outcome(outcome_file(tmp_path), RunEnd(RunStatus.FAILED, code,
                                                     failure=Failure(kind, message, words_of(message))))

    ended_with("The agent at http://a refused our credentials mid-run (HTTP 401), so the run stopped; its 3 "
               "finished simulations are kept in /r.json. Pass a valid bearer token with --a2a-auth-token or "
               "TAU2_A2A_AUTH_TOKEN and re-run the same command to resume. (token s3cret-1)")
    assert ending(tmp_path, 2, canceled=False, token="s3cret-1") == Ending(Status.FAILED, (
        "the evaluation process exited with code 2: The agent at http://a refused our credentials mid-run "
        "(HTTP 401), so the run stopped; its 3 finished simulations are kept in /r.json. Pass a valid bearer token "
        "with agent_auth_token and send the evaluation again. (token ***)"), ran_every_simulation=False)
    ended_with("The agent card at http://a names http://b for JSON-RPC; that URL is refused: 10.0.0.2 is a private "
               "address, and the allowed targets (public) do not include it. To allow it: --a2a-allowed-targets "
               "public,private", FailureKind.TARGET_REFUSED)
    assert ending(tmp_path, 2, canceled=False, token=None).error.endswith(
        "To allow it: --allowed-targets public,private")  # the operator's flag
    ended_with("1 of 2 simulations were not scored (...): judge down; running the same command again retries them.",
               FailureKind.UNSCORED, code=1)
    assert ending(tmp_path, 1, canceled=False, token=None).error == (
        "the evaluation process exited with code 1: 1 of 2 simulations were not scored (...): judge down; sending "
        "the evaluation again retries them.")
    assert ending(tmp_path, 1, canceled=True, token=None) == Ending(Status.CANCELED, None, False)

    write_outcome(outcome_file(tmp_path), RunEnd(RunStatus.A2A_ERRORS, 3, simulations=2, a2a_errors=1, unscored=0))
    assert ending(tmp_path, 3, canceled=False, token=None) == Ending(Status.FAILED, (  # no results file to show
        "the evaluation's run ended a2a_errors, but its results file is missing or cannot be read, so there is "
        "nothing to score; send the evaluation again."), True)
    results_file(tmp_path).parent.mkdir(exist_ok=True)  # the installed tau2's layout: maybe a run's directory
    results_file(tmp_path).write_text(json.dumps({"simulations": []}))
    assert ending(tmp_path, 3, canceled=True, token=None) == Ending(Status.COMPLETED, None, True)

    outcome_file(tmp_path).unlink()  # a child killed before its run could write how it ended
    assert ending(tmp_path, -9, canceled=False, token=None) == Ending(
        Status.FAILED, "the evaluation process was killed by SIGKILL before its run ended.", False)


def test_a_caller_names_the_model_that_prices_an_agents_tokens() -> None:
    """agent_price_model: tokens an agent reports without a cost are priced with it; a model LiteLLM does not
    price is refused in one line; none, and such turns cost "not reported"."""
    from tau2_a2a.client.targets import TargetPolicy
    from tau2_a2a.service.argument_policy import ArgumentRefused
    from tau2_a2a.service.request import RequestPolicy, check_request

    policy = RequestPolicy(targets=TargetPolicy.from_entries(("loopback",)))
    sent = {"domain": "airline", "agent_endpoint": "http://127.0.0.1:9", "task_ids": ["0"]}
    priced = check_request({**sent, "agent_price_model": "gpt-4.1-2025-04-14"}, policy)
    assert priced.run_settings(Path("/tmp/unused"), "results").a2a.price_model == "gpt-4.1-2025-04-14"
    assert check_request(sent, policy).run_settings(Path("/tmp/unused"), "results").a2a.price_model is None
    with pytest.raises(ArgumentRefused) as refused:
        check_request({**sent, "agent_price_model": "no-such-model"}, policy)
    assert str(refused.value).startswith("agent_price_model no-such-model: LiteLLM's local cost map has no price")
