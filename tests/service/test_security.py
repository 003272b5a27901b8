"""Attacks on the evaluation service's secrets, each against real servers on loopback.

The service runs with a known fake provider key in its environment. A capture
server stands where an attacker would put theirs: it records every request it
receives and answers as a chat endpoint would (the user ends the conversation
at once), so a key sent there would be on record.
"""

from __future__ import annotations

import json
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.types import TaskState
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
from tau2_a2a.service.argument_policy import REMOVED, scrub_arguments
from tau2_a2a.service.auth import BearerAuth
from tau2_a2a.service.jobs.directory import results_file
from tau2_a2a.service.jobs.limits import Limits
from tau2_a2a.service.tool_specs import accepted_arguments
from tau2_a2a.service.vault import TokenVault, scrub_request
from tau2_a2a.tau2bench.run.layout import metrics_path
from tests.support.service import ask, assessment_message, final_task, result_data, result_text, start_service

RUN = "run_tau2_evaluation"
PROVIDER_KEY = "sk-service-own-key-31337"
ALLOWED = ("openai/gpt-4.1", "gpt-4.1")
SAMPLING = ("temperature, top_p, max_tokens, max_completion_tokens, seed, frequency_penalty, presence_penalty, "
            "reasoning_effort, stop")


class Capture:
    """An HTTP server that keeps every request (path and headers) and answers like a chat endpoint."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.server = BackgroundServer(Starlette(routes=[
            Route("/{path:path}", self.record, methods=["GET", "POST", "PUT"])]))

    async def record(self, request: Request) -> JSONResponse:
        with self._lock:
            self.requests.append({"path": request.url.path, "headers": dict(request.headers),
                                  "body": (await request.body()).decode(errors="replace")})
        return JSONResponse({
            "id": "chatcmpl-capture", "object": "chat.completion", "created": 0, "model": "gpt-4.1",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "Thanks, bye. ###STOP###"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        })

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="module")
def provider_key() -> Iterator[str]:
    """The service's own provider key, in the environment its evaluations inherit."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
        yield PROVIDER_KEY


@pytest.fixture(scope="module")
def capture() -> Iterator[Capture]:
    server = Capture()
    server.server.start()
    yield server
    server.server.stop()


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("secure")


@pytest.fixture(scope="module")
def service(results: Path, provider_key: str) -> Iterator[BackgroundServer]:
    """A service that allows the OpenAI user LLM, at the provider's own endpoint."""
    server = start_service(results, limits=Limits(max_running=2), allowed_user_llms=ALLOWED)
    yield server
    server.stop()


def oracle_run(endpoint: str, **arguments: Any) -> dict[str, Any]:
    return {"domain": "airline", "agent_endpoint": endpoint, "user": "scripted_user", "task_ids": ["3"],
            **arguments}


def stolen(arguments: dict[str, Any]) -> dict[str, Any]:
    """A request for the LLM user simulator, with the model of the issue's reproduction."""
    return {"domain": "airline", "agent_endpoint": "http://127.0.0.1:9", "user": "user_simulator",
            "user_llm": "openai/gpt-4.1", "task_ids": ["0"], **arguments}


def refusal(task: Any) -> str:
    assert task.status.state == TaskState.TASK_STATE_FAILED, task.status
    return " ".join(part.text for part in task.status.message.parts)


def stored_bytes(root: Path) -> bytes:
    """Every byte the service keeps under its results directory (the database with its WAL, results, logs)."""
    return b"".join(path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file())


# -- the provider key -------------------------------------------------------------------------------

@pytest.mark.parametrize("llm_args, refused", [
    ({"api_base": "{capture}/v1"}, "api_base"),
    ({"base_url": "{capture}/v1"}, "base_url"),
    ({"extra_headers": {"X-Forward-To": "{capture}"}, "api_base": "{capture}/v1"}, "api_base, extra_headers"),
    ({"custom_llm_provider": "openai", "api_base": "{capture}/v1", "temperature": 0.0},
     "api_base, custom_llm_provider"),
    ({"extra_body": {"api_base": "{capture}/v1"}}, "extra_body"),
])
async def test_a_caller_cannot_send_the_provider_key_to_an_endpoint_of_theirs(
        service: BackgroundServer, capture: Capture, results: Path, llm_args: dict, refused: str) -> None:
    arguments = json.loads(json.dumps(llm_args).replace("{capture}", capture.url))
    task = await ask(service.url, RUN, stolen({"user_llm_args": arguments}))
    assert refusal(task) == (f"user_llm_args accepts only sampling parameters; refused: {refused}. Accepted: "
                             f"{SAMPLING} (the user LLM's endpoint and keys are the service's).")
    assert capture.requests == []
    assert not list(results.glob("ev-*")), "no evaluation started"


async def test_endpoint_arguments_outside_user_llm_args_are_refused(service: BackgroundServer,
                                                                    capture: Capture) -> None:
    task = await ask(service.url, RUN, stolen({"api_base": f"{capture.url}/v1"}))
    assert refusal(task).startswith("Unknown argument(s) for run_tau2_evaluation: api_base. Accepted arguments: ")
    assert capture.requests == []


async def test_only_the_operators_user_llms_run(service: BackgroundServer, capture: Capture) -> None:
    task = await ask(service.url, RUN, stolen({"user_llm": "hosted_vllm/evil"}))
    assert refusal(task) == ("user_llm 'hosted_vllm/evil' is not allowed on this service. Allowed user LLMs: "
                             "openai/gpt-4.1, gpt-4.1 (or user scripted_user, which needs no LLM).")
    card = service.app.state.card
    schema = json.loads(card.skills[1].description.split("Arguments (JSON Schema): ", 1)[1])
    assert schema["properties"]["user_llm"]["enum"] == list(ALLOWED)
    assert schema["properties"]["user_llm_args"]["additionalProperties"] is False
    assert capture.requests == []


async def test_the_operators_endpoint_gets_the_key_and_the_caller_cannot_change_it(
        tmp_path: Path, provider_key: str, capture: Capture, oracle_url: str) -> None:
    """With --user-llm-api-base the user LLM is reached there (the operator's choice), with the service's key."""
    server = start_service(tmp_path, allowed_user_llms=("openai/gpt-4.1",), user_llm_api_base=f"{capture.url}/v1")
    before = len(capture.requests)
    try:
        task = await ask(server.url, RUN, {"domain": "airline", "agent_endpoint": oracle_url,
                                           "task_ids": ["0"], "user_llm_args": {"temperature": 0.5, "seed": 7}})
    finally:
        server.stop()
    data = result_data(task)
    assert data["status"] == "completed", data
    assert data["request"]["user_llm"] == "openai/gpt-4.1"
    assert data["request"]["user_llm_args"] == {"temperature": 0.5, "seed": 7}
    calls = capture.requests[before:]
    assert calls and {call["path"] for call in calls} == {"/v1/chat/completions"}
    assert {call["headers"]["authorization"] for call in calls} == {f"Bearer {provider_key}"}
    assert all(json.loads(call["body"])["temperature"] == 0.5 for call in calls)


# -- secrets the service would keep ---------------------------------------------------------------

async def test_a_password_in_the_agent_endpoint_is_refused_and_kept_nowhere(
        service: BackgroundServer, results: Path, oracle_url: str) -> None:
    password = "pw-in-url-4455"
    endpoint = oracle_url.replace("http://", f"http://alice:{password}@")
    task = await ask(service.url, RUN, oracle_run(endpoint))
    text = refusal(task)
    assert text == ("agent_endpoint must not carry a user name or password (user:password@host): the service "
                    "would keep it with the evaluation. Pass a bearer token as agent_auth_token.")
    stored = await final_task(service.url, task.id)
    assessment = await ask_assessment(service.url, {"participants": {"agent": endpoint},
                                                    "config": {"domain": "airline", "task_ids": ["3"]}})
    assert "user name or password" in " ".join(p.text for p in assessment.status.message.parts)
    for reply in (task, stored, assessment):
        assert password not in str(reply) and "alice" not in str(reply)
    assert "***@127.0.0.1" in str(stored.history[0])  # the request is kept without its user name and password
    assert password.encode() not in stored_bytes(results)
    assert not list(results.glob("ev-*"))


@pytest.mark.parametrize("tail", ["/?token=tok-in-url-7781", "/a2a#tok-in-url-7781"])
async def test_a_token_in_the_agent_endpoints_query_or_fragment_is_refused_and_kept_nowhere(
        service: BackgroundServer, results: Path, oracle_url: str, tail: str) -> None:
    """Refused as it came, and as the service keeps it (scheme, host and port, then /?<removed>): never run
    against the URL without it."""
    endpoint = oracle_url + tail
    task = await ask(service.url, RUN, oracle_run(endpoint))
    assert refusal(task) == (
        f"agent_endpoint {oracle_url}/... must not carry a query string or fragment: the agent card is fetched from "
        "URL/.well-known/agent-card.json, so pass the agent's base URL alone; a token goes in agent_auth_token.")
    stored = await final_task(service.url, task.id)
    assessment = await ask_assessment(service.url, {"participants": {"agent": endpoint},
                                                    "config": {"domain": "airline", "task_ids": ["3"]}})
    assert "must not carry a query string or fragment" in " ".join(p.text for p in assessment.status.message.parts)
    for reply in (task, stored, assessment):
        assert "tok-in-url-7781" not in str(reply)
    assert f"{oracle_url}/?<removed>" in str(stored.history[0])
    assert b"tok-in-url-7781" not in stored_bytes(results)
    assert not list(results.glob("ev-*"))


async def ask_assessment(url: str, request: dict[str, Any]) -> Any:
    """An AgentBeats assessment, as the JSON text the gateway sends; the task it ends with."""
    from tests.support.service import stream_message

    events = await stream_message(url, assessment_message(request))
    task_id = next(e.task.id if e.HasField("task") else e.status_update.task_id for e in events)
    return await final_task(url, task_id)


@pytest.mark.parametrize("arguments, expected", [
    ({"user_llm_args": {"api_key": "sk-caller-0001"}},
     f"user_llm_args accepts only sampling parameters; refused: api_key. Accepted: {SAMPLING} "
     "(the user LLM's endpoint and keys are the service's)."),
    ({"user_llm_args": {"extra_headers": {"Authorization": "Bearer sk-caller-0002"}}},
     f"user_llm_args accepts only sampling parameters; refused: extra_headers. Accepted: {SAMPLING} "
     "(the user LLM's endpoint and keys are the service's)."),
    ({"openai_api_key": "sk-caller-0003"}, "Unknown argument(s) for run_tau2_evaluation: openai_api_key. "),
    ({"password": {"nested": "sk-caller-0004"}}, "Unknown argument(s) for run_tau2_evaluation: password. "),
])
async def test_a_request_refused_for_a_secret_leaves_no_trace_of_it(
        service: BackgroundServer, results: Path, oracle_url: str, arguments: dict, expected: str) -> None:
    secret = json.dumps(arguments).split("sk-caller-", 1)[1][:4]
    secret = f"sk-caller-{secret}"
    task = await ask(service.url, RUN, oracle_run(oracle_url, **arguments))
    assert refusal(task).startswith(expected)
    stored = await final_task(service.url, task.id)
    request = MessageToDict(stored.history[0].parts[0].data)
    assert REMOVED in json.dumps(request)  # the refusal names the argument; its value is gone
    assert secret not in str(task) and secret not in str(stored)
    assert secret.encode() not in stored_bytes(results)


def test_scrubbing_keeps_what_a_request_needs_and_removes_what_it_must_not_keep() -> None:
    vault = TokenVault()
    request = {"tool": "RunTau2Evaluation", "arguments": {
        "domain": "airline", "agent_endpoint": "http://u:p@host:1/a2a", "agent_auth_token": "tok",
        "user_llm_args": {"temperature": 0.1, "api_base": "http://evil"}, "num_tasks": 2, "apiKey": "k"}}
    assert scrub_request(request, vault)
    arguments = request["arguments"]
    reference = arguments.pop("agent_auth_token_ref")
    assert vault.take(reference) == "tok"
    assert arguments == {"domain": "airline", "agent_endpoint": "http://***@host:1/a2a",
                         "user_llm_args": {"temperature": 0.1, "api_base": REMOVED}, "num_tasks": 2,
                         "apiKey": REMOVED}
    assert not scrub_request(request, vault)  # a second pass (ADK's plugin) changes nothing more
    unknown = {"tool": "nope", "arguments": {"x": "secret"}}
    assert scrub_request(unknown, vault) and unknown["arguments"] == {"x": REMOVED}
    assessment = {"participants": {"agent": "https://a:b@h"},
                  "config": {"domain": "airline", "user_llm_args": {"api_key": "k"}, "token": "t"}}
    assert scrub_request(assessment, vault)
    assert assessment == {"participants": {"agent": "https://***@h"},
                          "config": {"domain": "airline", "user_llm_args": {"api_key": REMOVED}, "token": REMOVED}}
    for url in ("http://u:p@@h/", "http:u:p@h", "HTTP://u:p\\@h", " http://x@h"):
        arguments = {"agent_endpoint": url}
        assert scrub_arguments(arguments, accepted_arguments(RUN)) and "p" not in arguments["agent_endpoint"][4:9]
    assert accepted_arguments("get_evaluation") == {"evaluation_id"}


async def test_files_are_the_services_users_only(service: BackgroundServer, results: Path,
                                                  oracle_url: str) -> None:
    task = await ask(service.url, RUN, oracle_run(oracle_url))
    assert result_data(task)["status"] == "completed", result_text(task)
    evaluation = results / result_data(task)["evaluation_id"]
    saved = results_file(evaluation)
    assert saved.is_file() and metrics_path(saved).is_file() and (evaluation / "child.log").is_file()
    assert {"service.sqlite", "service.sqlite-wal"} <= {path.name for path in results.iterdir()}
    modes = {str(path.relative_to(results)): stat.S_IMODE(path.stat().st_mode)
             for path in [results, *results.rglob("*")]}
    wrong = {name: oct(mode) for name, mode in modes.items()
             if mode != (0o700 if (results / name).is_dir() else 0o600)}
    assert wrong == {}


# -- small ones -----------------------------------------------------------------------------------

@pytest.mark.parametrize("arguments, expected", [
    ({"max_steps": 1e300}, "max_steps must be at most 200 on this service, got 1e+300."),
    ({"max_steps": 201}, "max_steps must be at most 200 on this service, got 201."),
    ({"num_trials": 1e9}, "num_trials must be at most 200 on this service, got 1000000000."),
    ({"num_tasks": 1e7}, "num_tasks must be at most 100000 on this service, got 10000000."),
    ({"user_llm_args": {"temperature": 7}}, "user_llm_args.temperature must be a number from 0 to 2."),
])
async def test_unbounded_numbers_are_refused(service: BackgroundServer, oracle_url: str, arguments: dict,
                                             expected: str) -> None:
    assert refusal(await ask(service.url, RUN, oracle_run(oracle_url, **arguments))) == expected


async def test_a_refused_target_token_names_the_services_argument(service: BackgroundServer) -> None:
    port = free_port()
    target = f"http://127.0.0.1:{port}"
    with BackgroundServer(BearerAuth(a2a_app(OracleExecutor(), oracle_card(target)), "right-token"), port=port):
        task = await ask(service.url, RUN, oracle_run(target, agent_auth_token="wrong-token"))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    text = result_text(task)
    error = text.splitlines()[1]
    assert error.startswith(f"Error: the evaluation process exited with code 2: The agent at {target} refused "), text
    assert error.endswith(" with HTTP 401. Pass a valid bearer token with agent_auth_token."), text
    assert "--a2a-auth-token" not in text and "TAU2_A2A_AUTH_TOKEN" not in text and "wrong-token" not in text


def test_the_operator_sets_the_user_llms_and_their_endpoint(tmp_path: Path) -> None:
    from tau2_a2a.client.config import ConfigError
    from tau2_a2a.service.request import EvaluationRequest
    from tau2_a2a.service.settings import ServiceSettings
    from tests.support.distributions import DEFAULT_USER_LLM
    from tests.support.service import child_given

    settings = ServiceSettings.from_env({"TAU2_EVAL_ALLOWED_USER_LLMS": " openai/a, b ,",
                                         "TAU2_EVAL_USER_LLM_API_BASE": "http://10.0.0.5:8000/v1"})
    policy = settings.user_llm_policy()
    assert (policy.allowed, policy.default, policy.api_base) == (("openai/a", "b"), "openai/a",
                                                                 "http://10.0.0.5:8000/v1")
    assert ServiceSettings.from_env({}).user_llm_policy().allowed == (DEFAULT_USER_LLM,)  # tau2's default
    with pytest.raises(ConfigError) as refused:
        ServiceSettings(user_llm_api_base="http://u:pw@10.0.0.5/v1").user_llm_policy()
    assert "pw" not in str(refused.value) and "must not carry a user name or password" in str(refused.value)
    spec = EvaluationRequest(domain="airline", agent_endpoint="http://a", total_simulations=1, user_llm="openai/a",
                          user_llm_args={"temperature": 0.5})
    given = child_given(tmp_path / "child", spec, user_llm_api_base=policy.api_base)
    assert given["request"]["settings"]["user_llm_args"] == {"temperature": 0.5, "api_base": "http://10.0.0.5:8000/v1"}
    assert spec.user_llm_args == {"temperature": 0.5}  # the stored request holds the caller's choice only
