"""The arguments of run_tau2_evaluation are declared once: what the schema says of each, check_request does.

Property-style over EvaluationRequest's fields: each whole number's minimum
and maximum, each choice's enum, each default and each required argument, as
the schema states them under a service's policy, hold in check_request; and
every AgentBeats config key is an argument (or a sharding key).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tau2_a2a.client.targets import TargetPolicy
from tau2_a2a.service.argument_policy import ArgumentRefused
from tau2_a2a.service.assessment import CONFIG_KEYS, AssessmentRejected, parse
from tau2_a2a.service.jobs.limits import Limits
from tau2_a2a.service.request import TOKEN_ARGUMENT, EvaluationRequest, RequestPolicy, check_request, request_schema
from tau2_a2a.tau2bench.seam import defaults, distribution

pytestmark = pytest.mark.nvidia

POLICY = RequestPolicy(limits=Limits(max_concurrency=4, max_simulations=150),
                       targets=TargetPolicy.from_entries(("loopback",)))
SCHEMA: dict[str, Any] = request_schema(POLICY)
PROPERTIES = {name: schema for name, schema in SCHEMA["properties"].items() if name != TOKEN_ARGUMENT}
BASE: dict[str, Any] = {"domain": "airline", "agent_endpoint": "http://127.0.0.1:9", "task_ids": ["0"]}
SHARDING = {"shard_index", "num_shards", "num_instances"}


def of(kind: str) -> list[str]:
    return [name for name, schema in PROPERTIES.items() if schema["type"] == kind]


def refused(name: str, sent: dict[str, Any]) -> str:
    """The refusal of `sent`, which must name the argument `name`."""
    with pytest.raises(ArgumentRefused) as refusal:
        check_request(sent, POLICY)
    message = str(refusal.value)
    assert re.search(rf"\b{name}\b", message) and "\n" not in message, message
    return message


def test_the_schema_lists_every_field_the_caller_sends() -> None:
    derived = {"total_simulations", "shard_index", "num_shards"}
    assert set(PROPERTIES) == set(EvaluationRequest.__dataclass_fields__) - derived
    assert of("integer") == ["num_trials", "num_tasks", "max_steps", "max_concurrency"]


@pytest.mark.parametrize("name", of("integer"))
def test_a_whole_number_is_checked_with_the_schemas_bounds(name: str) -> None:
    schema = PROPERTIES[name]
    low, high = schema["minimum"], schema["maximum"]
    assert refused(name, {**BASE, name: low - 1}) == f"{name} must be at least {low}, got {low - 1}."
    assert refused(name, {**BASE, name: high + 1}) == f"{name} must be at most {high} on this service, got {high + 1}."
    assert refused(name, {**BASE, name: low + 0.5}) == f"{name} must be a whole number, got {low + 0.5}."
    for accepted in (low, high, float(low)):
        assert getattr(check_request({**BASE, name: accepted}, POLICY), name) == int(accepted)


def test_the_policy_sets_the_bounds_it_owns() -> None:
    assert (PROPERTIES["num_trials"]["maximum"], PROPERTIES["max_concurrency"]["maximum"]) == (150, 4)
    assert PROPERTIES["max_concurrency"]["default"] == 3  # tau2's 3, under this service's 4
    lower = request_schema(RequestPolicy(limits=Limits(max_concurrency=2)))["properties"]["max_concurrency"]
    assert lower["default"] == 2
    assert check_request(BASE, RequestPolicy(limits=Limits(max_concurrency=2), targets=POLICY.targets)) \
        .max_concurrency == 2


@pytest.mark.parametrize("name", list(PROPERTIES))
def test_a_missing_argument_takes_the_schemas_default(name: str) -> None:
    sent = {key: value for key, value in BASE.items() if key != name}
    if name in SCHEMA["required"]:
        refused(name, sent)
        return
    assert getattr(check_request(sent, POLICY), name) == PROPERTIES[name].get("default")


@pytest.mark.parametrize("name", [name for name, schema in PROPERTIES.items() if "enum" in schema])
def test_a_choice_outside_the_schemas_enum_is_refused(name: str) -> None:
    refused(name, {**BASE, name: "no-such-choice"})


@pytest.mark.parametrize("name", [name for name in PROPERTIES if name not in of("integer")])
def test_a_value_of_the_wrong_json_type_is_refused(name: str) -> None:
    wrong = {"string": 7, "boolean": "yes", "array": [], "object": "hot"}[PROPERTIES[name]["type"]]
    refused(name, {**BASE, name: wrong})


def test_every_agentbeats_config_key_is_an_argument_or_a_sharding_key() -> None:
    assert set(CONFIG_KEYS) - SHARDING == set(PROPERTIES) - {"agent_endpoint"}
    assert list(CONFIG_KEYS)[-3:] == ["shard_index", "num_shards", "num_instances"]


@pytest.mark.parametrize("name", of("integer"))
def test_an_agentbeats_whole_number_below_its_minimum_is_refused_by_its_key(name: str) -> None:
    low = PROPERTIES[name]["minimum"]
    with pytest.raises(AssessmentRejected) as rejected:
        parse({"participants": {"agent": "http://127.0.0.1:9"}, "config": {"domain": "airline", name: low - 1}})
    assert str(rejected.value) == f"config.{name} must be {CONFIG_KEYS[name]}; got {low - 1}."
    assert CONFIG_KEYS[name].startswith(f"a whole number >= {low}")


def test_an_agentbeats_config_reaches_check_request_as_given() -> None:
    config = {"domain": "airline", "num_tasks": 2.0, "max_steps": 30, "task_ids": [1.0, "2"], "agent_driven": True}
    assessment = parse({"participants": {"agent": "http://127.0.0.1:9"}, "config": config})
    assert assessment.arguments == {"agent_endpoint": "http://127.0.0.1:9", "domain": "airline", "num_tasks": 2,
                                    "max_steps": 30, "task_ids": ["1", "2"], "agent_driven": True}
    checked = check_request(assessment.arguments, POLICY)
    assert (checked.task_ids, checked.num_tasks, checked.total_simulations) == (["1", "2"], 2, 2)


def test_tau2s_defaults_are_read_without_importing_it_as_tau2_has_them() -> None:
    assert {name: getattr(defaults, name) for name in defaults.NAMES} \
        == {name: getattr(distribution, name) for name in defaults.NAMES}
