"""The evaluation service continues a caller's trace: its request span, the evaluation's run (a process of its
own, exporting to the same real OTLP/HTTP receiver) and, linked to it, each simulation's trace."""

from __future__ import annotations

import asyncio
from pathlib import Path

from a2a.client import ClientCallContext
from a2a.types import SendMessageConfiguration, SendMessageRequest

from tau2_a2a.client import tracing
from tau2_a2a.service.caller import connect, request_message
from tau2_a2a.service.jobs.limits import Limits
from tests.support.service import start_service

RUN = "run_tau2_evaluation"


async def send(url: str, arguments: dict, trace: dict[str, str]) -> None:
    """run_tau2_evaluation, answered at once (the evaluation goes on), its request carrying `trace`."""
    client, http = await connect(url)
    try:
        request = SendMessageRequest(message=request_message(RUN, arguments),
                                     configuration=SendMessageConfiguration(return_immediately=True))
        async for _ in client.send_message(request, context=ClientCallContext(timeout=60, service_parameters=trace)):
            pass
    finally:
        await http.aclose()


def test_an_evaluation_continues_the_callers_trace(traced, oracle_url: str, tmp_path: Path) -> None:
    service = start_service(tmp_path / "service", limits=Limits(max_running=2))
    arguments = {"domain": "airline", "agent_endpoint": oracle_url, "user": "scripted_user", "user_llm": "scripted",
                 "task_ids": ["0", "1"]}
    try:
        with tracing.span("caller") as caller:
            asyncio.run(send(service.url, arguments, tracing.carrier()))
            trace = f"{caller.get_span_context().trace_id:032x}"
        # The run's span ends with its process's run (it imports tau2 first, at a lower priority: allow minutes).
        spans = traced.wait_for(lambda _: [s for s in traced.trace(trace) if s.name == "tau2-a2a run airline"],
                                timeout=540)
    finally:
        service.stop()
    [run] = spans
    ours = traced.trace(trace)
    served = [s for s in ours if s.name == "POST /" and s.attributes.get("http.response.status_code") == 200]
    assert served and all(s.kind == 2 for s in served)  # SERVER spans of the service, in the caller's trace
    assert run.attributes["tau2.task_ids"] == "0,1" and run.attributes["server.port"] > 0
    simulations = traced.wait_for(lambda spans: (lambda found: found if len(found) == 2 else None)(
        [s for s in spans if s.name.startswith("simulation ") and s.attributes.get("tau2_a2a.run.trace_id") == trace]))
    assert sorted(s.attributes["tau2.task.id"] for s in simulations) == ["0", "1"]
    assert all(s.attributes["tau2.reward"] == 1.0 for s in simulations)
    for simulation in simulations:  # a trace of its own, linked to the run's span
        assert simulation.trace_id != trace and simulation.parent_id == ""
        [link] = simulation.raw.links
        assert (link.trace_id.hex(), link.span_id.hex()) == (trace, run.span_id)


def test_the_service_continues_traces_outermost_on_every_binding(traced, tmp_path: Path) -> None:
    from tau2_a2a.service.app import build_app
    from tau2_a2a.service.auth import BearerAuth
    from tau2_a2a.service.request_limit import RequestSizeLimit
    from tau2_a2a.service.settings import ServiceSettings

    app = build_app(ServiceSettings(results_dir=tmp_path, auth_token="t"), "http://127.0.0.1:1")  # starts nothing
    # a request the token check or the size limit turns away is still served in the caller's trace
    assert [m.cls for m in app.user_middleware][:3] == [tracing.ContinueTrace, RequestSizeLimit, BearerAuth]
    assert [type(i).__name__ for i in app.state.grpc_interceptors][0] == "ContinueGrpcTrace"
    assert len(app.state.grpc_interceptors) == 2
