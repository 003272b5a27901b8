"""Every connection an evaluation makes passes the target policy, and no reply can fill the memory.

Real agents on loopback whose cards point elsewhere, `tau2-a2a run` by its own
main() (what it decides, not its process), the evaluation service with its default policy, a resolver whose
answer changes between the check and the connection (the policy's own
resolver seam), and a real server sending 40 MB replies.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.helpers import new_text_part
from a2a.types import TaskState
from starlette.middleware import Middleware
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Send

from tau2_a2a.client.config import DEFAULT_MAX_REPLY_BYTES, A2AConfig
from tau2_a2a.client.errors import AgentTargetRefused
from tau2_a2a.client.session import A2ASession
from tau2_a2a.client.targets import TargetPolicy, TargetRefused, address_class
from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
from tau2_a2a.service.settings import ServiceSettings
from tau2_a2a.tau2bench.run.layout import results_path
from tests.support.cli_main import run_main
from tests.support.executors import OracleLike, ReplyOnTask, agent_app, card_app, card_json
from tests.support.middleware import HttpExchange, _BodyMiddleware
from tests.support.records import marker, records_of
from tests.support.runs import FAST, run_a2a
from tests.support.service import ask, wait_for_task

METADATA_FORMS = [  # (URL, the address as the refusal writes it, the words saying what it carries)
    ("http://[::169.254.169.254]/", "::a9fe:a9fe", "carries 169.254.169.254 (IPv4-compatible)"),
    ("http://[64:ff9b::a9fe:a9fe]/", "64:ff9b::a9fe:a9fe", "carries 169.254.169.254 (NAT64)"),
    ("http://[64:ff9b:1::a9fe:a9fe]/", "64:ff9b:1::a9fe:a9fe",
     "carries 169.254.169.254 (NAT64)"),  # local-use prefix, /96 position
    ("http://[64:ff9b:1:a9fe:a9:fe00::]/", "64:ff9b:1:a9fe:a9:fe00::",
     "carries 169.254.169.254 (NAT64)"),  # local-use prefix, /48 position
    ("http://[2002:a9fe:a9fe::]/", "2002:a9fe:a9fe::", "carries 169.254.169.254 (6to4)"),
    ("http://[2001:0:4136:e378:8000:63bf:5601:5601]/", "2001:0:4136:e378:8000:63bf:5601:5601",
     "carries 169.254.169.254 (Teredo client)"),
    ("http://[2001:0:a9fe:a9fe::1]/", "2001:0:a9fe:a9fe::1", "carries 169.254.169.254 (Teredo server)"),
    ("http://[::ffff:169.254.169.254]/", "::ffff:169.254.169.254",
     "carries 169.254.169.254 (IPv4-mapped)"),  # RFC 5952's form, on every Python version
    ("http://[::ffff:0:a9fe:a9fe]/", "::ffff:0:a9fe:a9fe", "carries 169.254.169.254 (IPv4-translated)"),
    ("http://[64:ff9b::6464:64c8]/", "64:ff9b::6464:64c8", "carries 100.100.100.200 (NAT64)"),
]


@pytest.mark.parametrize("url, shown, words", METADATA_FORMS)
def test_ipv6_forms_that_reach_a_metadata_address_are_always_refused(url: str, shown: str, words: str) -> None:
    for policy in (TargetPolicy(), TargetPolicy.from_entries(["::/0", "0.0.0.0/0", "public", "private", "loopback"])):
        with pytest.raises(TargetRefused) as refused:
            policy.check(url, "the URL")
        assert str(refused.value).startswith(f"the URL is refused: {shown} ")
        assert words in str(refused.value)
        assert str(refused.value).endswith("(link-local and cloud metadata addresses are never allowed).")


@pytest.mark.parametrize("address, kind", [
    ("127.0.0.1", "loopback"), ("127.8.9.1", "loopback"), ("::1", "loopback"),
    ("10.0.0.1", "private"), ("172.16.5.4", "private"), ("192.168.1.1", "private"), ("100.64.0.1", "private"),
    ("fd12::1", "private"), ("64:ff9b:1::1", "private"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"), ("224.0.0.1", "multicast"), ("ff02::1", "multicast"),
    ("240.0.0.1", "reserved"), ("192.0.2.1", "reserved"), ("2001:db8::1", "reserved"), ("::a00:1", "reserved"),
    ("8.8.8.8", "public"), ("2606:4700::1", "public"),
    # as the IANA special-purpose registries say, which Python's is_global follows differently from version
    # to version: 192.0.0.0/24 is not globally reachable but for its PCP and TURN anycast addresses; in
    # 2001::/23 only the anycast, AMT, AS112, ORCHIDv2 and DET blocks are; documentation and SRv6 SIDs are not
    ("192.0.0.8", "reserved"), ("192.0.0.9", "public"), ("192.0.0.10", "public"), ("192.0.0.171", "reserved"),
    ("192.0.0.255", "reserved"), ("198.18.0.1", "reserved"), ("255.255.255.255", "reserved"),
    ("192.31.196.1", "public"), ("192.175.48.1", "public"),
    ("2001:1::1", "public"), ("2001:1::2", "public"), ("2001:1::3", "public"), ("2001:1::4", "reserved"),
    ("2001:2::1", "reserved"), ("2001:3::1", "public"), ("2001:4:112::1", "public"), ("2001:4:113::1", "reserved"),
    ("2001:10::1", "reserved"), ("2001:20::1", "public"), ("2001:30::1", "public"), ("2001:1ff::1", "reserved"),
    ("2001:200::1", "public"), ("3fff::1", "reserved"), ("3ffe::1", "public"), ("5f00::1", "reserved"),
    ("100::1", "reserved"), ("fec0::1", "reserved"), ("2620:4f:8000::1", "public"),
])
def test_address_classes(address: str, kind: str) -> None:
    assert address_class(ipaddress.ip_address(address)) == kind


def test_public_allows_only_globally_routable_addresses_and_judges_translated_forms_by_their_ipv4() -> None:
    public = TargetPolicy.from_entries(["public"], flag="--allowed-targets")
    assert public.check("http://8.8.8.8:80/a2a/") == "http://8.8.8.8:80/a2a"
    assert public.check("http://[64:ff9b::808:808]/") == "http://[64:ff9b::808:808]"  # NAT64 of a public address
    refusals = {}
    for url in ("http://[64:ff9b::a00:1]/", "http://[::ffff:127.0.0.1]/", "http://0.0.0.0:9000",
                "http://[2002:0a00:0001::]/"):
        with pytest.raises(TargetRefused) as refused:
            public.check(url, "it")
        refusals[url] = str(refused.value)
    assert refusals == {
        "http://[64:ff9b::a00:1]/": "it is refused: 64:ff9b::a00:1 (carrying 10.0.0.1) is a private address, and the "
                                    "allowed targets (public) do not include it. To allow it: --allowed-targets "
                                    "public,private",
        "http://[::ffff:127.0.0.1]/": "it is refused: ::ffff:127.0.0.1 (carrying 127.0.0.1) is a loopback address, and "
                                      "the allowed targets (public) do not include it. To allow it: "
                                      "--allowed-targets public,loopback",
        "http://0.0.0.0:9000": "it is refused: 0.0.0.0 is an unspecified address, and the allowed targets (public) "
                               "do not include it. To allow it: --allowed-targets public,0.0.0.0",
        "http://[2002:0a00:0001::]/": "it is refused: 2002:a00:1:: (carrying 10.0.0.1) is a private address, and "
                                      "the allowed targets (public) do not include it. To allow it: "
                                      "--allowed-targets public,private",
    }
    both = TargetPolicy.from_entries(["public", "loopback"])
    assert both.check("http://127.0.0.1:9") == "http://127.0.0.1:9"
    assert both.check("http://[::1]:9") == "http://[::1]:9"
    with pytest.raises(TargetRefused, match=r"10\.0\.0\.1 is a private address"):
        both.check("http://10.0.0.1")


def test_a_policy_travels_with_the_config_as_data() -> None:
    config = A2AConfig(endpoint="http://127.0.0.1:9", targets=TargetPolicy.parse("Public, loopback,10.0.0.0/8"),
                       max_reply_bytes=1000, auth_token="t0ken")
    record = config.as_record()
    assert record["a2a_allowed_targets"] == ["public", "loopback", "10.0.0.0/8"]
    assert record["a2a_max_reply_bytes"] == 1000
    assert "t0ken" not in json.dumps(record)
    assert A2AConfig.from_record(record, "t0ken") == config
    plain = A2AConfig(endpoint="http://127.0.0.1:9").as_record()  # the defaults leave earlier records as they were
    assert "a2a_allowed_targets" not in plain and "a2a_max_reply_bytes" not in plain
    assert A2AConfig.from_record(plain).targets is None
    assert A2AConfig.from_record(plain).max_reply_bytes == DEFAULT_MAX_REPLY_BYTES == 8 << 20


# -- a card that points elsewhere: `tau2-a2a run` refuses before any simulation -----------------------------


@pytest.fixture
def witness() -> Iterator[socket.socket]:
    """A listening socket on 127.0.0.2: after a refused run, it must have seen no connection."""
    listener = socket.create_server(("127.0.0.2", 0))
    listener.setblocking(False)
    yield listener
    listener.close()


def connections(listener: socket.socket) -> int:
    count = 0
    while True:
        try:
            connection, _ = listener.accept()
        except BlockingIOError:
            return count
        connection.close()
        count += 1


def run_refused(endpoint: str, results: Path, capsys: pytest.CaptureFixture[str], *flags: str
                ) -> tuple[int, list[str], str]:
    code, stdout, stderr = run_main(["run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", endpoint, "--user",
                                     "scripted_user", "--task-ids", "1", "--results-dir", str(results), "--save-to",
                                     "run", *flags], capsys)
    return code, stderr.strip().splitlines(), stdout


def test_a_card_naming_the_metadata_address_ends_the_run_before_any_simulation(
        serve: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = serve(lambda url: agent_app(OracleLike(), url, card_url="http://169.254.169.254/latest"))
    code, lines, _ = run_refused(server.url, tmp_path, capsys)  # no --a2a-allowed-targets: only these are refused
    assert code == 2
    assert lines == [(
        f"error: The agent card at {server.url} names http://169.254.169.254/latest for JSON-RPC; that URL is "
        "refused: 169.254.169.254 is in 169.254.0.0/16 (link-local and cloud metadata addresses are never allowed).")]
    assert not results_path("run", tmp_path).exists()


def test_a_card_naming_a_host_outside_the_allowed_targets_ends_the_run(
        serve: Any, tmp_path: Path, witness: socket.socket, capsys: pytest.CaptureFixture[str]) -> None:
    elsewhere = f"http://127.0.0.2:{witness.getsockname()[1]}"
    server = serve(lambda url: agent_app(OracleLike(), url, card_url=elsewhere))
    code, lines, _ = run_refused(server.url, tmp_path, capsys, "--a2a-allowed-targets", "127.0.0.1", "--a2a-transport",
                                 "http-json")
    assert code == 2
    assert lines == [(
        f"error: The agent card at {server.url} names {elsewhere} for HTTP+JSON; that URL is refused: 127.0.0.2 is a "
        "loopback address, and the allowed targets (127.0.0.1) do not include it. To allow it: "
        "--a2a-allowed-targets 127.0.0.1,loopback")]
    assert connections(witness) == 0
    assert not results_path("run", tmp_path).exists()


def test_a_card_naming_a_grpc_target_outside_the_allowed_targets_ends_the_run(
        serve: Any, tmp_path: Path, witness: socket.socket, capsys: pytest.CaptureFixture[str]) -> None:
    target = f"127.0.0.2:{witness.getsockname()[1]}"
    interfaces = [{"url": target, "protocolBinding": "GRPC", "protocolVersion": "1.0"}]
    server = serve(lambda url: card_app({"/.well-known/agent-card.json": JSONResponse(
        card_json(url, supportedInterfaces=interfaces))}))
    code, lines, _ = run_refused(server.url, tmp_path, capsys, "--a2a-allowed-targets", "127.0.0.1/32")
    assert code == 2
    assert lines == [(
        f"error: The agent card at {server.url} names {target} for gRPC; that URL is refused: 127.0.0.2 is a "
        "loopback address, and the allowed targets (127.0.0.1/32) do not include it. To allow it: "
        "--a2a-allowed-targets 127.0.0.1/32,loopback")]
    assert connections(witness) == 0


def test_an_endpoint_outside_the_allowed_targets_ends_the_run(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run_refused("http://10.0.0.1:9", tmp_path, capsys, "--a2a-allowed-targets", "public,loopback")
    assert code == 2
    assert lines == [(
        "error: --a2a-endpoint http://10.0.0.1:9 is refused: 10.0.0.1 is a private address, and the allowed "
        "targets (public,loopback) do not include it. To allow it: --a2a-allowed-targets public,loopback,private")]


# -- the address DNS gives when connecting ------------------------------------------------------------------


class Flipping:
    """A resolver for `agent.test` answering `first` for the first `calls` questions, then `then`."""

    def __init__(self, first: str, then: str, calls: int) -> None:
        self.answers = [ipaddress.ip_address(first)] * calls
        self.then = ipaddress.ip_address(then)
        self.asked: list[str] = []

    def __call__(self, host: str) -> list[Any]:
        self.asked.append(host)
        if host != "agent.test":
            return [ipaddress.ip_address(host)]
        return [self.answers.pop(0) if self.answers else self.then]


def test_a_dns_answer_that_changes_after_the_check_is_caught_when_connecting(oracle_url: str) -> None:
    port = oracle_url.rsplit(":", 1)[1]
    flipping = Flipping("127.0.0.1", "169.254.169.254", calls=1)  # the pre-check sees loopback, the connect not
    session = A2ASession(A2AConfig(endpoint=f"http://agent.test:{port}", retry=FAST,
                                   targets=TargetPolicy.from_entries(["loopback"], resolver=flipping)))
    try:
        with pytest.raises(AgentTargetRefused) as refused:
            _ = session.card
    finally:
        session.close()
    assert str(refused.value) == (
        f"A connection to agent.test:{port} is refused: agent.test resolves to 169.254.169.254, which is in "
        "169.254.0.0/16 (link-local and cloud metadata addresses are never allowed).")
    assert flipping.asked == ["agent.test", "agent.test"]  # checked, then resolved again when connecting


def test_a_rebinding_to_a_class_outside_the_policy_is_caught_too(oracle_url: str) -> None:
    port = oracle_url.rsplit(":", 1)[1]
    session = A2ASession(A2AConfig(endpoint=f"http://agent.test:{port}", retry=FAST, targets=TargetPolicy.from_entries(
        ["loopback"], resolver=Flipping("127.0.0.1", "10.0.0.1", calls=1))))
    try:
        with pytest.raises(AgentTargetRefused, match=f"A connection to agent.test:{port} is refused: agent.test "
                                                     r"resolves to 10\.0\.0\.1, which is a private address"):
            _ = session.card
    finally:
        session.close()


@pytest.mark.parametrize("transport", ["jsonrpc", "http-json", "grpc"])
def test_connections_go_to_the_checked_address_on_every_binding(transport: str) -> None:
    """`agent.test` is in no DNS: the run works only because it connects where the policy resolved."""
    port, grpc_port = free_port(), free_port()
    card = oracle_card(f"http://agent.test:{port}", grpc_url=f"agent.test:{grpc_port}")
    resolver = Flipping("127.0.0.1", "127.0.0.1", calls=0)
    with BackgroundServer(a2a_app(OracleExecutor(), card), port=port, grpc_port=grpc_port):
        session = A2ASession(A2AConfig(endpoint=f"http://agent.test:{port}", retry=FAST, transport=transport,
                                       targets=TargetPolicy.from_entries(["loopback"], resolver=resolver)))
        try:
            assert session.card.name == card.name  # the card, then the access check over the binding
            exchange = session.send([new_text_part("Hi")], None, None, turn=0)
        finally:
            session.close()
    assert exchange.records[0].error is None
    assert len(resolver.asked) >= 3  # the endpoint, the card's interfaces, and each connection


# -- the service: the default policy, and the policy inside its evaluations ---------------------------------


async def test_the_services_default_policy_refuses_loopback_and_private_targets(tmp_path: Path) -> None:
    from tests.support.service import start_service

    default = ServiceSettings.from_env({}).allowed_targets
    assert default == ("public",)
    service = start_service(tmp_path, allowed_targets=default)
    try:
        texts = {}
        for endpoint in ("http://127.0.0.1:9000", "http://10.0.0.1:9000"):
            task = await ask(service.url, "run_tau2_evaluation", {
                "domain": "airline", "agent_endpoint": endpoint, "user": "scripted_user", "user_llm": "scripted",
                "task_ids": ["1"]})
            assert task.status.state == TaskState.TASK_STATE_FAILED
            texts[endpoint] = task.status.message.parts[0].text
    finally:
        service.stop()
    assert texts == {
        "http://127.0.0.1:9000": "agent_endpoint 'http://127.0.0.1:9000' is refused: 127.0.0.1 is a loopback "
                                 "address, and the allowed targets (public) do not include it. To allow it: "
                                 "--allowed-targets public,loopback",
        "http://10.0.0.1:9000": "agent_endpoint 'http://10.0.0.1:9000' is refused: 10.0.0.1 is a private address, "
                                "and the allowed targets (public) do not include it. To allow it: "
                                "--allowed-targets public,private",
    }


async def test_the_services_policy_reaches_its_evaluations_and_refuses_what_the_card_names(
        serve: Any, tmp_path: Path, witness: socket.socket) -> None:
    from tests.support.service import start_service

    elsewhere = f"http://127.0.0.2:{witness.getsockname()[1]}"
    agent = serve(lambda url: agent_app(OracleLike(), url, card_url=elsewhere))
    service = start_service(tmp_path, allowed_targets=("127.0.0.1",))
    try:
        task = await ask(service.url, "run_tau2_evaluation", {
            "domain": "airline", "agent_endpoint": agent.url, "user": "scripted_user", "user_llm": "scripted",
            "task_ids": ["1"]})
        task = await wait_for_task(service.url, task.id)
    finally:
        service.stop()
    assert task.status.state == TaskState.TASK_STATE_FAILED
    error = task.status.message.parts[0].text.split("\nError: ", 1)[1].split("\n")[0]
    assert error == (
        f"the evaluation process exited with code 2: The agent card at {agent.url} names {elsewhere} for JSON-RPC; "
        "that URL is refused: 127.0.0.2 is a loopback address, and the allowed targets (127.0.0.1) do not include "
        "it. To allow it: --allowed-targets 127.0.0.1,loopback")
    assert connections(witness) == 0


# -- replies over --a2a-max-reply-bytes ---------------------------------------------------------------------


class HugeReply(_BodyMiddleware):
    """Answers requests carrying `needle` with `size` bytes of JSON-looking text, streamed 1 MB at a time."""

    def __init__(self, app: ASGIApp, needle: str, size: int) -> None:
        super().__init__(app)
        self.needle = needle.encode()
        self.size = size
        self.sent = 0

    async def intercept(self, exchange: HttpExchange, send: Send) -> bool:
        if self.needle not in exchange.body:
            return False
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(self.size).encode())]})
        chunk = b'{"jsonrpc": "2.0", "result": {"message": {"parts": [{"text": "' + b"x" * ((1 << 20) - 61)
        try:
            while self.sent + len(chunk) < self.size:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                self.sent += len(chunk)
                chunk = b"x" * (1 << 20)
            await send({"type": "http.response.body", "body": b"x" * (self.size - self.sent)})
            self.sent = self.size
        except (OSError, asyncio.CancelledError):  # the client stopped reading and hung up
            pass
        return True


FORTY_MB = 40 << 20


@pytest.mark.parametrize("transport", ["jsonrpc", "http-json"])
def test_a_40_mb_reply_ends_its_simulation_as_a_malformed_reply(serve: Any, tmp_path: Path, transport: str) -> None:
    server = serve(lambda url: agent_app(OracleLike(), url,
                                         [Middleware(HugeReply, needle=marker("5"), size=FORTY_MB)]))
    outcome = run_a2a(server.url, tmp_path, task_ids=["1", "5"], a2a=A2AConfig(
        endpoint=server.url, retry=FAST, transport=transport))
    rewards = {s.task_id: s.reward_info.reward for s in outcome.results.simulations}
    assert rewards == {"1": 1.0, "5": 0.0}
    [failed] = [r for r in records_of(outcome, "5") if r["error"]]
    assert failed["error"] == "malformed-reply"
    assert failed["error_message"].startswith(f"the reply to POST {server.url}")
    assert f"is over {8 << 20} bytes (--a2a-max-reply-bytes); tau2-a2a stopped reading it at " in failed["error_message"]
    assert failed["error_message"].endswith(
        "Raise --a2a-max-reply-bytes if the agent's replies are really this large.")
    assert 8 << 20 < failed["response_bytes"] <= (8 << 20) + (1 << 20)  # read to just past the cap, not 40 MB
    assert outcome.metrics["run"]["errors_by_category"] == {"malformed-reply": 1}


def test_a_40_mb_reply_over_grpc_ends_as_a_malformed_reply(tmp_path: Path) -> None:
    port, grpc_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    huge = ReplyOnTask("5", [new_text_part("x" * FORTY_MB)])
    card = oracle_card(url, grpc_url=f"127.0.0.1:{grpc_port}")
    with BackgroundServer(a2a_app(huge, card), port=port, grpc_port=grpc_port):
        outcome = run_a2a(url, tmp_path, task_ids=["1", "5"], a2a=A2AConfig(endpoint=url, retry=FAST,
                                                                          transport="grpc"))
    rewards = {s.task_id: s.reward_info.reward for s in outcome.results.simulations}
    assert rewards == {"1": 1.0, "5": 0.0}
    [failed] = [r for r in records_of(outcome, "5") if r["error"]]
    assert failed["error"] == "malformed-reply"
    assert failed["grpc_status"] == "RESOURCE_EXHAUSTED"
    assert failed["error_message"].startswith(f"SendMessage to {url}: the reply is over the --a2a-max-reply-bytes "
                                              "limit (gRPC: ")
    assert str(8 << 20) in failed["error_message"]
    assert failed["response_bytes"] == 0  # gRPC refused the message whole: none of it reached tau2-a2a


def test_serve_passes_its_policy_to_each_evaluation_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tau2_a2a.cli import build_parser
    from tau2_a2a.cli.serve import settings_from_args
    from tau2_a2a.service.request import EvaluationRequest
    from tests.support.service import child_given

    monkeypatch.delenv("TAU2_EVAL_ALLOWED_TARGETS", raising=False)
    spec = EvaluationRequest(domain="airline", agent_endpoint="http://127.0.0.1:9", total_simulations=1)
    for flags, entries in (([], "public"), (["--allowed-targets", "public, Loopback"], "public,loopback")):
        settings = settings_from_args(build_parser().parse_args(
            ["serve", "--results-dir", str(tmp_path / entries), *flags]))
        tools = settings.tools()  # not started: nothing to close
        assert tools.targets.entries == tuple(entries.split(","))
        given = child_given(tmp_path / f"child-{entries}", spec, allowed_targets=tools.manager.children.allowed_targets)
        assert given["request"]["settings"]["a2a"]["a2a_allowed_targets"] == entries.split(",")


@pytest.mark.parametrize("flags, line", [
    (["--a2a-max-reply-bytes", "0"], "error: --a2a-max-reply-bytes must be a whole number from 1 to 1099511627776, "
                                     "got 0."),
    (["--a2a-allowed-targets", " , "], ("error: --a2a-allowed-targets needs at least one entry, e.g. "
                                        "--a2a-allowed-targets public,loopback.")),
    (["--a2a-allowed-targets", "http://x/"], ("error: Allowed target 'http://x/' is neither a host name, a *.domain "
                                              "wildcard, an IP address, a CIDR network (e.g. 10.0.0.0/8) nor one of "
                                              "public, private, loopback.")),
])
def test_bad_policy_and_cap_flags_get_one_line(tmp_path: Path, flags: list[str], line: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run_refused("http://127.0.0.1:9", tmp_path, capsys, *flags)
    assert (code, lines) == (2, [line])


@pytest.mark.parametrize("entry", ["*example.com", "a.*.b", "**.x", "http://x/", "agents.example.com:9000"])
def test_entries_that_are_no_host_wildcard_address_network_or_keyword_are_refused(entry: str) -> None:
    with pytest.raises(ValueError) as refused:
        TargetPolicy.parse(f"public,{entry}")
    assert str(refused.value) == (
        f"Allowed target {entry!r} is neither a host name, a *.domain wildcard, an IP address, a CIDR network "
        "(e.g. 10.0.0.0/8) nor one of public, private, loopback.")


def test_host_entries_allow_a_name_and_wildcards_its_subdomains() -> None:
    def resolver(host: str) -> list[Any]:
        return [ipaddress.ip_address("10.1.2.3")]

    policy = TargetPolicy.from_entries(["agents.example.com", "*.corp.example"], resolver=resolver)
    assert policy.check("http://agents.example.com:9", "it") == "http://agents.example.com:9"
    assert policy.check("http://a.b.corp.example", "it") == "http://a.b.corp.example"
    with pytest.raises(TargetRefused, match="To allow it: --a2a-allowed-targets agents.example.com,"
                                            r"\*\.corp\.example,private$"):
        policy.check("http://corp.example", "it")
