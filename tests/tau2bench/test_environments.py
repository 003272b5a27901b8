"""Environments from databases read once per process score exactly as tau2's stock ones.

The same native oracle runs (scripted user, tau2's run_domain) go once with
stock environments and once with ours; rewards, reward breakdowns, every
message and every database hash tau2's scoring computed must be identical.
With TAU2_A2A_VERIFY_DB_HASH set, every fast hash is also checked against
tau2's own as it is computed. CI runs a spread sample of each base split
(SAMPLE); TAU2_A2A_TEST_ALL_TASKS=1 runs the whole split of each domain.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from tau2.domains.airline.data_model import FlightDB
from tau2.domains.airline.utils import AIRLINE_DB_PATH
from tau2.domains.retail.data_model import RetailDB
from tau2.domains.retail.utils import RETAIL_DB_PATH
from tau2.registry import registry
from tau2.utils import get_dict_hash

from tau2_a2a.runner.run import evaluate
from tau2_a2a.runner.settings import RunSettings
from tau2_a2a.tau2bench.participants.oracle_script import judged_by_llm
from tau2_a2a.tau2bench.run.layout import results_path
from tau2_a2a.tau2bench.seam.distribution import load_tasks
from tau2_a2a.tau2bench.speed.copy_on_access import CopyOnAccess
from tau2_a2a.tau2bench.speed.environments import (
    VERIFY_ENV,
    CachedEnvironments,
    environments,
    registry_tables,
    template_for,
)
from tests.support.paths import REPO
from tests.support.runs import run_native_oracle
from tests.support.values import typed

SAMPLE = {"airline": 12, "retail": 20, "telecom": 20}
ALL_TASKS = os.environ.get("TAU2_A2A_TEST_ALL_TASKS") == "1"


def spread_sample(domain: str) -> list[str]:
    """Every k-th task of the base split, so the sample covers the whole split."""
    ids = [task.id for task in load_tasks(domain, task_split_name="base") if not judged_by_llm(task)]
    if ALL_TASKS:
        return ids
    step = max(1, len(ids) // SAMPLE[domain])
    return ids[::step][: SAMPLE[domain]]


@contextmanager
def recorded_hashes(domain: str) -> Iterator[list[tuple[str, str]]]:
    """Every database hash tau2 computes for `domain` while inside, in order (run one simulation at a time)."""
    constructor = registry.get_env_constructor(domain)
    hashes: list[tuple[str, str]] = []

    def recording(toolkit: Any, side: str) -> Any:
        compute = toolkit.get_db_hash

        def get_db_hash() -> str:
            hashes.append((side, compute()))
            return hashes[-1][1]
        return get_db_hash

    def build(**kwargs: Any) -> Any:
        environment = constructor(**kwargs)
        for side, toolkit in (("agent", environment.tools), ("user", environment.user_tools)):
            if toolkit is not None:
                toolkit.get_db_hash = recording(toolkit, side)
        return environment

    registry._domains[domain] = build
    try:
        yield hashes
    finally:
        registry._domains[domain] = constructor


def run_arm(domain: str, task_ids: list[str], results_dir: Path, cached: bool) -> tuple[Any, list]:
    with environments(cached), recorded_hashes(domain) as hashes:
        results = run_native_oracle(results_dir, domain, task_ids=task_ids, max_concurrency=1)
    return results, hashes


def outcome(simulation: Any) -> dict[str, Any]:
    """Everything a simulation produced but its ids and clock readings."""
    return {
        "termination": simulation.termination_reason,
        "reward_info": typed(simulation.reward_info.model_dump()),
        "messages": [typed(message.model_dump(exclude={"timestamp"})) for message in simulation.messages],
    }


@pytest.mark.parametrize("domain", ["airline", "retail", "telecom"])
def test_cached_environments_score_exactly_as_stock(domain: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VERIFY_ENV, "1")
    task_ids = spread_sample(domain)
    stock, stock_hashes = run_arm(domain, task_ids, tmp_path / "stock", cached=False)
    cached, cached_hashes = run_arm(domain, task_ids, tmp_path / "cached", cached=True)

    assert [s.task_id for s in cached.simulations] == [s.task_id for s in stock.simulations] == task_ids
    assert [s.reward_info.reward for s in cached.simulations] == [1.0] * len(task_ids)
    for ours, theirs in zip(cached.simulations, stock.simulations):
        assert outcome(ours) == outcome(theirs), ours.task_id
    per_simulation = 4 if domain == "telecom" else 2  # gold and predicted; telecom also the user's device
    assert len(cached_hashes) == per_simulation * len(task_ids)
    assert cached_hashes == stock_hashes


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # the float in an int field, on purpose
def test_the_fast_hash_is_taus_after_any_change() -> None:
    template = template_for(FlightDB, AIRLINE_DB_PATH)
    pristine = FlightDB.load(AIRLINE_DB_PATH)
    db = template.copy()
    assert template.hash(db) == get_dict_hash(pristine.model_dump())

    reservation_id, reservation = next(iter(db.reservations.items()))
    reservation.status = "cancelled"
    reservation.total_baggages = 2.0  # a float where the file has an int: tau2's hash tells them apart
    user = db.users[reservation.user_id]
    user.reservations.append("NEW001")
    db.reservations["NEW001"] = copy.deepcopy(reservation)
    db.flights.pop(next(iter(db.flights)))
    db.users.setdefault("new_user", copy.deepcopy(user))
    for flight in list(db.flights.values())[:3]:
        flight.dates.pop(next(iter(flight.dates)))
    expected = get_dict_hash(db.model_dump())
    assert template.hash(db) == expected
    assert expected != get_dict_hash(pristine.model_dump())

    db.reservations[1] = db.reservations[reservation_id]  # a key tau2's JSON would turn into "1"
    assert template.hash(db) is None  # not ours to compute: the toolkit falls back to tau2's
    db.reservations = dict(db.reservations)
    assert template.hash(db) is None


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # a float in an int field, on purpose
def test_records_only_read_keep_the_templates_text_and_an_equal_value_of_another_type_does_not() -> None:
    template = template_for(FlightDB, AIRLINE_DB_PATH)
    pristine = get_dict_hash(FlightDB.load(AIRLINE_DB_PATH).model_dump())
    db = template.copy()
    for flight in db.flights.values():  # what a search reads: every flight and date, deep inside
        for status in flight.dates.values():
            dict(getattr(status, "prices", {}))
    for user in db.users.values():
        user.reservations = list(user.reservations)  # an equal list of the same strings: the same text
        user.name.first_name = "".join(user.name.first_name)
    assert template.hash(db) == pristine

    status = next(s for f in db.flights.values() for s in f.dates.values() if hasattr(s, "prices"))
    status.prices["economy"] = float(status.prices["economy"])  # equal to the int, but "100.0" in tau2's text
    user = next(iter(db.users.values()))
    user.membership, user.saved_passengers = user.membership, [*user.saved_passengers]
    changed = get_dict_hash(db.model_dump())
    assert template.hash(db) == changed != pristine

    status.prices["economy"] = True  # equal to 1, "true" in tau2's text
    assert template.hash(db) == get_dict_hash(db.model_dump()) not in (changed, pristine)


def test_a_copy_never_changes_the_template_or_another_copy() -> None:
    template = template_for(RetailDB, RETAIL_DB_PATH)
    stock_hash = get_dict_hash(RetailDB.load(RETAIL_DB_PATH).model_dump())
    db = template.copy()
    for user in db.users.values():  # through a view
        user.orders.append("#W0000000")
    for order in dict(db.orders).values():  # through a plain copy of the table
        order.status = "cancelled"
    {**db.products}[next(iter(db.products))].name = "changed"  # through unpacking
    db.users.copy()[next(iter(db.users))].email = "changed"
    next(reversed(db.orders.items()))[1].items.clear()
    db.products.popitem()[1].variants.clear()
    db.orders.pop(next(iter(db.orders))).payment_history.clear()
    assert all(type(table) is CopyOnAccess for table in (db.users, db.orders, db.products))
    fresh = template.copy()
    assert template.hash(fresh) == get_dict_hash(fresh.model_dump()) == stock_hash


def test_two_concurrent_simulations_change_the_same_record_apart() -> None:
    pristine = FlightDB.load(AIRLINE_DB_PATH)
    reservation_id = next(key for key, r in pristine.reservations.items() if r.status is None)
    original = pristine.reservations[reservation_id].model_dump()
    barrier = threading.Barrier(2)
    built: dict[str, Any] = {}

    def simulation(name: str) -> None:
        environment = registry.get_env_constructor("airline")()
        built[name] = environment
        environment.use_tool("get_reservation_details", reservation_id=reservation_id)
        barrier.wait()  # both hold the record now
        if name == "cancels":
            environment.use_tool("cancel_reservation", reservation_id=reservation_id)
        else:
            environment.tools.db.reservations[reservation_id].passengers[0].first_name = "Renamed"
        barrier.wait()

    with environments(True):
        threads = [threading.Thread(target=simulation, args=(name,)) for name in ("cancels", "renames")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        fresh = registry.get_env_constructor("airline")()

    cancelled = built["cancels"].tools.db.reservations[reservation_id]
    renamed = built["renames"].tools.db.reservations[reservation_id]
    assert (cancelled.status, cancelled.passengers[0].first_name) == ("cancelled", original["passengers"][0]["first_name"])
    assert (renamed.status, renamed.passengers[0].first_name) == (None, "Renamed")
    assert len(cancelled.payment_history) == 2 * len(original["payment_history"])
    assert fresh.tools.db.reservations[reservation_id].model_dump() == original
    hashes = [built["cancels"].get_db_hash(), built["renames"].get_db_hash(), fresh.get_db_hash()]
    assert hashes == [get_dict_hash(e.tools.db.model_dump()) for e in (built["cancels"], built["renames"], fresh)]
    assert hashes[2] == get_dict_hash(pristine.model_dump()) and len(set(hashes)) == 3


def test_tau2_a2a_run_uses_them_while_it_runs_and_importing_does_not(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    probe = ("import tau2_a2a.tau2bench.speed.environments; from tau2.registry import registry; "
             "print(type(registry.get_env_constructor('airline')).__name__)")
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert imported.stdout.strip() == "function"
    built = []
    stock_build = CachedEnvironments.__call__

    def counted_build(self: CachedEnvironments, *args: Any, **kwargs: Any) -> Any:
        built.append(self)
        return stock_build(self, *args, **kwargs)

    monkeypatch.setattr(CachedEnvironments, "__call__", counted_build)

    with environments(False):
        evaluate(RunSettings(domain="airline", agent="oracle_agent", agent_llm="oracle", user="scripted_user",
                             user_llm="scripted", user_llm_args={}, agent_llm_args={},
                             results_dir=str(tmp_path), save_to="native", task_ids=["0"], max_concurrency=1))
        assert built  # the run built its environments from the cache
        assert not isinstance(registry.get_env_constructor("airline"), CachedEnvironments)  # and put tau2's back
    saved = json.loads(results_path("native", tmp_path).read_text())
    assert [s["reward_info"]["reward"] for s in saved["simulations"]] == [1.0]


def test_the_registry_tables_the_cache_replaces_are_taus_own() -> None:
    tables = registry_tables()  # raises, naming what is missing, when tau2's registry changes shape
    info = registry.get_info()
    assert sorted(tables["domains"]) == sorted(info.domains)
    assert set(info.task_sets) <= set(tables["tasks"])
    assert tables["domains"]["airline"] is registry.get_env_constructor("airline") or isinstance(
        tables["domains"]["airline"], CachedEnvironments)
