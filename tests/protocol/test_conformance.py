"""A2A 1.0 at the MUST level, on every binding, where a2a-sdk 1.3.0's own handlers fall short.

Real servers on loopback (the oracle and the evaluation service, each with
its gRPC server), raw requests (httpx, grpc stubs, curl) and a2a-sdk's 1.x
client. Section numbers are the A2A specification's (v1.0.1, whose error
table is the one a2a-sdk 1.3.0 and this project follow; docs/protocol.md,
"Conformance").
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any, NamedTuple

import grpc
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.compat.v0_3 import a2a_v0_3_pb2, a2a_v0_3_pb2_grpc
from a2a.types import GetTaskRequest, TaskPushNotificationConfig, a2a_pb2, a2a_pb2_grpc
from a2a.utils.errors import PushNotificationNotSupportedError, TaskNotFoundError
from google.protobuf.json_format import ParseDict
from google.rpc import error_details_pb2, status_pb2

from tau2_a2a.protocol.cards import CARD_PATHS
from tau2_a2a.protocol.conformance import CARD_CACHE_CONTROL
from tau2_a2a.protocol.hosting import BackgroundServer
from tests.support.service import SERVICE_TOKEN

BINDINGS = ["jsonrpc", "http-json", "grpc"]
SEND = {"message": {"messageId": "m-conf", "role": "ROLE_USER",
                    "parts": [{"data": {"tool": "list_domains", "arguments": {}}}]}}
PUSH = {"taskId": "t-none", "url": "https://example.com/hook"}
# name: (JSON-RPC method and params, HTTP+JSON method and path, gRPC method and request)
OPERATIONS: dict[str, tuple[str, dict[str, Any], str, str, str, Any]] = {
    "send": ("SendMessage", SEND, "POST", "/message:send", "SendMessage", a2a_pb2.SendMessageRequest),
    "stream": ("SendStreamingMessage", SEND, "POST", "/message:stream", "SendStreamingMessage",
               a2a_pb2.SendMessageRequest),
    "push": ("CreateTaskPushNotificationConfig", PUSH, "POST", "/tasks/t-none/pushNotificationConfigs",
             "CreateTaskPushNotificationConfig", a2a_pb2.TaskPushNotificationConfig),
    "get": ("GetTask", {"id": "t-none"}, "GET", "/tasks/t-none", "GetTask", a2a_pb2.GetTaskRequest),
}
NOT_JSON = ("Unsupported Content-Type {found}: send the body as JSON with 'Content-Type: application/json' "
            "(curl: --json, or -H 'Content-Type: application/json').")


class Agent(NamedTuple):
    url: str
    grpc_url: str
    token: str | None

    def headers(self, version: str | None = "1.0", **more: str) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return headers | ({"A2A-Version": version} if version is not None else {}) | more

    def metadata(self, version: str | None = "1.0") -> list[tuple[str, str]]:
        return [(k.lower(), v) for k, v in self.headers(version).items()]


@pytest.fixture(params=["oracle", "service"])
def agent(request: pytest.FixtureRequest) -> Agent:
    if request.param == "oracle":
        server: BackgroundServer = request.getfixturevalue("oracle_all_bindings")
        return Agent(server.url, server.grpc_url, None)
    server = request.getfixturevalue("service_all_bindings")
    return Agent(server.url, server.grpc_url, SERVICE_TOKEN)


@pytest.fixture
def oracle(oracle_all_bindings: BackgroundServer) -> Agent:
    return Agent(oracle_all_bindings.url, oracle_all_bindings.grpc_url, None)


def reason_of(details: list[dict[str, Any]] | None) -> str | None:
    """The A2A reason of an error's ErrorInfo detail (spec 9.5, 11.6)."""
    infos = [d for d in details or [] if d.get("@type") == "type.googleapis.com/google.rpc.ErrorInfo"]
    assert all(info["domain"] == "a2a-protocol.org" for info in infos)
    return infos[0]["reason"] if infos else None


def grpc_reason(error: grpc.RpcError) -> str | None:
    """The reason of the ErrorInfo in the call's google.rpc.Status (spec 10.6)."""
    raw = dict(error.trailing_metadata() or ()).get("grpc-status-details-bin")
    if raw is None:
        return None
    status = status_pb2.Status.FromString(raw)
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            assert info.domain == "a2a-protocol.org"
            return info.reason
    return None


def version_for(path: str) -> str | None:
    """The A2A-Version a client sends to `path`: none to the 0.3 HTTP+JSON paths."""
    return None if path.startswith("/v1/") else "1.0"


def call(agent: Agent, binding: str, operation: str, version: str | None = "1.0") -> tuple[Any, ...]:
    """("ok",) or ("error", the binding's code for it, the ErrorInfo reason)."""
    method, params, verb, path, grpc_method, grpc_type = OPERATIONS[operation]
    if binding == "jsonrpc":
        body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
        reply = httpx.post(agent.url + "/", json=body, headers=agent.headers(version), timeout=60)
        assert (reply.status_code, reply.headers["content-type"]) == (200, "application/json")
        answer = reply.json()
        assert answer["id"] == 7
        return ("ok",) if "result" in answer else ("error", answer["error"]["code"],
                                                   reason_of(answer["error"].get("data")))
    if binding == "http-json":
        reply = httpx.request(verb, agent.url + path, json=params if verb == "POST" else None,
                              headers=agent.headers(version), timeout=60)
        if reply.is_success:
            return ("ok",)
        assert reply.headers["content-type"] == "application/a2a+json"
        error = reply.json()["error"]
        assert error["code"] == reply.status_code
        return ("error", reply.status_code, reason_of(error.get("details")))
    with grpc.insecure_channel(agent.grpc_url) as channel:
        stub = getattr(a2a_pb2_grpc.A2AServiceStub(channel), grpc_method)
        request = ParseDict(params, grpc_type())
        try:
            reply = stub(request, metadata=agent.metadata(version), timeout=60)
            if operation == "stream":
                list(reply)
        except grpc.RpcError as error:
            return ("error", error.code().name, grpc_reason(error))
    return ("ok",)


# -- A2A-Version (3.6.2): refused alike on every binding; gRPC checked none ----------------------

VERSION_REFUSED = {"jsonrpc": -32009, "http-json": 400, "grpc": "FAILED_PRECONDITION"}


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("version", ["99.0", "2.0", "0.3", None])
def test_an_unsupported_version_is_refused_on_every_binding(agent: Agent, binding: str, version: str | None) -> None:
    """No header means 0.3 (3.6.2), which the 1.0 methods do not serve; 0.3 has its own methods."""
    assert call(agent, binding, "send", version) == ("error", VERSION_REFUSED[binding], "VERSION_NOT_SUPPORTED")


@pytest.mark.parametrize("binding", BINDINGS)
def test_version_1_0_is_served_on_every_binding(agent: Agent, binding: str) -> None:
    assert call(agent, binding, "send", "1.0") == ("ok",)


def test_the_grpc_0_3_service_serves_0_3_and_refuses_other_versions(agent: Agent) -> None:
    request = a2a_v0_3_pb2.SendMessageRequest(request=a2a_v0_3_pb2.Message(
        message_id="m-03", role=a2a_v0_3_pb2.ROLE_USER, content=[a2a_v0_3_pb2.Part(text="hello")]))
    with grpc.insecure_channel(agent.grpc_url) as channel:
        stub = a2a_v0_3_pb2_grpc.A2AServiceStub(channel)
        for served in (None, "0.3"):
            assert stub.SendMessage(request, metadata=agent.metadata(served), timeout=60).WhichOneof("payload")
        with pytest.raises(grpc.RpcError) as refused:
            stub.SendMessage(request, metadata=agent.metadata("99.0"), timeout=60)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert refused.value.details().startswith("VersionNotSupportedError: A2A version '99.0' is not supported")


def test_a_0_3_json_rpc_method_with_an_unsupported_version_gets_32009(agent: Agent) -> None:
    """a2a-sdk's 0.3 adapter answers it -32603 (internal error)."""
    body = {"jsonrpc": "2.0", "id": "r-7", "method": "message/send",
            "params": {"message": {"messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}}
    answer = httpx.post(agent.url + "/", json=body, headers=agent.headers("99.0"), timeout=60).json()
    assert (answer["id"], answer["error"]["code"], reason_of(answer["error"]["data"])) == (
        "r-7", -32009, "VERSION_NOT_SUPPORTED")
    assert answer["error"]["message"] == ("A2A version '99.0' is not supported by this agent (it serves 1.0 and "
                                          "0.3); send 'A2A-Version: 1.0'.")


# -- error codes (5.4, v1.0.1's table: a2a-sdk's own mapping, kept) -------------------------------

FAILED_PRECONDITION = [("http-json", 400), ("grpc", "FAILED_PRECONDITION")]  # v1.0.0's table: UNIMPLEMENTED

@pytest.mark.parametrize("binding, expected", [("jsonrpc", -32003), *FAILED_PRECONDITION])
def test_push_notifications_not_supported_on_every_binding(agent: Agent, binding: str, expected: Any) -> None:
    assert call(agent, binding, "push") == ("error", expected, "PUSH_NOTIFICATION_NOT_SUPPORTED")


@pytest.mark.parametrize("binding, expected", [("jsonrpc", -32004), *FAILED_PRECONDITION])
def test_streaming_not_supported_on_every_binding(oracle: Agent, binding: str, expected: Any) -> None:
    """The oracle's card says streaming: false (3.3.4)."""
    assert call(oracle, binding, "stream") == ("error", expected, "UNSUPPORTED_OPERATION")


@pytest.mark.parametrize("binding, expected", [("jsonrpc", -32001), ("http-json", 404), ("grpc", "NOT_FOUND")])
def test_task_not_found_on_every_binding(agent: Agent, binding: str, expected: Any) -> None:
    assert call(agent, binding, "get") == ("error", expected, "TASK_NOT_FOUND")


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
def test_the_1_x_client_reads_each_error_on_every_binding(agent: Agent, binding: str) -> None:
    """a2a-sdk's client maps errors by their ErrorInfo reason, the HTTP+JSON ones labelled application/a2a+json."""
    async def errors() -> list[type]:
        async with httpx.AsyncClient(timeout=60) as http:
            card = await A2ACardResolver(http, agent.url).get_agent_card()
        config = ClientConfig(streaming=False, supported_protocol_bindings=[binding],
                              grpc_channel_factory=grpc.aio.insecure_channel)
        client = ClientFactory(config).create(card)
        context = ClientCallContext(timeout=60, service_parameters={"Authorization": f"Bearer {agent.token}"}
                                    if agent.token else None)
        raised = []
        try:
            for attempt in (client.get_task(GetTaskRequest(id="t-none"), context=context),
                            client.create_task_push_notification_config(
                                TaskPushNotificationConfig(task_id="t-none", url="https://example.com/hook"),
                                context=context)):
                try:
                    await attempt
                except Exception as error:  # noqa: BLE001  (the test names what it must be)
                    raised.append(type(error))
        finally:
            await client.close()
        return raised

    assert asyncio.run(errors()) == [TaskNotFoundError, PushNotificationNotSupportedError]


# -- bodies: JSON only (9.1, 11.1), as UTF-8 (14.1.1) ----------------------------------------------

@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None,
                                          "multipart/form-data; boundary=x"])
@pytest.mark.parametrize("path", ["/", "/message:send", "/v1/message:send"])
def test_a_body_that_is_not_json_is_refused_with_415(agent: Agent, path: str, content_type: str | None) -> None:
    """A browser sends these without a CORS preflight: refusing them keeps web pages off a local agent."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": SEND} if path == "/" else SEND)
    headers = agent.headers(version_for(path)) | ({"Content-Type": content_type} if content_type else {})
    reply = httpx.post(agent.url + path, content=body.encode(), headers=headers, timeout=60)
    found = f"'{content_type.split(';')[0]}'" if content_type else "(none)"
    assert reply.status_code == 415
    if path == "/":
        assert reply.json() == {"jsonrpc": "2.0", "id": None,
                                "error": {"code": -32600, "message": NOT_JSON.format(found=found)}}
    else:
        assert reply.json() == {"error": {"code": 415, "status": "INVALID_ARGUMENT",
                                          "message": NOT_JSON.format(found=found)}}
    assert reply.headers["content-type"] == ("application/a2a+json" if path == "/message:send" else "application/json")


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8",
                                          "application/a2a+json", "Application/JSON"])
@pytest.mark.parametrize("binding", ["jsonrpc", "http-json"])
def test_json_media_types_are_served(agent: Agent, binding: str, content_type: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": SEND} if binding == "jsonrpc" else SEND
    path = "/" if binding == "jsonrpc" else "/message:send"
    reply = httpx.post(agent.url + path, content=json.dumps(body).encode(),
                       headers=agent.headers(**{"Content-Type": content_type}), timeout=60)
    assert reply.status_code == 200
    assert ("result" in reply.json()) if binding == "jsonrpc" else ("message" in reply.json())


def test_a_json_rpc_body_that_is_not_utf8_is_a_parse_error(agent: Agent) -> None:
    """a2a-sdk answers -32603 (internal error) and logs a traceback."""
    body = b'{"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {"x": "caf\xe9"}}'
    reply = httpx.post(agent.url + "/", content=body, headers=agent.headers(**{"Content-Type": "application/json"}))
    assert reply.status_code == 200
    assert reply.json() == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32700, "message": "Invalid JSON payload: the body is not UTF-8 (byte 0xe9 at offset 73); "
                                   "A2A sends JSON as UTF-8."}}


@pytest.mark.parametrize("path, media_type", [("/message:send", "application/a2a+json"),
                                              ("/v1/message:send", "application/json")])
def test_an_http_json_body_that_is_not_utf8_is_a_bad_request(agent: Agent, path: str, media_type: str) -> None:
    """a2a-sdk answers 500 "unknown exception"; this is its answer to a body that is not JSON."""
    reply = httpx.post(agent.url + path, content=b'{"message": "\xff"}',
                       headers=agent.headers(version_for(path), **{"Content-Type": "application/json"}))
    assert (reply.status_code, reply.headers["content-type"]) == (400, media_type)
    error = reply.json()["error"]
    assert (error["code"], error["status"], reason_of(error["details"])) == (400, "INVALID_ARGUMENT", "INVALID_REQUEST")
    assert error["message"] == ("Invalid JSON payload: the body is not UTF-8 (byte 0xff at offset 13); "
                                "A2A sends JSON as UTF-8.")


def test_curl_users_are_told_to_send_json_and_curl_json_works(oracle: Agent) -> None:
    """`curl -d` sends application/x-www-form-urlencoded; `curl --json` (7.82+) sends application/json."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": SEND})
    refused = subprocess.run(["curl", "-s", "-H", "A2A-Version: 1.0", "-d", body, oracle.url + "/"],
                             capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(refused.stdout)["error"]["message"] == NOT_JSON.format(
        found="'application/x-www-form-urlencoded'")
    rest = subprocess.run(f"curl -s -H 'A2A-Version: 1.0' --json '{json.dumps(SEND)}' {oracle.url}/message:send "
                          "| jq -r .message.role", shell=True, capture_output=True, text=True, check=True, timeout=60)
    assert rest.stdout == "ROLE_AGENT\n"


# -- response content types (9.1, 11.1, 11.6) -----------------------------------------------------

def test_every_http_json_1_0_response_is_application_a2a_json(agent: Agent) -> None:
    """a2a-sdk labels successes application/a2a+json and errors application/json."""
    headers = agent.headers()
    sent = httpx.post(agent.url + "/message:send", json=SEND, headers=headers, timeout=60)
    missing = httpx.get(agent.url + "/tasks/t-none", headers=headers)
    missing_03 = httpx.get(agent.url + "/v1/tasks/t-none", headers=agent.headers(None))
    rpc = httpx.post(agent.url + "/", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}},
                     headers=headers)
    card = httpx.get(agent.url + CARD_PATHS[0])
    assert [(r.status_code, r.headers["content-type"]) for r in (sent, missing, missing_03, rpc, card)] == [
        (200, "application/a2a+json"), (404, "application/a2a+json"),  # HTTP+JSON 1.0
        (404, "application/json"),  # HTTP+JSON 0.3, whose spec says application/json
        (200, "application/json"), (200, "application/json")]  # JSON-RPC and the card


# -- the card's cache headers (8.6.1) ---------------------------------------------------------------

@pytest.mark.parametrize("path", CARD_PATHS)
def test_the_card_says_how_long_to_keep_it(agent: Agent, path: str) -> None:
    card = httpx.get(agent.url + path)
    assert (card.status_code, card.headers["cache-control"]) == (200, "public, max-age=300") == (
        200, CARD_CACHE_CONTROL)
    assert card.headers["etag"].startswith('W/"') and "last-modified" not in card.headers
    again = httpx.get(agent.url + path, headers={"If-None-Match": card.headers["etag"]})
    assert (again.status_code, again.headers["cache-control"], again.content) == (304, CARD_CACHE_CONTROL, b"")
