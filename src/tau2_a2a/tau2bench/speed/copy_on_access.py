"""Copies of pydantic records that share the original's until something reads them.

A database template is never handed out: a simulation's copy starts out
sharing every record with it, and a record is copied the first time anything
reads it, lazily again inside it, so a simulation pays only for what it reads
and never changes the template.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, ItemsView, Iterator, Mapping, ValuesView
from typing import SupportsIndex

from pydantic import BaseModel

_MISSING = object()


class CopyOnAccess(dict):
    """A record table that shares the template's records until a record is read.

    Every way Python code can get at a value (`d[k]`, `get`, `values`, `items`,
    `pop`, `setdefault`, `copy`, `dict(d)`, `{**d}`, `d | x`) first replaces
    the template's record with a `private_copy` owned by this table, so a caller can
    change what it gets without reaching the template. Code that reads the
    underlying storage directly (pydantic's serializer, `==`) only reads.
    A value is this table's own exactly when it is not the template's object.
    """

    __slots__ = ("_template",)

    def __init__(self, template: dict) -> None:
        dict.__init__(self, template)
        self._template = template

    def _own(self, key: Hashable, value: object) -> object:
        if value is self._template.get(key, _MISSING):
            value = private_copy(value)
            dict.__setitem__(self, key, value)
        return value

    def __getitem__(self, key: Hashable) -> object:
        return self._own(key, dict.__getitem__(self, key))

    def get(self, key: Hashable, default: object = None) -> object:
        value = dict.get(self, key, _MISSING)
        return default if value is _MISSING else self._own(key, value)

    def setdefault(self, key: Hashable, default: object = None) -> object:
        if key in self:
            return self[key]
        dict.__setitem__(self, key, default)
        return default

    def pop(self, key: Hashable, *default: object) -> object:
        if key in self:
            value = self[key]
            dict.__delitem__(self, key)
            return value
        return dict.pop(self, key, *default)

    def popitem(self) -> tuple[Hashable, object]:
        if not self:
            raise KeyError("popitem(): dictionary is empty")
        key = next(reversed(self))
        return key, self.pop(key)

    def __iter__(self) -> Iterator[Hashable]:
        # Overriding __iter__ also sends dict(d), {**d} and update(d) through __getitem__.
        return dict.__iter__(self)

    def values(self) -> ValuesView:  # type: ignore[override]
        return _Values(self)

    def items(self) -> ItemsView:  # type: ignore[override]
        return _Items(self)

    def copy(self) -> dict:
        return {key: self[key] for key in self}

    __copy__ = copy

    def __deepcopy__(self, memo: dict[int, object]) -> dict:
        return copy.deepcopy(self.copy(), memo)

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[type[dict], tuple[dict]]:
        return dict, (self.copy(),)

    def __or__(self, other: object) -> dict:
        if not isinstance(other, dict):
            return NotImplemented
        return {**self.copy(), **other}

    def __ror__(self, other: object) -> dict:
        if not isinstance(other, dict):
            return NotImplemented
        return {**other, **self.copy()}

    def owned_keys(self) -> list[Hashable]:
        """The keys whose value is not the template's record (read, replaced or added)."""
        template = self._template
        return [key for key, value in dict.items(self) if value is not template.get(key, _MISSING)]


class _Values(ValuesView):
    """`values()` of a CopyOnAccess: each value through its `__getitem__`, in either direction."""

    _mapping: Mapping[Hashable, object]  # set by ValuesView's __init__ (collections.abc's MappingView)

    def __reversed__(self) -> Iterator[object]:
        for key in reversed(self._mapping):
            yield self._mapping[key]


class _Items(ItemsView):
    """`items()` of a CopyOnAccess: each value through its `__getitem__`, in either direction."""

    _mapping: Mapping[Hashable, object]  # set by ItemsView's __init__ (collections.abc's MappingView)

    def __reversed__(self) -> Iterator[tuple[Hashable, object]]:
        for key in reversed(self._mapping):
            yield key, self._mapping[key]


_ATOMS = frozenset({str, int, float, bool, type(None), bytes})


def private_copy(value: object) -> object:
    """A copy of `value` that shares nothing mutable with it, made lazily where that is cheap.

    A pydantic model gets a new instance whose dict fields are `CopyOnAccess`
    views of the original's (a flight's 30 dates are not copied when a search
    reads one of them), whose model fields are copied the same way, and whose
    other fields are deep-copied. Anything else is deep-copied.
    """
    if not isinstance(value, BaseModel) or value.__pydantic_extra__ or value.__pydantic_private__:
        return copy.deepcopy(value)
    model = copy.copy(value)  # pydantic's shallow copy: own __dict__ and fields-set
    state = model.__dict__
    for name, field in state.items():
        kind = type(field)
        if kind in _ATOMS:
            continue
        state[name] = CopyOnAccess(field) if kind is dict else private_copy(field)
    return model


_SAME_WHEN_EQUAL = frozenset({str, int, bool})  # types whose equal values always have the same JSON text


def unchanged(value: object, original: object) -> bool:
    """Whether `value`, a `private_copy` of `original` (or a part of one), still holds the original's very values.

    True only when every leaf is the original's object, or an equal str, int or bool, in containers of the same
    types, keys and lengths: then any serializer gives both the same output. Anything else it cannot tell
    apart this way (a float or a date copied anew, a model with extra fields) counts as changed.
    """
    if value is original:
        return True
    if type(value) is CopyOnAccess:
        return type(original) is dict and value._template is original and _owned_unchanged(value, original)
    kind = type(value)
    if kind is not type(original):
        return False
    if kind in _SAME_WHEN_EQUAL:
        return value == original
    if isinstance(value, BaseModel) and isinstance(original, BaseModel):
        if value.__pydantic_extra__ or value.__pydantic_private__ or original.__pydantic_extra__:
            return False
        return _dict_unchanged(value.__dict__, original.__dict__)
    if isinstance(value, list | tuple) and isinstance(original, list | tuple):
        return len(value) == len(original) and all(map(unchanged, value, original))
    if isinstance(value, dict) and isinstance(original, dict):
        return _dict_unchanged(value, original)
    return False


def _dict_unchanged(value: dict, original: dict) -> bool:
    return len(value) == len(original) and all(
        key in original and unchanged(item, original[key]) for key, item in dict.items(value))


def _owned_unchanged(value: CopyOnAccess, original: dict) -> bool:
    """A CopyOnAccess view of `original`: only the values it owns can differ."""
    return len(value) == len(original) and all(
        key in original and unchanged(dict.__getitem__(value, key), original[key]) for key in value.owned_keys())
