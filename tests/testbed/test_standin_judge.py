"""testbed/standin_llm.py as upstream's judge of natural-language assertions, over real HTTP.

The prompt is written as upstream v1.0.1 writes it (tau2.evaluator.evaluator_nl_assertions); the
end-to-end runs on upstream are in tests/tau2bench/test_upstream_judge.py.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from testbed.standin_llm import StandinLLM

SYSTEM = ("You will be given a list of expected outcomes and a conversation ... Your response should be a JSON "
          "object ... `metExpectation`: `true` if the agent satisfies the expected outcomes")


def ask(llm: StandinLLM, conversation: list[tuple[str, str]], outcomes: list[str]) -> list[tuple[str, bool, str]]:
    trajectory = "\n".join(f"{role}: {content}" for role, content in conversation)
    user = f"\n        conversation:\n        {trajectory}\n        \n        expectedOutcomes:\n        {outcomes}\n        "
    body = {"model": "gpt-4.1-2025-04-14", "temperature": 0.0,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]}
    reply = httpx.post(f"{llm.api_base}/chat/completions", json=body, timeout=30).json()
    results = json.loads(reply["choices"][0]["message"]["content"])["results"]
    return [(r["expectedOutcome"], r["metExpectation"], r["reasoning"]) for r in results]


@pytest.fixture
def judge(serve: Any) -> StandinLLM:
    return StandinLLM.serve(serve)


CONVERSATION = [
    ("assistant", "Hi! How can I help you today?"),
    ("user", "My order #W2702727 cost $999.99?\nAnd what is the fabric?"),
    ("assistant", "None"),
    ("tool", '{"order_id": "#W2702727", "status": "cancelled",\n "total": 1126.04}'),
    ("assistant", "Done. Your refund is $1,126.04 and the shirt is cotton."),
]


def test_verdicts_follow_what_the_agent_said(judge: StandinLLM) -> None:
    outcomes = [
        "Agent should tell the user the total refund amount is $1126.040.",
        "Agent should tell the user the total price of order #W2702727 is $999.99.",
        "Agent should tell the user the material is cotton.",
        "Agent should tell the user the color is blue.",
        "Agent should cancel the order",
    ]
    assert ask(judge, CONVERSATION, outcomes) == [
        (outcomes[0], True, "The agent said 1126.04."),
        (outcomes[1], False, "The agent never said 999.99."),  # the user said it, and the id's digits do not count
        (outcomes[2], True, "The agent told the user 'cotton'."),
        (outcomes[3], False, "The agent never told the user 'blue'."),
        (outcomes[4], True, "The agent acted with its tools and then told the user."),
    ]
    assert len(judge.judge_requests()) == 1 and judge.user_requests() == []


def test_an_agent_that_never_acted_or_spoke_after_acting_does_not_meet_an_action(judge: StandinLLM) -> None:
    outcome = ["Agent should cancel the order"]
    unmet = [(outcome[0], False, "The agent did not act with its tools and then tell the user.")]
    assert ask(judge, CONVERSATION[:2] + [("assistant", "Sure.")], outcome) == unmet
    assert ask(judge, CONVERSATION[:4], outcome) == unmet


def test_the_same_prompt_gets_the_same_verdicts(judge: StandinLLM) -> None:
    outcomes = ["Agent should tell the user the refund is $1,126.04.", "Agent should tell the user it is wool."]
    first = ask(judge, CONVERSATION, outcomes)
    assert ask(judge, CONVERSATION, outcomes) == first
    assert [met for _, met, _ in first] == [True, False]
