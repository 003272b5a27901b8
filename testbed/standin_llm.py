"""A deterministic OpenAI-compatible chat server standing in for the LLM provider.

It plays the agent of a tau2 task named by the scripted user's marker
("[tau2-task domain=airline id=N]"): it follows the oracle's plan for the task
(oracle_script.oracle_steps): its k-th reply, once k replies have been answered
by a tool result or the user's words, is the task's golden tool call or
hand-over k, and the last one says the task's communicate_info. Real HTTP on
loopback, so LiteLLM, tau2's llm_agent and the baseline A2A agent all run
unchanged. It records every request body it receives.

Built with a fault plan (`faults`, testbed/standin_faults.py) it is an agent
that goes wrong in chosen ways, the fault a pure function of the task: a wrong
argument, a skipped write, an early goodbye, a transfer (announced in the reply
that calls it), a loop until --max-steps (two calls in each reply), a closing
text that leaves out or misstates what the user must be told, numbers in the
other JSON form (2 for 2.0). The default plan makes no fault.

By default it calls tools by OpenAI function calling. With `tool_calls_as_text`
it writes them as `{"tool_calls": [...]}` text instead and reads tool results
from user messages: that is how an agent that declares no tools (the ADK
reference agent) asks tau2 for them and gets their results. A request with
`"stream": true` (Pydantic AI's A2A worker always streams) gets the same
reply as OpenAI streams it, in server-sent events. Offered the agent-driven
mode's `send_message_to_user` (docs/mcp-tools.md), it says each of its texts
through that tool, and ends once the user has ended the conversation.

It also plays tau2's LLM user simulator (`user_simulator`): a request whose
system prompt holds a task's `<scenario>` gets, as the user's first words, the
task's reason for calling plus its marker (so an oracle agent can play the task),
and `###STOP###` once the agent has spoken again.

And it plays upstream tau2-bench's judge of natural-language assertions
(`judge_reply`): a request holding a conversation and its `expectedOutcomes`
gets one verdict per outcome in the JSON upstream's judge asks for. A verdict
is a pure function of the prompt: an outcome naming figures (amounts,
quantities, tracking numbers) is met when the agent said each of them; one
that tells the user something in words is met when the agent said its last
word; one that asks the agent to act is met when the agent acted (a tool
result) and then spoke.

And it plays upstream's reviewer of conversations (`--auto-review`,
`review_reply`): the full review names, as the agent's errors, the task's
expected tool calls the agent never made; the authentication check says
"succeeded" when the agent called a tool and "not_needed" otherwise; the
review of the user alone finds no error. Each is a pure function of the prompt.

Run on its own for benchmarks and by hand (it prints its api base, the value
for OPENAI_API_BASE or a model's `api_base`, and serves until stopped):

    python -m testbed.standin_llm --port 8765
    python -m testbed.standin_llm --port 8765 --faults hashed   # each task's fault by a hash of its id
"""

from __future__ import annotations

import ast
import json
import re
import threading
from collections.abc import Callable, Iterator
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from tau2_a2a.mcp.invitation import CONVERSATION_ENDED, SEND_TO_USER
from tau2_a2a.tau2bench.participants.oracle_script import find_marker, find_task, task_marker
from tau2_a2a.tau2bench.seam.distribution import STOP
from testbed.standin_faults import FaultPlan, agent_plan, hashed_plan, no_faults

MODEL = "openai/standin"
NO_MARKER = "I can only play tasks named by a [tau2-task domain=... id=...] line."
USER_DOMAINS = ("airline", "retail")  # the domains whose scenarios it recognises as a user


class StandinLLM:
    """The chat completions endpoint and the log of what it was asked."""

    def __init__(self, tool_calls_as_text: bool = False, faults: FaultPlan = no_faults) -> None:
        self.tool_calls_as_text = tool_calls_as_text
        self.faults = faults
        self.requests: list[dict[str, Any]] = []
        self.usages: list[dict[str, int]] = []  # the usage returned with each answer, in the requests' order
        self.api_base = ""  # set once served: the URL LiteLLM's `api_base` takes
        self._lock = threading.Lock()

    @classmethod
    def serve(cls, serve: Callable[[Callable[[str], Any]], Any], tool_calls_as_text: bool = False,
              faults: FaultPlan = no_faults) -> StandinLLM:
        """Start one on loopback with the tests' `serve` fixture."""
        llm = cls(tool_calls_as_text, faults)
        server = serve(lambda url: llm.app())
        llm.api_base = f"{server.url}/v1"
        return llm

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/v1/chat/completions", self.completions, methods=["POST"]),
            Route("/chat/completions", self.completions, methods=["POST"]),
        ])

    async def completions(self, request: Request) -> JSONResponse | StreamingResponse:
        body = await request.json()
        message = self.reply(body.get("messages", []), body.get("tools"))
        prompt_tokens = len(json.dumps([body.get("messages"), body.get("tools")], sort_keys=True)) // 4
        completion_tokens = len(json.dumps(message, sort_keys=True)) // 4
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        with self._lock:
            self.requests.append(body)
            self.usages.append(usage)
        finish_reason = "tool_calls" if message.get("tool_calls") else "stop"
        reply_id, model = f"chatcmpl-standin-{len(self.requests)}", body.get("model", "standin")
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(stream_chunks(reply_id, model, message, finish_reason,
                                                   usage if include_usage else None),
                                     media_type="text/event-stream")
        return JSONResponse({
            "id": reply_id,
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": usage,
        })

    def review_requests(self) -> list[dict[str, Any]]:
        """The requests it answered as upstream's reviewer of conversations."""
        return [body for body in self.requests if review_kind(body.get("messages", [])) is not None]

    def judge_requests(self) -> list[dict[str, Any]]:
        """The requests it answered as upstream's judge of natural-language assertions."""
        return [body for body in self.requests if judge_prompt(body.get("messages", [])) is not None]

    def user_requests(self) -> list[dict[str, Any]]:
        """The requests it answered as tau2's user simulator."""
        return [body for body in self.requests if user_scenario_task(body.get("messages", [])) is not None]

    def reply(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """As the judge when asked for verdicts, as the reviewer when asked for a review, as the user when the
        system prompt holds a task's scenario, else as the agent."""
        prompt = judge_prompt(messages)
        if prompt is not None:
            return judge_reply(*prompt)
        kind = review_kind(messages)
        if kind is not None:
            return review_reply(kind, "\n".join(content_text(m.get("content")) for m in messages
                                                if m.get("role") == "user"))
        task = user_scenario_task(messages)
        if task is not None:
            return user_reply(messages, *task)
        return self.agent_reply(messages, tools)

    def agent_reply(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The plan's next reply once as many replies as it made so far have been answered, then its closing
        text (or, in a loop, its one reply) again. Offered `send_message_to_user`, it says its texts through it,
        and says goodbye once the user has ended the conversation."""
        opening = next((i for i, m in enumerate(messages) if m.get("role") == "user"
                        and find_marker(content_text(m.get("content")))), None)
        if opening is None:
            return {"role": "assistant", "content": NO_MARKER}
        marker = find_marker(content_text(messages[opening].get("content")))
        assert marker is not None
        plan = agent_plan(*marker, self.faults(*marker))
        done = answers(messages[opening + 1:])
        if messages[-1].get("role") == "tool" and CONVERSATION_ENDED in content_text(messages[-1].get("content")):
            return {"role": "assistant", "content": "Goodbye."}  # (the client may wrap the tool's text)
        reply = plan[min(done, len(plan) - 1)]
        calls = [{"id": f"call_standin_{done}" + (f"_{k}" if k else ""), "name": c.name, "arguments": c.arguments}
                 for k, c in enumerate(reply.calls)]
        if not calls and any((t.get("function") or {}).get("name") == SEND_TO_USER for t in tools or []):
            calls = [{"id": f"call_standin_{done}", "name": SEND_TO_USER, "arguments": {"message": reply.text or ""}}]
        if not calls:
            return {"role": "assistant", "content": reply.text}
        if self.tool_calls_as_text:
            return {"role": "assistant", "content": json.dumps({"tool_calls": calls})}
        return {
            "role": "assistant",
            "content": reply.text,
            "tool_calls": [{
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
            } for call in calls],
        }


def stream_chunks(reply_id: str, model: str, message: dict[str, Any], finish_reason: str,
                  usage: dict[str, int] | None) -> Iterator[str]:
    """The reply as OpenAI's server-sent events for `"stream": true`: the whole message in one delta (tool calls
    indexed), then the finish reason, the usage when asked for (`stream_options.include_usage`), and [DONE]."""
    def event(choices: list[dict[str, Any]], **extra: Any) -> str:
        chunk = {"id": reply_id, "object": "chat.completion.chunk", "created": 0, "model": model,
                 "choices": choices, **extra}
        return f"data: {json.dumps(chunk)}\n\n"

    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
    yield event([{"index": 0, "delta": delta, "finish_reason": None}])
    yield event([{"index": 0, "delta": {}, "finish_reason": finish_reason}])
    if usage is not None:
        yield event([], usage=usage)
    yield "data: [DONE]\n\n"


def answers(messages: list[dict[str, Any]]) -> int:
    """How many of the agent's replies have been answered: each by the user's words or by the results of its
    calls (several results in a row answer one reply)."""
    count, previous = 0, None
    for message in messages:
        role = message.get("role")
        count += role == "user" or (role == "tool" and previous != "tool")
        previous = role
    return count


def content_text(content: Any) -> str:
    """A chat message's content as one string: OpenAI content may be a list of text blocks."""
    if isinstance(content, list):
        return "\n".join(block.get("text", "") for block in content if isinstance(block, dict))
    return content or ""


def user_opening(domain: str, task_id: str) -> str:
    """The user simulator's first words for a task: its reason for calling and its marker."""
    scenario = find_task(domain, task_id).user_scenario.instructions
    reason = getattr(scenario, "reason_for_call", None) or str(scenario)
    return f"{reason}\n{task_marker(domain, task_id)}"


def user_reply(messages: list[dict[str, Any]], domain: str, task_id: str) -> dict[str, Any]:
    """tau2 flips roles for its user: the user's own earlier words come back as "assistant"."""
    spoken = any(m.get("role") == "assistant" for m in messages)
    return {"role": "assistant", "content": STOP if spoken else user_opening(domain, task_id)}


def user_scenario_task(messages: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(domain, task id) whose scenario the system prompt holds, if it is a user simulator's prompt."""
    system = " ".join(content_text(m.get("content")) for m in messages if m.get("role") == "system")
    if "<scenario>" not in system:
        return None
    found = [(len(text), key) for key, text in scenarios().items() if text in system]
    return max(found)[1] if found else None


@lru_cache(maxsize=1)
def scenarios() -> dict[tuple[str, str], str]:
    """Every recognised task's scenario as tau2 writes it into the user simulator's prompt."""
    from tau2_a2a.tau2bench.seam.distribution import load_tasks

    return {(domain, task.id): str(task.user_scenario) for domain in USER_DOMAINS for task in load_tasks(domain)}


# -- upstream's judge of natural-language assertions (tau2.evaluator.evaluator_nl_assertions) --

JUDGE_FORMAT_WORD = "metExpectation"  # in the judge's system prompt: the JSON field of each verdict
_CONVERSATION = "conversation:"
_OUTCOMES = "expectedOutcomes:"
_TURN = re.compile(r"^\s*(assistant|user|tool|system): ", re.MULTILINE)
# A figure stands alone: "$8,276.23", "64GB", "20 hours"; not the digits of an id such as "#W2702727".
_FIGURE = re.compile(r"(?<![\w#.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w#.,])\d+(?:\.\d+)?")
_TOLD = re.compile(r"\b(?:tell|inform)s? the user\b", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z][A-Za-z-]*")


def judge_prompt(messages: list[dict[str, Any]]) -> tuple[list[tuple[str, str]], list[str]] | None:
    """(conversation turns as (role, text), expected outcomes) of a judge request, else None."""
    system = " ".join(content_text(m.get("content")) for m in messages if m.get("role") == "system")
    user = "\n".join(content_text(m.get("content")) for m in messages if m.get("role") == "user")
    if JUDGE_FORMAT_WORD not in system or _CONVERSATION not in user or _OUTCOMES not in user:
        return None
    conversation, _, outcomes = user.partition(_CONVERSATION)[2].rpartition(_OUTCOMES)
    try:
        expected = ast.literal_eval(outcomes.strip())
    except (ValueError, SyntaxError):
        return None
    if not isinstance(expected, list) or not all(isinstance(e, str) for e in expected):
        return None
    return conversation_turns(conversation), expected


def conversation_turns(text: str) -> list[tuple[str, str]]:
    """Upstream writes each message as "role: content"; a content's own lines continue its message."""
    starts = list(_TURN.finditer(text))
    return [(start[1], text[start.end():end.start() if end else len(text)].strip())
            for start, end in zip(starts, starts[1:] + [None])]


def figures(text: str) -> set[Decimal]:
    """The numbers `text` states, by value: "$1,126.04" and "1126.04" are one figure, "481.5" and "481.50" too."""
    found: set[Decimal] = set()
    for match in _FIGURE.finditer(text):
        try:
            found.add(Decimal(match[0].replace(",", "")).normalize())
        except InvalidOperation:
            pass
    return found


def says_something(text: str) -> bool:
    """Whether a message said something: upstream writes a tool call's empty content as "None"."""
    return text not in ("", "None")


def verdict(turns: list[tuple[str, str]], outcome: str) -> tuple[bool, str]:
    """Whether the agent met `outcome` in `turns`, and why, in one sentence."""
    said = "\n".join(text for role, text in turns if role == "assistant" and says_something(text))
    stated = figures(outcome)
    if stated:
        missing = sorted(stated - figures(said))
        if missing:
            return False, "The agent never said " + ", ".join(format(f, "f") for f in missing) + "."
        return True, "The agent said " + ", ".join(format(f, "f") for f in sorted(stated)) + "."
    if _TOLD.search(outcome):
        words = _WORD.findall(outcome)
        last = words[-1].lower() if words else ""
        if last and re.search(rf"\b{re.escape(last)}\b", said, re.IGNORECASE):
            return True, f"The agent told the user '{last}'."
        return False, f"The agent never told the user '{last}'."
    tool_results = [i for i, (role, _) in enumerate(turns) if role == "tool"]
    if tool_results and any(role == "assistant" and says_something(text) for role, text in turns[tool_results[-1]:]):
        return True, "The agent acted with its tools and then told the user."
    return False, "The agent did not act with its tools and then tell the user."


def judge_reply(turns: list[tuple[str, str]], expected: list[str]) -> dict[str, Any]:
    """One verdict per expected outcome, in the order given, as upstream's judge parses them."""
    results = []
    for outcome in expected:
        met, reasoning = verdict(turns, outcome)
        results.append({"expectedOutcome": outcome, "reasoning": reasoning, "metExpectation": met})
    return {"role": "assistant", "content": json.dumps({"results": results})}


# -- upstream's reviewer of conversations (tau2.evaluator.reviewer: review_llm_judge, auth_classifier) --

REVIEW_FULL, REVIEW_USER, REVIEW_AUTH = "full", "user", "auth"
_REVIEW_GOALS = {  # the first words of each reviewer's system prompt, after "# Goal"
    REVIEW_FULL: "Assess this conversation to determine if the user simulator or the agent made any errors",
    REVIEW_USER: "Assess this conversation to determine if the user simulator made any errors",
    REVIEW_AUTH: "Classify the user authentication outcome",
}
_SPEAKER = re.compile(r"^(?:\[TURN \d+\] )?\*\*(assistant|user|tool[^*]*|system)\*\*:", re.MULTILINE)
_TOOL_CALL = re.compile(r"^\*\*Tool Call\*\*: (\S+)$", re.MULTILINE)


def review_kind(messages: list[dict[str, Any]]) -> str | None:
    """Which of upstream's reviewers a request is from (full, user, auth), else None."""
    system = " ".join(content_text(m.get("content")) for m in messages if m.get("role") == "system")
    return next((kind for kind, goal in _REVIEW_GOALS.items() if goal in system), None)


def tagged(text: str, tag: str) -> str:
    """The text between <tag> and </tag> (empty when absent)."""
    return text.partition(f"<{tag}>")[2].partition(f"</{tag}>")[0]


def agent_tool_calls(conversation: str) -> list[str]:
    """The tools the agent called, in order, in a conversation as upstream's reviewer is shown it."""
    calls: list[str] = []
    speakers = list(_SPEAKER.finditer(conversation))
    for speaker, following in zip(speakers, speakers[1:] + [None]):
        if speaker[1] == "assistant":
            calls += _TOOL_CALL.findall(conversation[speaker.end():following.start() if following else None])
    return calls


def review_reply(kind: str, prompt: str) -> dict[str, Any]:
    """A review in the JSON upstream's reviewers parse: see the module's docstring."""
    conversation = tagged(prompt, "Conversation")
    called = agent_tool_calls(conversation)
    if kind == REVIEW_AUTH:
        verdict = ({"status": "succeeded", "reasoning": f"The agent called {called[0]} on the user's account."}
                   if called else {"status": "not_needed", "reasoning": "The agent called no tool."})
    elif kind == REVIEW_USER:
        spoke = len(re.findall(r"^(?:\[TURN \d+\] )?\*\*user\*\*:", conversation, re.MULTILINE))
        verdict = {"errors": [], "summary": f"The user spoke {spoke} times and kept to its instructions."}
    else:
        block = tagged(prompt, "Example Action Trajectory").strip().removeprefix("```json").removesuffix("```")
        expected = [action["name"] for action in json.loads(block or "[]")
                    if action.get("requestor", "assistant") == "assistant"]
        missing = list(expected)
        for name in called:
            if name in missing:
                missing.remove(name)
        verdict = {
            "errors": [{"source": "agent", "error_tags": ["missed_required_action"], "severity": "critical",
                        "turn_idx": None, "reasoning": f"The agent never called {name}.",
                        "correct_behavior": f"Call {name} as the task requires."} for name in missing],
            "summary": f"The agent made {len(expected) - len(missing)} of the {len(expected)} expected tool calls.",
        }
    return {"role": "assistant", "content": json.dumps(verdict)}


def main(argv: list[str] | None = None) -> None:
    """Serve on loopback until stopped, printing the api base to point LiteLLM at."""
    import argparse
    import time

    from tau2_a2a.protocol.hosting import BackgroundServer, free_port

    parser = argparse.ArgumentParser(description="A deterministic stand-in for an OpenAI-compatible LLM provider.")
    parser.add_argument("--port", type=int, default=0, help="loopback port (default: a free one)")
    parser.add_argument("--tool-calls-as-text", action="store_true", help="as the agent, write tool calls as text")
    parser.add_argument("--faults", choices=("none", "hashed"), default="none",
                        help="as the agent, make no fault (the oracle's plan) or each task's fault by a hash of "
                             "its domain and id (testbed/standin_faults.py)")
    args = parser.parse_args(argv)
    llm = StandinLLM(args.tool_calls_as_text, hashed_plan if args.faults == "hashed" else no_faults)
    with BackgroundServer(llm.app(), port=args.port or free_port()) as server:
        print(f"{server.url}/v1", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
