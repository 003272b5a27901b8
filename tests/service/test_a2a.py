"""The evaluation service over A2A, on loopback: real servers, a2a-sdk clients, real tau2 runs."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import AgentCard, CancelTaskRequest, Message, Role, Task, TaskState
from google.protobuf.json_format import MessageToDict

from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
from tau2_a2a.service.auth import BearerAuth
from tau2_a2a.service.caller import connect, request_message
from tau2_a2a.service.jobs.directory import results_file
from tau2_a2a.service.jobs.limits import Limits
from tests.support.distributions import DOMAIN_LIST, DOMAINS
from tests.support.service import ask, call_tool, result_data, result_text, start_service, stream, wait_for_task
from tests.support.waiting import until

RUN = "run_tau2_evaluation"


def oracle_run(endpoint: str, **arguments: Any) -> dict[str, Any]:
    return {"domain": "airline", "agent_endpoint": endpoint, "user": "scripted_user", "user_llm": "scripted",
            **arguments}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundServer]:
    server = start_service(tmp_path_factory.mktemp("service"), limits=Limits(max_running=4))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def slow_oracle() -> Iterator[str]:
    """The oracle, waiting 0.3 s before each reply: evaluations last long enough to watch."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with BackgroundServer(a2a_app(OracleExecutor(delay=0.3), oracle_card(url)), port=port):
        yield url


@pytest.fixture(scope="module")
def acceptance(service: BackgroundServer, oracle_url: str) -> Any:
    """An a2a-sdk client asks the service to evaluate the oracle on 5 airline tasks (blocking)."""
    return asyncio.run(ask(service.url, RUN, oracle_run(oracle_url, num_tasks=5)))


@pytest.mark.nvidia  # the evaluation's process runs the tau2 installed
def test_evaluating_the_oracle_on_5_airline_tasks_scores_1(acceptance: Any) -> None:
    assert acceptance.status.state == TaskState.TASK_STATE_COMPLETED
    assert len(acceptance.artifacts) == 1
    data = result_data(acceptance)
    assert data["status"] == "completed" and data["domain"] == "airline"
    assert data["evaluation_id"].startswith("ev-")
    assert data["result"]["metrics"] == {"avg_reward": 1.0, "pass_hat_k": {"1": 1.0}, "num_simulations": 5,
                                         "avg_agent_cost": None}  # the oracle reports no usage: not reported
    assert data["result"]["cost_per_conversation"] == {"agent": None, "user": 0.0, "judge": 0.0, "total": None}
    assert [(t["task_id"], t["rewards"], [x["termination_reason"] for x in t["trials"]])
            for t in data["result"]["tasks"]] == [(str(i), [1.0], ["user_stop"]) for i in range(5)]
    protocol = data["result"]["protocol_metrics"]
    assert protocol["simulations"] == 5 and protocol["failed_requests"] == 0 and protocol["requests"] >= 5
    text = result_text(acceptance)
    assert f"Evaluation {data['evaluation_id']} of " in text and ": completed." in text
    assert "5 of 5 simulations: average reward 1.000; pass^1 1.000; average agent cost not reported." in text
    assert ("Average cost per conversation: agent not reported, user $0.0000, judge $0.0000, total not reported."
            in text)
    assert "Rewards by task: 0: 1; 1: 1; 2: 1; 3: 1; 4: 1." in text
    progress = [m for m in acceptance.history if "Progress:" in " ".join(p.text for p in m.parts)]
    assert progress, "the task's history holds the progress updates"


@pytest.mark.nvidia
async def test_list_domains_needs_no_model(service: BackgroundServer) -> None:
    for name in ("list_domains", "ListDomains"):
        data = await call_tool(service.url, name)
        domains = {d["domain"]: d for d in data["domains"]}
        assert list(domains) == DOMAINS
        assert domains["airline"]["task_count"] == 50 and "book_reservation" in domains["airline"]["tools"]


@pytest.mark.parametrize("tool, arguments, expected", [
    ("evaluate", {}, ("Unknown tool 'evaluate'. Tools: list_domains, run_tau2_evaluation, get_evaluation, "
                     "list_evaluations, cancel_evaluation;")),
    (RUN, {"domain": "banking", "agent_endpoint": "http://127.0.0.1:1"},
     f"Unknown domain 'banking'. Accepted domains: {DOMAIN_LIST}."),
    (RUN, {"domain": "airline", "agent_endpoint": "127.0.0.1:9100"}, ("agent_endpoint '127.0.0.1:9100' is not "
                                                                      "an http(s) URL.")),
    (RUN, {"domain": "airline", "agent_endpoint": "http://127.0.0.1:1", "num_trials": -1},
     "num_trials must be at least 1, got -1."),
    ("get_evaluation", {}, "get_evaluation needs argument(s) evaluation_id."),
])
async def test_bad_arguments_fail_the_task_with_a_clear_error(service: BackgroundServer, tool: str,
                                                              arguments: dict, expected: str) -> None:
    task = await ask(service.url, tool, arguments)
    assert task.status.state == TaskState.TASK_STATE_FAILED
    message = " ".join(p.text for p in task.status.message.parts)
    assert message.startswith(expected), message
    assert "Traceback" not in message


async def test_a_data_part_that_is_no_request_gets_the_expected_form(service: BackgroundServer) -> None:
    client, http = await connect(service.url)
    try:
        from a2a.helpers import new_data_part
        from a2a.types import SendMessageRequest

        message = request_message(text="hi")
        message.parts.append(new_data_part({"domain": "airline"}))
        task = [e async for e in client.send_message(SendMessageRequest(message=message))][-1].task
    finally:
        await http.aclose()
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert task.status.message.parts[0].text == ('A data part must be {"tool": "<name>", "arguments": {...}}; '
                                                 'got domain.')


async def test_text_without_a_model_explains_the_structured_form(service: BackgroundServer) -> None:
    task = await ask(service.url, text="Please evaluate my agent at http://127.0.0.1:9100")
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    text = result_text(task)
    assert "No language model is configured here, so send a structured request" in text
    assert 'Example: {"tool": "run_tau2_evaluation", "arguments": {"domain": "airline"' in text
    assert '"agent_endpoint": "http://127.0.0.1:9100", "user": "scripted_user", "num_tasks": 5}}' in text
    assert '{"participants": {' in text  # the assessment form is named too


async def test_a_follow_up_in_the_same_context_shows_the_results(service: BackgroundServer, acceptance: Any) -> None:
    evaluation_id = result_data(acceptance)["evaluation_id"]
    task = await ask(service.url, text="show me the results", context_id=acceptance.context_id)
    assert task.context_id == acceptance.context_id
    data = result_data(task)
    assert data["evaluation_id"] == evaluation_id and data["result"]["metrics"]["avg_reward"] == 1.0
    other = await ask(service.url, text="show me the results")
    assert "send a structured request" in result_text(other)


async def test_an_a2a_0_3_client_works(service: BackgroundServer, acceptance: Any) -> None:
    methods: list[str] = []

    async def record(request: httpx.Request) -> None:
        if request.method == "POST":
            methods.append(json.loads(request.content)["method"])

    async with httpx.AsyncClient(timeout=120, event_hooks={"request": [record]}) as http:
        card = AgentCard()
        card.CopyFrom(service.app.state.card)
        card.supported_interfaces[0].protocol_version = "0.3"
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        from a2a.types import SendMessageRequest

        evaluation_id = result_data(acceptance)["evaluation_id"]
        for tool, arguments in (("list_domains", {}), ("get_evaluation", {"evaluation_id": evaluation_id})):
            request = SendMessageRequest(message=request_message(tool, arguments))
            events = [e async for e in client.send_message(request)]
            reply = events[-1].message  # a read-only call: a Message
            assert reply.role == Role.ROLE_AGENT
        assert result_data(reply)["result"]["metrics"]["avg_reward"] == 1.0
    assert methods == ["message/send", "message/send"]


async def test_a_read_only_call_is_answered_with_a_message_and_keeps_no_task(
        service: BackgroundServer, acceptance: Any) -> None:
    tasks_before = _stored_tasks(service)
    evaluation_id = result_data(acceptance)["evaluation_id"]
    for tool, arguments in (("list_domains", {}), ("ListDomains", {}), ("list_evaluations", {}),
                            ("get_evaluation", {"evaluation_id": evaluation_id})):
        reply = await ask(service.url, tool, arguments)
        assert isinstance(reply, Message), tool
        assert result_text(reply) and result_data(reply)
    assert result_data(reply)["result"] == result_data(acceptance)["result"]
    streamed = await stream(service.url, "get_evaluation", {"evaluation_id": evaluation_id})
    assert [e.WhichOneof("payload") for e in streamed] == ["message"]
    assert _stored_tasks(service) == tasks_before


async def test_a_read_only_call_in_a_context_or_that_fails_gets_a_task(service: BackgroundServer,
                                                                        acceptance: Any) -> None:
    evaluation_id = result_data(acceptance)["evaluation_id"]
    # In a conversation it goes to the agent, which remembers the evaluation for follow-ups.
    in_context = await ask(service.url, "get_evaluation", {"evaluation_id": evaluation_id},
                           context_id=acceptance.context_id)
    assert isinstance(in_context, Task) and in_context.status.state == TaskState.TASK_STATE_COMPLETED
    assert result_data(in_context)["evaluation_id"] == evaluation_id
    unknown = await ask(service.url, "get_evaluation", {"evaluation_id": "ev-00000000dead"})
    assert isinstance(unknown, Task) and unknown.status.state == TaskState.TASK_STATE_FAILED
    assert " ".join(p.text for p in unknown.status.message.parts).startswith("No evaluation ev-00000000dead")


def _stored_tasks(service: BackgroundServer) -> int:
    """A2A tasks in the service's SQLite database."""
    import sqlite3

    path = service.app.state.tools.manager.database.url.split(":///", 1)[1]
    with sqlite3.connect(path) as connection:
        return connection.execute("SELECT count(*) FROM tasks").fetchone()[0]


async def test_non_blocking_send_then_polling(service: BackgroundServer, oracle_url: str) -> None:
    first = await ask(service.url, RUN, oracle_run(oracle_url, task_ids=["5", "6"]), return_immediately=True)
    assert first.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    task = await wait_for_task(service.url, first.id)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    data = result_data(task)
    assert data["result"]["metrics"]["num_simulations"] == 2 and data["result"]["metrics"]["avg_reward"] == 1.0
    again = await call_tool(service.url, "get_evaluation", {"evaluation_id": data["evaluation_id"]})
    assert again["result"] == data["result"] and again["status"] == "completed"


async def test_streaming_reports_progress_then_the_artifact(service: BackgroundServer, slow_oracle: str) -> None:
    events = await stream(service.url, RUN, oracle_run(slow_oracle, task_ids=["0", "1"], max_concurrency=1))
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[0] == "task" and kinds[-2:] == ["artifact_update", "status_update"]
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    updates = []  # (status, simulations done, total) of each working update
    for event in events:
        if event.HasField("status_update") and event.status_update.status.HasField("message"):
            assert event.status_update.status.state == TaskState.TASK_STATE_WORKING
            data = result_data(event.status_update.status.message)
            progress = data["progress"]
            updates.append((data["status"], progress["simulations_done"], progress["simulations_total"]))
    running = [u for u in updates if u[0] == "running"]
    assert running[0] == ("running", 0, 2) and ("running", 1, 2) in running and running == sorted(running)
    assert updates[-1] == ("completed", 2, 2)  # the final event: it becomes the artifact
    artifact = MessageToDict(events[-2].artifact_update.artifact)
    final = next(p["data"] for p in artifact["parts"] if "data" in p)
    assert final["result"]["metrics"]["avg_reward"] == 1.0 and final["result"]["metrics"]["num_simulations"] == 2


async def test_cancel_stops_the_evaluation_and_keeps_finished_simulations(
        tmp_path: Path, slow_oracle: str) -> None:
    server = start_service(tmp_path, limits=Limits(max_running=1))
    try:
        url = server.url
        first = await ask(url, RUN, oracle_run(slow_oracle, num_tasks=20, max_concurrency=1),  # still running when canceled
                          return_immediately=True)
        second = await ask(url, RUN, oracle_run(slow_oracle, num_tasks=2), return_immediately=True)
        async def by_status() -> dict[str, Any]:
            return {e["status"]: e for e in (await call_tool(url, "list_evaluations"))["evaluations"]}

        listed = await until(by_status, lambda found: {"running", "queued"} <= set(found),
                             "one evaluation running and one queued")
        running, queued = listed["running"], listed["queued"]
        assert queued["queue_position"] == 1
        watched = {"evaluation_id": running["evaluation_id"]}
        await until(lambda: call_tool(url, "get_evaluation", watched),
                    lambda record: record["progress"]["simulations_done"] >= 1, "a first finished simulation")

        client, http = await connect(url)
        canceled = await client.cancel_task(CancelTaskRequest(id=first.id))
        await http.aclose()
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        record = await until(lambda: call_tool(url, "get_evaluation", watched),
                             lambda record: record["status"] != "running", "the canceled evaluation to stop")
        assert record["status"] == "canceled"
        done = record["result"]["metrics"]["num_simulations"]
        assert 1 <= done < 20 and record["result"]["metrics"]["avg_reward"] == 1.0
        assert record["result"]["protocol_metrics"]["simulations"] == done
        on_disk = json.loads(results_file(tmp_path / running["evaluation_id"]).read_text())
        assert len(on_disk["simulations"]) == done

        stopped = await call_tool(url, "cancel_evaluation", {"evaluation_id": queued["evaluation_id"]})
        assert stopped["status"] == "canceled"
        task = await wait_for_task(url, second.id)
        assert result_data(task)["status"] == "canceled"
        assert "Evaluation " + queued["evaluation_id"] in result_text(task)
    finally:
        server.stop()


async def test_four_concurrent_evaluations_are_isolated(service: BackgroundServer, oracle_url: str) -> None:
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    service_log = logging.getLogger("tau2_a2a.service")
    service_log.addHandler(handler)
    service_log.setLevel(logging.INFO)
    try:
        task_sets = [["10"], ["11", "12"], ["13"], ["14", "15", "16"]]
        tasks = await asyncio.gather(*(ask(service.url, RUN, oracle_run(oracle_url, task_ids=ids))
                                       for ids in task_sets))
    finally:
        service_log.removeHandler(handler)
    datas = [result_data(task) for task in tasks]
    assert len({d["evaluation_id"] for d in datas}) == 4 and len({t.context_id for t in tasks}) == 4
    results_root = service.app.state.tools.manager.root
    for ids, data in zip(task_sets, datas):
        assert [t["task_id"] for t in data["result"]["tasks"]] == ids
        assert data["result"]["metrics"]["num_simulations"] == len(ids) == data["total_simulations"]
        assert data["result"]["metrics"]["avg_reward"] == 1.0
        assert data["result"]["protocol_metrics"]["simulations"] == len(ids)
        saved = json.loads(results_file(results_root / data["evaluation_id"]).read_text())
        assert sorted(s["task_id"] for s in saved["simulations"]) == ids
    finished = {r.getMessage() for r in records}
    assert {f"evaluation {d['evaluation_id']} completed" for d in datas} <= finished
    # They ran at the same time: each started before any of them finished.
    assert max(d["started_at"] for d in datas) < min(d["finished_at"] for d in datas)


async def test_a_failed_evaluation_fails_the_task_with_its_reason(service: BackgroundServer) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    task = await ask(service.url, RUN, oracle_run(nobody, task_ids=["0"]))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    text = task.status.message.parts[0].text
    assert ": failed.\nError: the evaluation process exited with code 2: " in text
    error = text.split("Error: ", 1)[1]
    assert nobody in error and "cannot connect" in error  # the child's own `error:` line
    assert "No simulation finished." in text


async def test_target_refusal(service: BackgroundServer, tmp_path: Path, oracle_url: str) -> None:
    for endpoint, reason in (("http://169.254.169.254/latest", "link-local and cloud metadata"),
                             ("http://metadata.google.internal", "cloud metadata service"),
                             ("http://[fe80::1]:8080", "fe80::/10")):
        task = await ask(service.url, RUN, oracle_run(endpoint))
        assert task.status.state == TaskState.TASK_STATE_FAILED
        text = task.status.message.parts[0].text
        assert text.startswith(f"agent_endpoint {endpoint!r} is refused") and reason in text
    restricted = start_service(tmp_path, allowed_targets=("10.0.0.0/8", "*.agents.example"))
    try:
        task = await ask(restricted.url, RUN, oracle_run(oracle_url))
        assert task.status.message.parts[0].text == (
            f"agent_endpoint {oracle_url!r} is refused: 127.0.0.1 is a loopback address, and the allowed targets "
            "(10.0.0.0/8,*.agents.example) do not include it. To allow it: --allowed-targets "
            "10.0.0.0/8,*.agents.example,loopback")
    finally:
        restricted.stop()


async def test_records_of_the_file_layout_are_imported_once_and_an_unfinished_one_resumes(
        service: BackgroundServer, acceptance: Any, tmp_path: Path) -> None:
    """A results directory of the earlier file layout: one finished record, one left running."""
    evaluation = service.app.state.tools.manager.get(result_data(acceptance)["evaluation_id"]).to_json()
    records = {
        "ev-00000000abcd": {"status": "running", "result": None, "finished_at": None},
        "ev-00000000beef": {"status": "completed", "result": evaluation["result"],
                            "finished_at": "2026-01-01T00:01:00+00:00"},
    }
    for evaluation_id, fields in records.items():
        (tmp_path / evaluation_id).mkdir()
        (tmp_path / evaluation_id / "evaluation.json").write_text(json.dumps({
            **{k: evaluation[k] for k in ("request", "total_simulations", "domain", "agent_endpoint")},
            "evaluation_id": evaluation_id, "agent_auth": False, "created_at": "2026-01-01T00:00:00+00:00",
            "started_at": "2026-01-01T00:00:00+00:00", "error": None, **fields}))
    restarted = start_service(tmp_path)
    try:
        finished = await call_tool(restarted.url, "get_evaluation", {"evaluation_id": "ev-00000000beef"})
        assert finished["status"] == "completed" and finished["result"] == evaluation["result"]
        resumed = (await asyncio.to_thread(restarted.app.state.tools.manager.wait, "ev-00000000abcd", 300)).to_json()
        assert (resumed["status"], resumed["resumed"]) == ("completed", 1)
        assert resumed["result"]["metrics"]["avg_reward"] == 1.0
        listed = await call_tool(restarted.url, "list_evaluations")
        assert {"ev-00000000abcd", "ev-00000000beef"} <= {e["evaluation_id"] for e in listed["evaluations"]}
    finally:
        restarted.stop()
    assert not list(tmp_path.glob("ev-*/evaluation.json"))  # imported once: the database holds them now
    again = start_service(tmp_path)
    try:
        assert len((await call_tool(again.url, "list_evaluations"))["evaluations"]) == 2
    finally:
        again.stop()


async def test_bearer_auth_and_the_target_token_never_leaks(tmp_path: Path) -> None:
    service_token, target_token = "svc-token-5f1e2d", "target-token-9a8b7c"
    port = free_port()
    target = f"http://127.0.0.1:{port}"
    protected = BearerAuth(a2a_app(OracleExecutor(), oracle_card(target)), target_token)
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger().addHandler(handler)
    server = start_service(tmp_path, auth_token=service_token)
    try:
        with BackgroundServer(protected, port=port):
            async with httpx.AsyncClient(timeout=30) as http:
                card = await http.get(f"{server.url}/.well-known/agent-card.json")
                assert card.status_code == 200 and service_token not in card.text
                assert card.json()["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"
                body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}
                for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": service_token}):
                    refused = await http.post(server.url, json=body, headers={"A2A-Version": "1.0", **headers})
                    assert refused.status_code == 401
                    assert "Authorization: Bearer <token>" in refused.json()["error"]

            assert (await call_tool(server.url, "list_domains", token=service_token))["domains"]
            task = await ask(server.url, RUN, oracle_run(target, task_ids=["3"], agent_auth_token=target_token),
                             token=service_token)
            assert task.status.state == TaskState.TASK_STATE_COMPLETED, result_text(task)
            data = result_data(task)
            assert data["result"]["metrics"]["avg_reward"] == 1.0 and data["agent_auth"] is True
            stored = await wait_for_task(server.url, task.id, token=service_token)
            listed = await call_tool(server.url, "list_evaluations", token=service_token)
    finally:
        server.stop()
        logging.getLogger().removeHandler(handler)
    assert target_token not in str(stored) and target_token not in json.dumps(listed)
    assert "agent_auth_token_ref" in str(stored.history[0])  # the request kept only a reference
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert target_token not in path.read_text(errors="replace"), path
            assert service_token not in path.read_text(errors="replace"), path
    assert not [r for r in records if target_token in r or service_token in r]
