"""Fuzzing the evaluation service over its real bindings: every request ends in a clear answer.

Hypothesis draws tool calls (any tool name, any arguments) and raw request
bodies, and sends them to `tau2-a2a serve`'s app on loopback, over JSON-RPC
and HTTP+JSON. Whatever arrives, the service answers within the HTTP timeout
with a well-formed reply: a result, or an error that names the problem. Never
a 5xx, an internal error, a Python traceback, or a secret (a value sent where
credentials go) echoed or stored.

The service runs with its default target policy (public addresses only) and
every endpoint drawn is loopback, private, link-local or not a URL, so no
drawn request can start an evaluation against a real host: the fuzzing stays
on this machine.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.support.service import start_service

SECRET = "fuzz-secret-4f1c"
TOOLS = ["list_domains", "run_tau2_evaluation", "get_evaluation", "list_evaluations", "cancel_evaluation"]
REFUSED_ENDPOINTS = ["http://127.0.0.1:9", "http://10.0.0.1:9000", "http://169.254.169.254/",
                     "http://[::1]:9", "http://[fd00::1]:80", "ftp://127.0.0.1", "not a url", "",
                     f"http://user:{SECRET}@127.0.0.1:9", "http://localhost:9", f"http://127.0.0.1:9/?token={SECRET}",
                     f"http://10.0.0.1:9/a2a#{SECRET}"]
FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) \
    | st.text(max_size=30)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=12)
argument_values = {
    "domain": st.sampled_from(["airline", "retail", "telecom", "mock", "banking", "", "../etc"]) | json_values,
    "agent_endpoint": st.sampled_from(REFUSED_ENDPOINTS) | json_scalars,
    "user": st.sampled_from(["user_simulator", "scripted_user", "nobody"]) | json_scalars,
    "user_llm": st.sampled_from(["gpt-4.1", "openai/gpt-4.1", "scripted", "x/y"]) | json_scalars,
    "user_llm_args": st.fixed_dictionaries({}, optional={
        **{name: json_scalars for name in ("temperature", "seed", "top_p", "max_tokens", "stop")},
        **{name: st.just(SECRET) | json_values for name in ("api_base", "base_url", "extra_headers", "api_key")},
    }) | json_values,
    "num_trials": json_scalars, "num_tasks": json_scalars, "max_steps": json_scalars,
    "max_concurrency": json_scalars, "task_ids": json_values, "task_split": json_scalars,
    "evaluation_id": st.sampled_from(["ev-0123456789ab", "ev-", "x"]) | json_scalars,
    "agent_auth_token": st.just(SECRET) | json_scalars,
    "retrieval_config": json_values,
    "api_key": st.just(SECRET),
}
tool_arguments = st.fixed_dictionaries({}, optional={name: value for name, value in argument_values.items()}) \
    | st.dictionaries(st.text(max_size=12), json_values, max_size=3) | json_values
tool_calls = st.fixed_dictionaries({"tool": st.sampled_from(TOOLS) | st.text(max_size=20) | json_values,
                                    "arguments": tool_arguments})


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The service with its default (public) target policy; its results directory."""
    results = tmp_path_factory.mktemp("fuzzed_service")
    server = start_service(results, allowed_targets=("public",))
    try:
        yield server.url, results
    finally:
        server.stop()


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60) as client:
        yield client


def message(data: Any) -> dict[str, Any]:
    """An A2A 1.0 message whose one data part is `data`."""
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"data": data}]}


def assert_clear(response: httpx.Response) -> dict[str, Any]:
    """A well-formed JSON answer with no server failure, traceback or secret in it.

    Starlette's own 404 and 405 (no route, or not this method) are plain text, and clear as they are.
    """
    assert response.status_code < 500, response.text[:500]
    text = response.text
    assert "Traceback" not in text and 'File "' not in text, text[:1000]
    assert SECRET not in text, text[:1000]
    if response.status_code in (404, 405) and not response.headers.get("content-type", "").endswith("json"):
        return {"error": text}
    body = response.json()
    assert isinstance(body, dict), text[:500]
    return body


def no_secret_stored(results: Path) -> None:
    for path in results.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


@FUZZ
@given(call=tool_calls)
@example(call={"tool": "run_tau2_evaluation", "arguments": {"domain": "airline", "agent_endpoint": "http://127.0.0.1:9",
                                                           "max_steps": 1e300}})
@example(call={"tool": "run_tau2_evaluation",
               "arguments": {"domain": "airline", "agent_endpoint": f"http://u:{SECRET}@10.0.0.1"}})
@example(call={"tool": "run_tau2_evaluation", "arguments": {"domain": "airline", "agent_endpoint": "http://[::1]:9",
                                                           "user_llm_args": {"api_key": SECRET}}})
@example(call={"tool": "run_tau2_evaluation",
               "arguments": {"domain": "airline", "agent_endpoint": f"http://127.0.0.1:9/?token={SECRET}"}})
@example(call={"tool": "get_evaluation", "arguments": {"evaluation_id": None}})
@example(call={"tool": "list_domains", "arguments": []})
@example(call={"tool": ["run_tau2_evaluation"], "arguments": {"domain": "airline"}})  # a name JSON cannot key
@example(call={"tool": {"name": "list_domains"}, "arguments": {}})
@example(call={"tool": "list_domains", "arguments": {"num_trials": float("inf")}})  # no JSON form: -32602
@example(call={"tool": "run_tau2_evaluation", "arguments": {"user_llm_args": {"temperature": float("nan")}}})
def test_any_tool_call_over_json_rpc_gets_a_clear_answer(service: tuple[str, Path], http: httpx.Client,
                                                         call: dict[str, Any]) -> None:
    url, results = service
    request = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message(call)}}
    body = assert_clear(http.post(url + "/", content=json.dumps(request), headers=HEADERS))
    assert ("result" in body) != ("error" in body), body
    if "error" in body:
        assert body["error"]["code"] != -32603, body  # an internal error is the service's fault, not the caller's
        assert body["error"]["message"], body
    no_secret_stored(results)


@FUZZ
@given(call=tool_calls)
def test_any_tool_call_over_http_json_gets_a_clear_answer(service: tuple[str, Path], http: httpx.Client,
                                                         call: dict[str, Any]) -> None:
    url, results = service
    body = assert_clear(http.post(url + "/message:send", content=json.dumps({"message": message(call)}),
                                  headers=HEADERS))
    assert body.get("task") or body.get("message") or body.get("error"), body
    no_secret_stored(results)


@FUZZ
@given(body=st.binary(max_size=300) | json_values.map(lambda value: json.dumps(value).encode())
       | st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": json_scalars,
                                "method": st.sampled_from(["SendMessage", "GetTask", "CancelTask", "ListTasks",
                                                           "message/send", "tasks/get", "nope"]) | json_scalars,
                                "params": json_values}).map(lambda value: json.dumps(value).encode()))
@example(body=b'{"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {"x": "caf\xe9"}}')
@example(body=b"null")
@example(body=b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "../../etc/passwd"}}')
@example(body=b"\xff\xfe")
def test_any_body_on_json_rpc_gets_a_json_rpc_answer(service: tuple[str, Path], http: httpx.Client,
                                                     body: bytes) -> None:
    url, _ = service
    answer = assert_clear(http.post(url + "/", content=body, headers=HEADERS))
    assert answer.get("jsonrpc") == "2.0", answer
    if "error" in answer:
        assert answer["error"]["code"] != -32603, answer


@FUZZ
@given(path=st.sampled_from(["/message:send", "/message:stream", "/tasks/ev-x", "/tasks/x:cancel", "/tasks"]),
       body=st.binary(max_size=300) | json_values.map(lambda value: json.dumps(value).encode()))
@example(path="/message:send", body=b"{}")
@example(path="/message:send", body=b'{"message": {"parts": [{"data": null}]}}')
def test_any_body_on_http_json_gets_a_clear_answer(service: tuple[str, Path], http: httpx.Client,
                                                   path: str, body: bytes) -> None:
    url, _ = service
    response = http.post(url + path, content=body, headers=HEADERS)
    if path == "/message:stream" and response.status_code == 200:
        return  # a stream of events: the tool-call tests cover what it says
    assert_clear(response)


# -- what the service keeps of a message too large to be a request ------------------------------------------------

def stored_bytes(results: Path) -> int:
    return sum(path.stat().st_size for path in results.glob("service.sqlite*"))


@pytest.mark.parametrize("binding", ["jsonrpc", "http-json"])
def test_a_9_mib_message_is_rejected_and_kept_only_in_part(service: tuple[str, Path], http: httpx.Client,
                                                          binding: str) -> None:
    """Under the 10 MiB body limit, over the 1 MiB message limit: a service without a model rejects it and keeps
    its first KiB, in its database, its reply and ListTasks pages alike."""
    from tau2_a2a.service.request_limit import cut_message_refusal

    url, results = service
    text = "evaluate " + "x" * (9 << 20)
    sent = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
    before = stored_bytes(results)
    for _ in range(2):
        if binding == "jsonrpc":
            request = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": sent}}
            response = http.post(url + "/", content=json.dumps(request), headers=HEADERS)
            task = assert_clear(response)["result"]["task"]
        else:
            response = http.post(url + "/message:send", content=json.dumps({"message": sent}), headers=HEADERS)
            task = assert_clear(response)["task"]
        assert len(response.content) < 20_000
        assert task["status"]["state"] == "TASK_STATE_REJECTED"
        refusal = " ".join(part.get("text", "") for part in task["status"]["message"]["parts"])
        said = re.fullmatch(re.escape(cut_message_refusal({"bytes": 0, "limit": 2**20})).replace(
            re.escape("is 0 bytes"), r"is (\d+) bytes"), refusal)
        assert said is not None and int(said[1]) > 9 << 20, refusal
        [kept] = [part["text"] for m in task["history"] if m["role"] == "ROLE_USER" for part in m["parts"]]
        assert kept.startswith("evaluate xxx") and kept.endswith(" bytes]") and len(kept) < 1100
    assert stored_bytes(results) - before < 1 << 20  # two uncut messages would have added over 36 MB
    page = http.post(url + "/", headers=HEADERS, content=json.dumps(
        {"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {"pageSize": 100}}))
    assert page.status_code == 200 and len(page.content) < 2 << 20


def test_a_request_as_json_text_over_the_limit_is_kept_without_its_secrets(service: tuple[str, Path],
                                                                          http: httpx.Client) -> None:
    """A tool call sent as JSON text, its token first, over the message limit: the service cannot scrub a cut
    request, so it keeps none of its text; the token is neither echoed nor stored."""
    url, results = service
    text = json.dumps({"tool": "run_tau2_evaluation", "arguments": {
        "agent_auth_token": SECRET, "domain": "airline", "task_ids": ["x" * 100] * 20_000}})
    sent = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
    request = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": sent}}
    task = assert_clear(http.post(url + "/", content=json.dumps(request), headers=HEADERS))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    [kept] = [part["text"] for m in task["history"] if m["role"] == "ROLE_USER" for part in m["parts"]]
    assert re.fullmatch(r"\[a JSON request: cut: this message was \d+ bytes\]", kept), kept
    no_secret_stored(results)
