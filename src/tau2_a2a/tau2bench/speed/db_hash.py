"""tau2's database hash of a copy, from its template's JSON text and the records the copy touched.

tau2 hashes a database as SHA-256 of `json.dumps(db.model_dump(),
sort_keys=True, default=str)`, twice per simulation (the gold environment and
the predicted one). That text is the concatenation of each record's own JSON
text in key order, so `TemplateText` encodes the template's text once per
process, with where each record's entry lies in it. A copy's text is then the
template's bytes, fed to SHA-256 as slices (no copy of them), with the entries
of the records the simulation changed, added or removed in their places. A
record the simulation only read is dumped (through the database model's own
serializer, `model_dump(include=...)`) and encoded again, and keeps the
template's bytes when its text is the same. Airline's text is 3.4 MB: joining
it into one string per hash cost more than hashing it.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TypeGuard

from pydantic import BaseModel

from tau2_a2a.tau2bench.speed.copy_on_access import CopyOnAccess, unchanged

Piece = bytes | memoryview  # a part of the hashed text, in order


def tau2_json(value: object) -> str:
    """JSON text exactly as tau2's `get_dict_hash` encodes a value (ASCII: json.dumps escapes the rest)."""
    return json.dumps(value, sort_keys=True, default=str)


@dataclass(frozen=True)
class RecordTable:
    """One record table of a template (`FlightDB.reservations`): its records, their texts, its encoded text."""

    records: dict
    keys: list[str]  # sorted, as json.dumps(sort_keys=True) orders them
    texts: dict[str, str]  # key -> the record's JSON text
    encoded: bytes  # the table's JSON text: '{"key": text, "key": text}'
    starts: list[int]  # where entry i ('"key": text') begins in `encoded`
    ends: list[int]  # where it ends

    @classmethod
    def of(cls, records: dict, dumped: dict) -> RecordTable:
        keys = sorted(records)
        texts = {key: tau2_json(dumped[key]) for key in keys}
        entries, starts, ends, at = [], [], [], 1
        for key in keys:
            entry = f"{json.dumps(key)}: {texts[key]}"
            entries.append(entry)
            starts.append(at)
            at += len(entry)
            ends.append(at)
            at += 2  # ", "
        return cls(records, keys, texts, ("{" + ", ".join(entries) + "}").encode(), starts, ends)

    def changed(self, records: CopyOnAccess) -> list[str] | None:
        """The keys of the records that `records` (a copy of this table) added or may have changed; None if a
        key is not a string (tau2's JSON would turn it into one: not ours to tell)."""
        owned = records.owned_keys()
        if not _all_str(owned):
            return None
        template = self.records
        return [key for key in owned
                if key not in template or not unchanged(dict.__getitem__(records, key), template[key])]

    def pieces(self, records: CopyOnAccess, changed: list[str], dumped: dict) -> list[Piece]:
        """The JSON text of `records` (a copy of this table whose records `changed` were dumped in `dumped`):
        runs of the template's entries as slices, changed entries encoded anew."""
        edits: dict[str, str | None] = {}  # key -> its entry's new text; None: removed
        for key in changed:
            text = tau2_json(dumped[key])
            if text != self.texts.get(key):
                edits[key] = text
        added = sum(1 for key in changed if key not in self.records)
        if len(records) - added != len(self.records):  # some of the template's records deleted
            edits.update({key: None for key in self.keys if key not in records})
        whole, keys, starts, ends = memoryview(self.encoded), self.keys, self.starts, self.ends
        if not edits:
            return [whole]
        out: list[Piece] = [b"{"]
        at = 0  # the template's next entry not yet written

        def put(piece: Piece) -> None:
            if len(out) > 1:
                out.append(b", ")
            out.append(piece)

        for key in sorted(edits):
            index = bisect.bisect_left(keys, key)
            if at < index:
                put(whole[starts[at]:ends[index - 1]])
            new_text = edits[key]
            if new_text is not None:
                put(f"{json.dumps(key)}: {new_text}".encode())
            at = index + 1 if index < len(keys) and keys[index] == key else index
        if at < len(keys):
            put(whole[starts[at]:ends[-1]])
        out.append(b"}")
        return out


class TemplateText:
    """A template database's text as tau2 hashes it, kept record by record for its copies' hashes."""

    def __init__(self, model: type[BaseModel], names: list[str], tables: dict[str, RecordTable]) -> None:
        self.model = model
        self.names = names  # the database's fields, sorted
        self.tables = tables  # the fields that are record tables

    @classmethod
    def of(cls, template: BaseModel, dumped: dict) -> TemplateText | None:
        """The text of `template` (dumped as `dumped`), or None where a copy's text could differ from the sum
        of its records'.

        A database model that serializes itself (a model or field serializer,
        a computed field) could make one record's text depend on another's.
        """
        model = type(template)
        decorators = model.__pydantic_decorators__
        if decorators.model_serializers or decorators.field_serializers or model.model_computed_fields:
            return None
        state = template.__dict__
        tables = {}
        for name in sorted(dumped):
            records, texts_of = state.get(name), dumped[name]
            if type(records) is not dict or type(texts_of) is not dict or texts_of.keys() != records.keys():
                continue
            if all(type(key) is str for key in records):
                tables[name] = RecordTable.of(records, texts_of)
        return cls(model, sorted(dumped), tables) if tables else None

    def hash(self, db: BaseModel) -> str | None:
        """tau2's hash of `db`, a copy of the template; None if `db` is not one (then tau2's own applies)."""
        pieces = self.pieces(db)
        if pieces is None:
            return None
        digest = hashlib.sha256()
        for piece in pieces:
            digest.update(piece)
        return digest.hexdigest()

    def pieces(self, db: BaseModel) -> list[Piece] | None:
        """The JSON text tau2 hashes, in pieces; None when `db` is not a copy whose text this can tell."""
        if type(db) is not self.model or db.__pydantic_extra__ or db.__pydantic_private__:
            return None
        state = db.__dict__
        include: dict[str, bool | set[str]] = {}
        changed: dict[str, list[str]] = {}
        for name in self.names:
            if name not in state:
                return None
            table = self.tables.get(name)
            if table is None:
                include[name] = True
                continue
            records = state[name]
            if type(records) is not CopyOnAccess or records._template is not table.records:
                return None
            keys = table.changed(records)
            if keys is None:
                return None
            changed[name] = keys
            if keys:
                include[name] = set(keys)
        dumped = db.model_dump(include=include) if include else {}
        out: list[Piece] = []
        for name in self.names:
            out.append(f'{", " if out else "{"}{json.dumps(name)}: '.encode())
            table = self.tables.get(name)
            if table is None:
                out.append(tau2_json(dumped[name]).encode())
            else:
                out += table.pieces(state[name], changed[name], dumped.get(name, {}))
        out.append(b"}")
        return out


def _all_str(keys: list[Hashable]) -> TypeGuard[list[str]]:
    return all(type(key) is str for key in keys)
